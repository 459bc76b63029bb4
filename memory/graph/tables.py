"""Where a person's graph is kept: three tables of the relational store, beside the other per-person tables, so
SQLite and PostgreSQL both carry it, and the per-person protocol moves, exports and forgets it.

Each function here runs inside one transaction (``Database.run``)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.db import UtcDateTime, as_utc, metadata
from memory.core.graph_records import SELF, Entity, EntityKind, Relation
from memory.core.records import Scope, Source
from memory.graph.names import name_key

entities = sa.Table(
    "graph_entities",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("person", sa.String(64), nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("kind", sa.String(16), nullable=True),
    sa.Column("created_at", UtcDateTime(), nullable=False),
    sa.Column("merged_into", sa.String(32), nullable=True),
    sa.Column("merged_at", UtcDateTime(), nullable=True),
    sa.Index("ix_graph_entities_person", "person"),
)

relations = sa.Table(
    "graph_relations",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("person", sa.String(64), nullable=False),
    sa.Column("subject", sa.String(32), nullable=False),
    sa.Column("relation", sa.Text, nullable=False),
    sa.Column("relation_key", sa.Text, nullable=False),
    sa.Column("object", sa.String(32), nullable=False),
    sa.Column("evidence", sa.Text, nullable=False),  # JSON list of quotes
    sa.Column("evidence_sentences", sa.Text, nullable=False),  # JSON list
    sa.Column("sources", sa.Text, nullable=False),  # JSON list of {platform, chat_id, message_id, timestamp}
    sa.Column("scope", sa.String(8), nullable=False),
    sa.Column("valid_from", UtcDateTime(), nullable=False),
    sa.Column("valid_to", UtcDateTime(), nullable=True),
    sa.Column("created_at", UtcDateTime(), nullable=False),
    sa.Column("note_id", sa.String(64), nullable=True),
    sa.Column("memory_id", sa.String(64), nullable=True),
    sa.Index("ix_graph_relations_person", "person"),
    sa.Index("ix_graph_relations_note", "note_id"),
    sa.Index("ix_graph_relations_memory", "memory_id"),
)

# Two beings the person said are not one: the alias rules never join them again.
apart = sa.Table(
    "graph_apart",
    metadata,
    sa.Column("person", sa.String(64), primary_key=True),
    sa.Column("first", sa.String(32), primary_key=True),
    sa.Column("second", sa.String(32), primary_key=True),
    sa.Column("at", UtcDateTime(), nullable=False),
)

GRAPH_TABLES = (entities, relations, apart)


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _source_json(s: Source) -> dict[str, str]:
    data = {"platform": s.platform, "chat_id": s.chat_id, "message_id": s.message_id,
            "timestamp": as_utc(s.timestamp).isoformat()}
    if s.medium:
        data["medium"] = s.medium
    return data


def _source(data: dict[str, str]) -> Source:
    return Source(data["platform"], data["chat_id"], data["message_id"], datetime.fromisoformat(data["timestamp"]),
                  str(data.get("medium") or ""))


def entity_of(row: sa.Row[Any]) -> Entity:
    return Entity(row.id, row.person, row.name, EntityKind(row.kind) if row.kind else None, row.created_at,
                  row.merged_into, row.merged_at)


def relation_of(row: sa.Row[Any]) -> Relation:
    return Relation(
        id=row.id, person=row.person, subject=row.subject, relation=row.relation, relation_key=row.relation_key,
        object=row.object, evidence=tuple(json.loads(row.evidence)),
        evidence_sentences=tuple(json.loads(row.evidence_sentences)),
        sources=tuple(_source(s) for s in json.loads(row.sources)), scope=Scope(row.scope),
        valid_from=row.valid_from, created_at=row.created_at, valid_to=row.valid_to, note_id=row.note_id,
        memory_id=row.memory_id,
    )


def _entity_values(e: Entity) -> dict[str, Any]:
    return {"id": e.id, "person": e.person, "name": e.name, "kind": e.kind.value if e.kind else None,
            "created_at": e.created_at, "merged_into": e.merged_into, "merged_at": e.merged_at}


def _relation_values(r: Relation) -> dict[str, Any]:
    return {"id": r.id, "person": r.person, "subject": r.subject, "relation": r.relation,
            "relation_key": r.relation_key, "object": r.object, "evidence": _dumps(list(r.evidence)),
            "evidence_sentences": _dumps(list(r.evidence_sentences)),
            "sources": _dumps([_source_json(s) for s in r.sources]), "scope": r.scope.value,
            "valid_from": r.valid_from, "valid_to": r.valid_to, "created_at": r.created_at, "note_id": r.note_id,
            "memory_id": r.memory_id}


def read_graph(conn: Connection, person: str) -> tuple[list[Entity], list[Relation], list[tuple[str, str]]]:
    """Everything of ``person``'s graph: entities, relations, and the beings kept apart, each in the order they were
    kept (an order of its own: PostgreSQL, unlike SQLite, returns rows in no particular order without one)."""
    found = [entity_of(r) for r in conn.execute(sa.select(entities).where(entities.c.person == person)
                                                .order_by(entities.c.created_at, entities.c.id))]
    links = [relation_of(r) for r in conn.execute(sa.select(relations).where(relations.c.person == person)
                                                  .order_by(relations.c.created_at, relations.c.id))]
    pairs = [(r.first, r.second) for r in conn.execute(sa.select(apart).where(apart.c.person == person)
                                                       .order_by(apart.c.first, apart.c.second))]
    return found, links, pairs


def write_growth(conn: Connection, changed: Sequence[Entity], added: Sequence[Relation]) -> None:
    """Entities new or changed (upserted by id) and new relations (a relation already there is left as it is)."""
    for e in {e.id: e for e in changed}.values():
        if conn.execute(sa.select(entities.c.id).where(entities.c.id == e.id)).first() is None:
            conn.execute(entities.insert().values(**_entity_values(e)))
        else:
            conn.execute(entities.update().where(entities.c.id == e.id).values(**_entity_values(e)))
    for r in added:
        if conn.execute(sa.select(relations.c.id).where(relations.c.id == r.id)).first() is None:
            conn.execute(relations.insert().values(**_relation_values(r)))


def attach_memories(conn: Connection, handled: Iterable[tuple[str, str | None]]) -> list[str]:
    """Each promoted note's relations now point at the memory it became; the ids of the relations changed."""
    changed: list[str] = []
    for note_id, memory_id in handled:
        if memory_id is None:
            continue
        ids = list(conn.execute(sa.select(relations.c.id).where(relations.c.note_id == note_id,
                                                                relations.c.memory_id.is_(None))).scalars())
        if ids:
            conn.execute(relations.update().where(relations.c.id.in_(ids)).values(memory_id=memory_id))
            changed.extend(ids)
    return changed


def end_relations(conn: Connection, person: str, memory_ids: Sequence[str], at: datetime) -> int:
    """The relations whose memory the person said is no longer so held until ``at``."""
    if not memory_ids:
        return 0
    return conn.execute(relations.update().where(relations.c.person == person,
                                                 relations.c.memory_id.in_(list(memory_ids)),
                                                 relations.c.valid_to.is_(None)).values(valid_to=at)).rowcount


def set_apart(conn: Connection, person: str, entity: str, root: str, at: datetime) -> bool:
    """Undo a merge: ``entity`` names a being of its own again, and stays apart from ``root``."""
    done = conn.execute(entities.update().where(entities.c.person == person, entities.c.id == entity,
                                                entities.c.merged_into.is_not(None))
                        .values(merged_into=None, merged_at=None)).rowcount
    first, second = sorted((entity, root))
    if conn.execute(sa.select(apart.c.person).where(apart.c.person == person, apart.c.first == first,
                                                    apart.c.second == second)).first() is None:
        conn.execute(apart.insert().values(person=person, first=first, second=second, at=at))
    return bool(done)


def join(conn: Connection, person: str, entity: str, root: str, at: datetime) -> bool:
    """The person said two names are one: ``entity`` joins ``root`` (and is no longer kept apart from it)."""
    first, second = sorted((entity, root))
    conn.execute(apart.delete().where(apart.c.person == person, apart.c.first == first, apart.c.second == second))
    return bool(conn.execute(entities.update().where(entities.c.person == person, entities.c.id == entity)
                             .values(merged_into=root, merged_at=at)).rowcount)


def delete_relations(conn: Connection, ids: Sequence[str]) -> int:
    return conn.execute(relations.delete().where(relations.c.id.in_(list(ids)))).rowcount if ids else 0


def delete_entities(conn: Connection, person: str, ids: Sequence[str]) -> int:
    """Remove ``ids``; names joined to one of them name beings of their own again."""
    if not ids:
        return 0
    conn.execute(entities.update().where(entities.c.person == person, entities.c.merged_into.in_(list(ids)))
                 .values(merged_into=None, merged_at=None))
    conn.execute(apart.delete().where(apart.c.person == person,
                                      sa.or_(apart.c.first.in_(list(ids)), apart.c.second.in_(list(ids)))))
    return conn.execute(entities.delete().where(entities.c.id.in_(list(ids)))).rowcount


def move_graph(conn: Connection, old: str, new: str) -> int:
    """``old``'s graph becomes ``new``'s (a link): a name both have is one entity, the one ``new`` had."""
    theirs = {name_key(e.name): e.id for e in (entity_of(r) for r in
                                               conn.execute(sa.select(entities).where(entities.c.person == new)))}
    moved = 0
    for e in [entity_of(r) for r in conn.execute(sa.select(entities).where(entities.c.person == old))]:
        same = theirs.get(name_key(e.name))
        if same is None:
            conn.execute(entities.update().where(entities.c.id == e.id).values(person=new))
        else:
            for column in (relations.c.subject, relations.c.object):
                conn.execute(relations.update().where(column == e.id).values({column.name: same}))
            conn.execute(entities.update().where(entities.c.merged_into == e.id).values(merged_into=same))
            conn.execute(entities.delete().where(entities.c.id == e.id))
        moved += 1
    moved += conn.execute(relations.update().where(relations.c.person == old).values(person=new)).rowcount
    for row in list(conn.execute(sa.select(apart).where(apart.c.person == old))):
        conn.execute(apart.delete().where(apart.c.person == old, apart.c.first == row.first,
                                          apart.c.second == row.second))
        if conn.execute(sa.select(apart.c.person).where(apart.c.person == new, apart.c.first == row.first,
                                                        apart.c.second == row.second)).first() is None:
            conn.execute(apart.insert().values(person=new, first=row.first, second=row.second, at=row.at))
    return moved


def export_graph(conn: Connection, person: str) -> dict[str, Any]:
    """The person's graph as their export holds it: every name and every relation with its receipts."""
    found, links, pairs = read_graph(conn, person)
    names = {e.id: e.name for e in found}

    def end(value: str) -> str:
        return "you" if value == SELF else names.get(value, value)

    def when(value: datetime | None) -> str | None:
        return as_utc(value).isoformat() if value is not None else None

    return {
        "entities": [{"id": e.id, "name": e.name, "kind": e.kind.value if e.kind else None,
                      "same_as": e.merged_into, "created_at": when(e.created_at)} for e in found],
        "relations": [{"id": r.id, "subject": end(r.subject), "relation": r.relation, "object": end(r.object),
                       "words": list(r.evidence_sentences or r.evidence), "evidence": list(r.evidence),
                       "sources": [_source_json(s) for s in r.sources], "scope": r.scope.value,
                       "valid_from": when(r.valid_from), "valid_to": when(r.valid_to), "memory_id": r.memory_id}
                      for r in links],
        "kept_apart": [list(p) for p in pairs],
    }
