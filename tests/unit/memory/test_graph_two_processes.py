"""Two kith processes over one database: a graph one of them cached is read again once the other changed it, so a
forget applied by one is gone from the other's very next recall, and a relation one adds is seen by the other."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ground.db import Database
from kith.app.schema import create_schema
from memory.core.graph_records import RelationProposal
from memory.core.records import Scope, Source
from memory.forgetting.scrub import Eraser, scan
from memory.graph import GraphBook, Proposed

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[Database, Database]]:
    first = Database(f"sqlite:///{tmp_path / 'kith.db'}")
    create_schema(first)
    second = Database(f"sqlite:///{tmp_path / 'kith.db'}")
    yield first, second
    second.close()
    first.close()


def said(subject: str, relation: str, obj: str, note: str) -> Proposed:
    words = f"{subject} {relation} {obj}"
    return Proposed(RelationProposal(subject, None, relation, obj, None), (words,), (words,),
                    (Source("telegram", "c", note, NOW),), Scope.DM, NOW, note_id=note)


async def test_a_forget_by_one_process_is_gone_from_the_others_cached_graph(two: tuple[Database, Database]) -> None:
    one, other = (GraphBook(db, lambda: NOW) for db in two)
    await one.add("p", [said("Ola", "lives in", "Gdańsk", "n1"), said("Rex", "dog of", "PERSON", "n2")])
    cached = await other.of("p")
    assert len(cached.relations) == 2 and await other.of("p") is cached  # read once, then from memory

    await two[0].run(scan, "p", Eraser("Gdańsk"), apply=True)  # the first process forgets a word
    # The other's next message opens its turn in a transaction before recall reads the graph: the cache's version
    # is the database's as that transaction saw it (ground.db.Database.version).
    await two[1].run(lambda _conn: None)
    after = await other.of("p")
    assert [r.relation for r in after.relations.values()] == ["dog of"]
    assert "Gdańsk" not in {e.name for e in after.entities.values()}

    await one.add("p", [said("Ola", "plays", "cello", "n3")])
    await two[1].run(lambda _conn: None)
    assert {r.relation for r in (await other.of("p")).relations.values()} == {"dog of", "plays"}



async def test_a_graph_nothing_wrote_stays_the_same_object_however_long_the_process_was_idle(
        two: tuple[Database, Database], monkeypatch: pytest.MonkeyPatch) -> None:
    book = GraphBook(two[0], lambda: NOW)
    await book.add("p", [said("Ola", "lives in", "Gdańsk", "n1")])
    first = await book.of("p")
    monkeypatch.setattr(two[0], "version", lambda _topic, *, max_age_s: None)  # its last transaction long ago
    assert await book.of("p") is first  # asked the database whether anything changed, not read the graph again
    await GraphBook(two[1], lambda: NOW).add("p", [said("Ola", "plays", "cello", "n2")])
    assert {r.relation for r in (await book.of("p")).relations.values()} == {"lives in", "plays"}
