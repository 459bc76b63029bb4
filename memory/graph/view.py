"""One person's graph in memory, and the pure rules over it: which name is whose, what a new proposal adds,
which relations contradict, and what a message's names reach. No I/O: the book (:mod:`memory.graph.book`)
persists what :meth:`PersonGraph.grow` decides, and the benchmark builds a graph with the same function.

Names. Every name as said is one entity row (an exact-name duplicate is the same row, by its key); names of one
being are joined by ``merged_into``. A new name joins an existing one when exactly one existing being fits:

* it is that being's name with initials after it, or the other way round ("Ola" / "Ola K.");
* it is a role of the person's own ("my sister") and exactly one relation gives the person that role
  ("Ola, sister of, PERSON", or "PERSON, sister, Ola");
* the extractor said, with receipts in the same words, that two names are one ("aliases").

Two beings the person pulled apart (:meth:`PersonGraph.is_apart`) are never joined again by these rules. When two
beings fit, none is chosen: an ambiguous name stays its own.

Contradictions. Only two relations with the same subject, the same relation type and different objects can
contradict ("lives in Gdańsk" / "lives in Sopot"), and even then not when the person has said that subject has
that relation to several things at once (one message naming two sisters), nor between two things of different
kinds. A new relation never ends an old one: a contradiction is asked about; only the answer sets ``valid_to``.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from memory.core.graph_records import SELF, SELF_NAME, Entity, EntityKind, Relation, RelationProposal
from memory.core.records import Scope, Source
from memory.core.text import fold
from memory.graph.names import extends, name_key, relation_key, role_key


def entity_id(person: str, key: str) -> str:
    return "e_" + hashlib.sha256(f"{person}\x00{key}".encode()).hexdigest()[:20]


def relation_id(person: str, subject: str, key: str, obj: str, receipt: str) -> str:
    """Deterministic per receipt: the same proposal from the same note is one relation, however often it comes."""
    joined = "\x00".join((person, subject, key, obj, receipt))
    return "r_" + hashlib.sha256(joined.encode()).hexdigest()[:20]


@dataclass(frozen=True, slots=True)
class Proposed:
    """A validated relation proposal with the receipts of the memory it came with."""

    relation: RelationProposal
    evidence: tuple[str, ...]
    evidence_sentences: tuple[str, ...]
    sources: tuple[Source, ...]
    scope: Scope
    said_at: datetime
    note_id: str | None = None
    memory_id: str | None = None
    aliases: tuple[tuple[str, str], ...] = ()  # names the extractor said are one, both in these receipts


@dataclass(frozen=True, slots=True)
class Growth:
    """What a proposal batch adds: new names, new relations, and names joined to another (merges)."""

    entities: list[Entity] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)
    merges: list[tuple[str, str]] = field(default_factory=list)  # (entity id, joined into this root)


class PersonGraph:
    """One person's entities and relations, with every name resolved to the being it names."""

    def __init__(self, person: str, entities: Iterable[Entity] = (), relations: Iterable[Relation] = (),
                 apart: Iterable[tuple[str, str]] = ()) -> None:
        self.person = person
        self.entities: dict[str, Entity] = {e.id: e for e in entities}
        self.relations: dict[str, Relation] = {r.id: r for r in relations}
        self._apart = {frozenset(p) for p in apart}
        # Kept as the graph grows: names by key and by first word, relations by type.
        self.by_key: dict[str, str] = {}
        self._role_names: list[str] = []  # names that are a role of the person's own ("my sister")
        self._by_first: dict[str, list[tuple[list[str], str]]] = defaultdict(list)
        self._by_type: dict[str, list[str]] = defaultdict(list)  # relation ids by relation key
        for e in self.entities.values():
            self._add_name(e)
        for r in self.relations.values():
            self._by_type[r.relation_key].append(r.id)
        # Read by being (a join moves names between beings): made again when first read after a change.
        self._by_being: tuple[dict[str, list[str]], dict[str, list[Relation]]] | None = None

    def _add_name(self, entity: Entity) -> None:
        key = name_key(entity.name)
        self.by_key[key] = entity.id
        if parts := key.split():
            self._by_first[parts[0]].append((parts, entity.id))
        if role_key(entity.name) is not None:
            self._role_names.append(entity.id)

    def _of_type(self, key: str) -> list[Relation]:
        return [self.relations[i] for i in self._by_type.get(key, ()) if i in self.relations]

    def _changed(self) -> None:
        self._by_being = None

    def _beings(self) -> tuple[dict[str, list[str]], dict[str, list[Relation]]]:
        """Each being's names and the relations touching it, as the graph stands."""
        if self._by_being is None:
            members: dict[str, list[str]] = defaultdict(list)
            for e in self.entities.values():
                members[self.root(e.id)].append(e.id)
            touching: dict[str, list[Relation]] = defaultdict(list)
            for r in self.relations.values():
                for end in {self.root(r.subject), self.root(r.object)}:
                    touching[end].append(r)
            self._by_being = (members, touching)
        return self._by_being

    @property
    def _members(self) -> dict[str, list[str]]:
        return self._beings()[0]

    @property
    def _touching(self) -> dict[str, list[Relation]]:
        return self._beings()[1]

    # --- names ----------------------------------------------------------------------------------
    def root(self, entity: str) -> str:
        """The being ``entity`` names (itself when it was never joined); :data:`SELF` is its own."""
        seen = set()
        while entity in self.entities and (up := self.entities[entity].merged_into) and up not in seen:
            seen.add(entity)
            if up not in self.entities:
                break
            entity = up
        return entity

    def names(self, root: str) -> list[str]:
        """Every name of the being ``root``: its own first, then the others in the order they were said."""
        members = sorted(self._members.get(root, [root]), key=lambda i: (i != root, self.entities[i].created_at)
                         if i in self.entities else (True, datetime.min))
        return [self.entities[i].name for i in members if i in self.entities]

    def name(self, end: str) -> str:
        return SELF_NAME if end == SELF else self.entities[self.root(end)].name if end in self.entities else end

    def kind(self, root: str) -> EntityKind | None:
        kinds = [self.entities[i].kind for i in self._members.get(root, ()) if self.entities[i].kind]
        return kinds[0] if kinds else None

    def roots(self) -> list[str]:
        return [i for i in self.entities if self.root(i) == i]

    def is_apart(self, a: str, b: str) -> bool:
        return frozenset((self.root(a), self.root(b))) in self._apart or frozenset((a, b)) in self._apart

    def resolve(self, name: str, kind: EntityKind | None = None) -> str | None:
        """The one being ``name`` names already, by the rules above, or None (new, or ambiguous)."""
        if name == SELF_NAME or name == SELF:
            return SELF
        key = name_key(name)
        if key in self.by_key:
            return self.root(self.by_key[key])
        fits = self._by_role(name) | self._by_initials(key, kind)
        return next(iter(fits)) if len(fits) == 1 else None

    def _by_role(self, name: str) -> set[str]:
        role = role_key(name)
        if role is None:
            return set()
        found = set()
        for r in self._of_type(role):
            if not r.holds():
                continue
            if self.root(r.object) == SELF and r.subject != SELF:
                found.add(self.root(r.subject))
            elif r.subject == SELF and r.object != SELF:
                found.add(self.root(r.object))
        return found

    def _by_initials(self, key: str, kind: EntityKind | None) -> set[str]:
        found = set()
        parts = key.split()
        # A name with initials after it starts with the same word: only those need a look.
        for other_parts, other in self._by_first.get(parts[0], ()) if parts else ():
            other_key = " ".join(other_parts)
            if extends(key, other_key) or extends(other_key, key):
                root = self.root(other)
                theirs = self.kind(root)
                if kind is None or theirs is None or theirs is kind:
                    found.add(root)
        return found

    # --- relations ------------------------------------------------------------------------------
    def holding(self, *, shared_only: bool = False, at: datetime | None = None) -> list[Relation]:
        return [r for r in self.relations.values() if r.holds(at) and (not shared_only or r.scope is Scope.SHARED)]

    def touching(self, root: str) -> list[Relation]:
        return list(self._touching.get(root, ()))

    def contradictions(self, relation: Relation) -> list[Relation]:
        """The holding relations ``relation`` contradicts (the rule in the module's text)."""
        subject, obj = self.root(relation.subject), self.root(relation.object)
        same_type = [r for r in self._of_type(relation.relation_key) if r.id != relation.id and r.holds()
                     and self.root(r.subject) == subject]
        if not same_type or self._several_at_once(relation, same_type):
            return []
        kind = self.kind(obj) if obj != SELF else None
        out = []
        for other in same_type:
            other_obj = self.root(other.object)
            if other_obj == obj or (other.note_id == relation.note_id and other.note_id is not None):
                continue
            theirs = self.kind(other_obj) if other_obj != SELF else None
            if kind is not None and theirs is not None and kind is not theirs:
                continue
            out.append(other)
        return out

    def _several_at_once(self, relation: Relation, same_type: Sequence[Relation]) -> bool:
        """Whether the person said this subject has this relation to two things in one message."""
        objects_by_message: dict[tuple[str, str, str], set[str]] = defaultdict(set)
        for r in (relation, *same_type):
            for s in r.sources:
                objects_by_message[(s.platform, s.chat_id, s.message_id)].add(self.root(r.object))
        return any(len(objects) > 1 for objects in objects_by_message.values())

    # --- reach ----------------------------------------------------------------------------------
    def mentioned(self, text: str) -> list[str]:
        """The beings ``text`` names, by any of their names (whole words) or a role of the person's own."""
        words = fold(text).replace("’", "'").split()
        cleaned = [name_key(w) for w in words]
        found: dict[str, None] = {}
        for i, word in enumerate(cleaned):
            for parts, entity in self._by_first.get(word, ()):
                if cleaned[i:i + len(parts)] == parts:
                    found[self.root(entity)] = None
        for i in range(len(words) - 1):
            for width in (1, 2):
                phrase = " ".join(words[i:i + 1 + width])
                if role_key(phrase) is not None:
                    root = self.resolve(phrase)
                    if root is not None and root != SELF:
                        found[root] = None
        return list(found)

    def is_hub(self, root: str, hub: int) -> bool:
        """Whether ``root`` is a hub: it touches more than ``hub`` relations, or it is the person themselves. A hub
        reaches nearly everything, so a reach never passes through it (it would select nothing)."""
        return root == SELF or len(self._touching.get(root, ())) > hub

    def neighbourhood(self, roots: Iterable[str], hops: int, *, shared_only: bool,
                      at: datetime | None = None, hub: int | None = None) -> list[tuple[Relation, int]]:
        """The holding relations within ``hops`` of ``roots`` (each with the hop it was reached at), never
        through the person themselves: everything touches them, so passing through them reaches everything.
        With ``hub``, never through any hub (:meth:`is_hub`) either: a hub is reached, its relations are not."""
        frontier = [r for r in roots if r != SELF and (hub is None or not self.is_hub(r, hub))]
        seen_roots = set(frontier)
        out: dict[str, tuple[Relation, int]] = {}
        for hop in range(1, hops + 1):
            following: list[str] = []
            for root in frontier:
                for r in self._touching.get(root, ()):
                    if not r.holds(at) or (shared_only and r.scope is not Scope.SHARED) or r.id in out:
                        continue
                    out[r.id] = (r, hop)
                    for end in (self.root(r.subject), self.root(r.object)):
                        if end != SELF and end not in seen_roots:
                            seen_roots.add(end)
                            if hub is None or not self.is_hub(end, hub):
                                following.append(end)
            frontier = following
        return list(out.values())

    # --- growing --------------------------------------------------------------------------------
    def grow(self, proposals: Sequence[Proposed], now: datetime) -> Growth:
        """Add ``proposals`` to this graph (in place) and say what was added, for the book to write."""
        growth = Growth()
        for p in proposals:
            ends = []
            for name, kind in ((p.relation.subject, p.relation.subject_kind),
                               (p.relation.object, p.relation.object_kind)):
                ends.append(self._name(name, kind, now, growth))
            subject, obj = ends
            if subject == obj:
                continue
            key = relation_key(p.relation.relation)
            receipt = p.note_id or p.memory_id or "|".join(p.evidence)
            rid = relation_id(self.person, subject, key, obj, receipt)
            if rid in self.relations:
                continue
            relation = Relation(id=rid, person=self.person, subject=subject, relation=p.relation.relation,
                                relation_key=key, object=obj, evidence=p.evidence,
                                evidence_sentences=p.evidence_sentences, sources=p.sources, scope=p.scope,
                                valid_from=p.said_at, created_at=now, note_id=p.note_id, memory_id=p.memory_id)
            self.relations[rid] = relation
            self._by_type[key].append(rid)
            growth.relations.append(relation)
            self._changed()
            for a, b in p.aliases:
                self._join_named(a, b, now, growth)
        # A role said before the relation that names it ("my sister" before "Ola, sister of, PERSON"): joined now.
        for entity in [self.entities[i] for i in self._role_names]:
            if entity.merged_into is None:
                found = self._by_role(entity.name) - {entity.id}
                if len(found) == 1:
                    self._join(entity.id, next(iter(found)), now, growth)
        return growth

    def _name(self, name: str, kind: EntityKind | None, now: datetime, growth: Growth) -> str:
        """The entity row for ``name`` as said (made when new, and joined to the being it names if one fits)."""
        if name in (SELF, SELF_NAME):
            return SELF
        key = name_key(name)
        if key in self.by_key:
            existing = self.entities[self.by_key[key]]
            if existing.kind is None and kind is not None:
                self.entities[existing.id] = updated = replace(existing, kind=kind)
                growth.entities.append(updated)
            return existing.id
        fits = self.resolve(name, kind)
        entity = Entity(entity_id(self.person, key), self.person, name, kind, now)
        self.entities[entity.id] = entity
        self._add_name(entity)
        growth.entities.append(entity)
        self._changed()
        if fits is not None and fits != SELF:
            self._join(entity.id, fits, now, growth)
        return entity.id

    def _join_named(self, a: str, b: str, now: datetime, growth: Growth) -> None:
        ka, kb = name_key(a), name_key(b)
        if ka in self.by_key and kb in self.by_key:
            self._join(self.by_key[kb], self.root(self.by_key[ka]), now, growth)

    def _join(self, entity: str, root: str, now: datetime, growth: Growth) -> None:
        if self.root(entity) == self.root(root) or self.is_apart(entity, root):
            return
        mine, theirs = self.kind(self.root(entity)), self.kind(self.root(root))
        if mine is not None and theirs is not None and mine is not theirs:
            return
        moved = self.root(entity)
        self.entities[moved] = joined = replace(self.entities[moved], merged_into=self.root(root), merged_at=now)
        growth.entities.append(joined)
        growth.merges.append((moved, self.root(root)))
        self._changed()
