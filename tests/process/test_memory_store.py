"""The Chroma memory store, embedded and against a real ``chroma run`` server, through the same code.

The ``store`` fixture keeps a change log (:mod:`memory.store.changes`), as kith's processes do, so
lookups are answered from memory; a few tests open stores without one (the Chroma path).
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from ground.db import Database
from ground.tunables import MEMORY_EDIT_ATTEMPTS
from memory.capture import job as _capture_tables  # noqa: F401  (declares capture_cursors)
from memory.core.records import MemoryKind, MemoryRecord, Scope, Status
from memory.encoders.embedders import EmbedderStatus
from memory.forgetting import Forgetter, TombstoneBook
from memory.forgetting import tombstones as _tombstone_tables  # noqa: F401  (declares memory_tombstones)
from memory.store import MemoryStore, RevisionConflict
from memory.store.changes import ChangeLog, memory_changes
from memory.store.chroma import Collection, check_chroma
from memory.store.notes import Note
from tests.support.database import open_db
from tests.support.memory import T0, memory_settings, record
from tests.support.ports import free_port

NONE_STATUS = EmbedderStatus("none", ready=False, disabled=True)


# --- the Chroma server, one per test session ------------------------------------------------
@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    exe = Path(sys.executable).parent / "chroma"
    assert exe.exists(), f"the chroma executable is missing next to {sys.executable}"
    path = tmp_path_factory.mktemp("chroma-server")
    port = free_port()
    log = (path / "server.log").open("wb")
    proc = subprocess.Popen(
        [str(exe), "run", "--path", str(path / "db"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, "chroma run exited: " + (path / "server.log").read_text(
                errors="replace"
            )
            assert time.monotonic() < deadline, "chroma run gave no heartbeat within 60 s"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


@pytest.fixture(params=["embedded", "server"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MemoryStore]:
    chroma_url = request.getfixturevalue("chroma_server") if request.param == "server" else ""
    settings = memory_settings(tmp_path, chroma_url=chroma_url)
    # Tests sharing the server keep to their own collections.
    namespace = f"t{secrets.token_hex(4)}-" if chroma_url else ""
    db = open_db(tmp_path)
    opened = await MemoryStore.open(
        settings.memory, settings.storage.data_path(), None, NONE_STATUS, namespace=namespace, changes=ChangeLog(db)
    )
    opened.reopen_args = (settings, namespace, db)  # type: ignore[attr-defined]
    try:
        yield opened
    finally:
        await opened.close()
        db.close()


async def reopen(store: MemoryStore) -> MemoryStore:
    """Another kith process on the same Chroma and database (its own store, index and change-log cursor)."""
    settings, namespace, db = store.reopen_args  # type: ignore[attr-defined]
    return await MemoryStore.open(
        settings.memory, settings.storage.data_path(), None, NONE_STATUS, namespace=namespace, changes=ChangeLog(db)
    )


# --- the tests ----------------------------------------------------------------------------
async def test_a_memory_comes_back_with_every_field(store: MemoryStore) -> None:
    original = dataclasses.replace(
        record("p_ana", "Ana is vegetarian", evidence=["I'm vegetarian", "no meat for me"]),
        importance=0.75,
        pinned=True,
        expires_at=T0 + timedelta(days=30),
        conflicts_with=("m_other",),
        use_count=3,
        last_used_at=T0 + timedelta(hours=1),
    )
    await store.add_memory(original)
    assert await store.get_memory(original.id) == original
    assert await store.get_memory("m_missing") is None


async def test_memories_are_kept_per_person_and_status(store: MemoryStore) -> None:
    ana = record("p_ana", "Ana plays the cello")
    old = record("p_ana", "Ana lives in Lyon", status=Status.SUPERSEDED)
    bob = record("p_bob", "Bob plays the drums")
    for r in (ana, old, bob):
        await store.add_memory(r)
    assert [m.id for m in await store.memories_of("p_ana")] == [ana.id]
    assert {m.id for m in await store.memories_of("p_ana", statuses=None)} == {ana.id, old.id}
    hits = await store.nearest("p_ana", await store.vectors(["Ana plays the cello"]), 5)
    # Only Ana's active memory, and a hashed vector's cosine is never presented as an embedder's.
    assert [(h.record.id, h.trusted) for h in hits] == [(ana.id, False)]
    assert hits[0].cosine == pytest.approx(1.0, abs=1e-4)


async def test_a_stale_writer_gets_a_revision_conflict_and_loses_nothing(store: MemoryStore) -> None:
    stored = await store.add_memory(record("p_ana", "Ana uses Postgres", evidence=["I use Postgres"]))
    first = dataclasses.replace(stored, evidence=(*stored.evidence, "Database is Postgres"))
    second = dataclasses.replace(stored, importance=0.9)
    written = await store.replace_memory(first)
    assert written.revision == 2
    with pytest.raises(RevisionConflict):
        await store.replace_memory(second)  # based on revision 1: refused, not silently applied
    # The loser re-reads and retries; both changes survive.
    fresh = await store.get_memory(stored.id)
    assert fresh is not None
    await store.replace_memory(dataclasses.replace(fresh, importance=0.9))
    final = await store.get_memory(stored.id)
    assert final is not None
    assert final.evidence == ("I use Postgres", "Database is Postgres")
    assert final.importance == 0.9 and final.revision == 3


async def test_two_concurrent_writers_one_wins_one_conflicts(store: MemoryStore) -> None:
    stored = await store.add_memory(record("p_ana", "Ana runs marathons"))
    both_read = asyncio.Barrier(2)

    async def writer(quote: str) -> str:
        current = await store.get_memory(stored.id)
        assert current is not None
        await both_read.wait()  # both hold revision 1 before either writes
        try:
            await store.replace_memory(dataclasses.replace(current, evidence=(*current.evidence, quote)))
            return "won"
        except RevisionConflict:
            return "conflict"

    outcomes = await asyncio.gather(writer("I ran Berlin"), writer("I ran Paris"))
    assert sorted(outcomes) == ["conflict", "won"]
    final = await store.get_memory(stored.id)
    assert final is not None and final.revision == 2 and len(final.evidence) == 2


# --- one edit: read, change, compare-and-swap, and again after a lost race ---------------------------
async def test_an_edit_that_lost_a_race_reads_again_and_both_changes_land(store: MemoryStore) -> None:
    stored = await store.add_memory(record("p_ana", "Ana runs marathons"))
    read: list[int] = []

    async def change(current: MemoryRecord) -> MemoryRecord:
        read.append(current.revision)
        if len(read) == 1:  # another writer lands between this edit's read and its write
            await store.replace_memory(dataclasses.replace(current, importance=0.9))
        return dataclasses.replace(current, evidence=(*current.evidence, "I ran Berlin"))

    edited = await store.edit(stored.id, change)

    assert read == [1, 2]  # the second attempt changed what the other writer left
    final = await store.get_memory(stored.id)
    assert final is not None and edited == final
    assert (final.importance, final.evidence[-1], final.revision) == (0.9, "I ran Berlin", 3)


async def test_an_edit_gives_up_after_the_tunable_number_of_lost_races(store: MemoryStore) -> None:
    stored = await store.add_memory(record("p_ana", "Ana runs marathons"))
    attempts = 0

    def change(current: MemoryRecord) -> MemoryRecord:
        nonlocal attempts
        attempts += 1
        return dataclasses.replace(current, importance=0.9)

    async def always_beaten(updated: MemoryRecord) -> MemoryRecord:
        raise RevisionConflict(updated.id, updated.revision, updated.revision + 1)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store, "replace_memory", always_beaten)
        with pytest.raises(RevisionConflict):
            await store.edit(stored.id, change)

    assert attempts == MEMORY_EDIT_ATTEMPTS
    assert await store.get_memory(stored.id) == stored


async def test_an_edit_of_a_memory_that_is_gone_returns_none_and_writes_nothing(store: MemoryStore) -> None:
    def never(_current: MemoryRecord) -> MemoryRecord:
        raise AssertionError("a memory that is not there is not changed")

    assert await store.edit("m_missing", never) is None

    stored = await store.add_memory(record("p_ana", "Ana runs marathons"))

    async def forgotten_meanwhile(current: MemoryRecord) -> MemoryRecord:
        await store.delete_memories([current.id])  # gone between the edit's read and its write
        return dataclasses.replace(current, importance=0.9)

    assert await store.edit(stored.id, forgotten_meanwhile) is None
    assert await store.get_memory(stored.id) is None


async def test_an_edit_that_refuses_or_changes_nothing_writes_nothing(store: MemoryStore) -> None:
    stored = await store.add_memory(record("p_ana", "Ana runs marathons"))

    assert await store.edit(stored.id, lambda _current: None) is None
    assert await store.edit(stored.id, lambda current: current) == stored
    assert await store.get_memory(stored.id) == stored  # still revision 1


async def test_the_lexical_index_follows_every_write(store: MemoryStore) -> None:
    cello = await store.add_memory(record("p_ana", "Ana plays the cello in an orchestra"))
    await store.add_memory(record("p_bob", "Bob plays the cello badly"))
    assert [r.id for r, _s in await store.lexical("p_ana", "cello", 5)] == [cello.id]
    later = await store.add_memory(record("p_ana", "Ana bought a new cello bow"))
    assert {r.id for r, _s in await store.lexical("p_ana", "cello", 5)} == {cello.id, later.id}
    await store.replace_memory(dataclasses.replace(later, text="Ana bought a violin bow"))
    assert [r.id for r, _s in await store.lexical("p_ana", "cello", 5)] == [cello.id]
    await store.delete_memories([cello.id])
    assert await store.lexical("p_ana", "cello", 5) == []
    assert await store.get_memories([cello.id]) == []


async def test_notes_stage_once_and_record_their_promotion(store: MemoryStore) -> None:
    note = Note(record("p_ana", "Ana is learning Rust", kind=MemoryKind.GOAL), conversation="console:ana")
    assert await store.add_notes([note]) == [note.record.id]
    assert await store.add_notes([note]) == []  # the same capture twice stages one note
    assert [n.record.id for n in await store.notes_of("p_ana", unpromoted_only=True)] == [note.record.id]
    await store.mark_promoted(note.record.id, "m_target", T0)
    assert await store.notes_of("p_ana", unpromoted_only=True) == []
    (kept,) = await store.notes_of("p_ana")
    assert kept.promoted_to == "m_target" and kept.record == note.record
    assert await store.chroma.count(Collection.NOTES) == 1


async def test_reassign_moves_memory_to_the_linked_person(store: MemoryStore) -> None:
    memory = await store.add_memory(record("p_old", "Ana keeps bees"))
    await store.add_notes([Note(record("p_old", "Ana sells honey"))])
    assert await store.lexical("p_old", "bees", 3)  # builds p_old's index before the move
    assert await store.reassign("p_old", "p_new", T0) == (1, 1)
    assert await store.memories_of("p_old") == [] and await store.notes_of("p_old") == []
    (moved,) = await store.memories_of("p_new")
    assert moved.id == memory.id and moved.revision == memory.revision + 1  # stale writers will notice
    assert [r.id for r, _s in await store.lexical("p_new", "bees", 3)] == [memory.id]
    assert await store.lexical("p_old", "bees", 3) == []
    with pytest.raises(RevisionConflict):
        await store.replace_memory(dataclasses.replace(memory, importance=1.0))


async def test_records_survive_closing_and_reopening(store: MemoryStore) -> None:
    memory = await store.add_memory(record("p_ana", "Ana's cat is called Miso"))
    again = await reopen(store)
    try:
        assert await again.get_memory(memory.id) == memory
        assert [r.id for r, _s in await again.lexical("p_ana", "Miso", 3)] == [memory.id]
    finally:
        await again.close()


async def test_a_person_with_many_memories_is_searched_without_seeing_anyone_else(tmp_path: Path) -> None:
    # Past ``filtered_query_max`` memories a person is searched unfiltered and filtered here.
    settings = memory_settings(tmp_path)
    store = await MemoryStore.open(
        settings.memory, settings.storage.data_path(), None, NONE_STATUS, filtered_query_max=5
    )
    try:
        ana = [record("p_ana", f"Ana visited island number {i}") for i in range(12)]
        bob = [record("p_bob", f"Bob visited island number {i}") for i in range(12)]
        await store.add_memories(ana + bob)
        hits = await store.nearest("p_ana", await store.vectors(["Bob visited island number 3"]), 6)
        assert len(hits) == 6 and {h.record.person for h in hits} == {"p_ana"}
        assert hits[0].record.text == "Ana visited island number 3"
        found = await store.candidates("p_ana", vectors=await store.vectors(["island"]), query="island", k=4)
        assert {c.summary.person for c in found} == {"p_ana"}
    finally:
        await store.close()


async def test_without_a_change_log_a_memory_forgotten_elsewhere_is_not_served(tmp_path: Path) -> None:
    # No change log: hits are re-read from Chroma by id, which finds the forget.
    settings = memory_settings(tmp_path)
    path = settings.storage.data_path()
    bot = await MemoryStore.open(settings.memory, path, None, NONE_STATUS)
    operator = await MemoryStore.open(settings.memory, path, None, NONE_STATUS)
    try:
        kept = await bot.add_memory(record("p_ana", "Ana keeps bees on the roof"))
        gone = await bot.add_memory(record("p_ana", "Ana keeps a secret diary"))
        assert len(await bot.lexical("p_ana", "keeps", 5)) == 2  # the bot's index holds both
        await operator.delete_memories([gone.id])  # e.g. `bot.py memory forget` while kith runs
        assert [r.id for r, _s in await bot.lexical("p_ana", "keeps diary", 5)] == [kept.id]
        vectors = await bot.vectors(["Ana keeps a secret diary"])
        assert [h.record.id for h in await bot.nearest("p_ana", vectors, 5)] == [kept.id]
        assert gone.id not in {c.summary.id for c in await bot.candidates("p_ana", query="diary", k=5)}
    finally:
        await operator.close()
        await bot.close()


async def test_warming_indexes_everyone_at_once(store: MemoryStore) -> None:
    await store.add_memories([record("p_ana", "Ana rows on the river"), record("p_bob", "Bob rows at dawn")])
    again = await reopen(store)
    try:
        assert await again.indexes.warm() == 2
        assert [r.text for r, _s in await again.lexical("p_bob", "rows", 3)] == ["Bob rows at dawn"]
    finally:
        await again.close()


def spy(monkeypatch: pytest.MonkeyPatch, target: object, method: str) -> list[object]:
    """Calls of one of ``target``'s methods (the store's Chroma reads, its change log's), recorded (they still run)."""
    calls: list[object] = []
    real = getattr(target, method)
    monkeypatch.setattr(target, method, lambda *a, **kw: calls.append(a) or real(*a, **kw))
    return calls


async def test_a_memory_written_is_found_by_its_vector_from_memory(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.add_memories([record("p_ana", f"Ana visited island number {i}") for i in range(20)])
    chroma_searches = spy(monkeypatch, store.chroma, "nearest_sync")
    vector_loads = spy(monkeypatch, store.chroma, "person_vectors_sync")

    async def nearest(text: str) -> list[tuple[MemoryRecord, float]]:
        hits, _lexical = await store.lookup("p_ana", vectors=await store.vectors([text]), k=3)
        return [(h.record, h.cosine) for h in hits]

    assert (await nearest("Ana visited island number 7"))[0][0].text == "Ana visited island number 7"
    kayak = await store.add_memory(record("p_ana", "Ana sails a red kayak to the lighthouse"))
    ((found, cosine), *_rest) = await nearest("Ana sails a red kayak to the lighthouse")
    assert found == kayak and cosine == pytest.approx(1.0, abs=1e-4)
    canoe = await store.replace_memory(dataclasses.replace(kayak, text="Ana paddles a yellow canoe on the lake"))
    ((found, cosine), *_rest) = await nearest("Ana paddles a yellow canoe on the lake")
    assert found == canoe and found.revision == 2 and cosine == pytest.approx(1.0, abs=1e-4)
    assert all(cos < 0.9 for _r, cos in await nearest("Ana sails a red kayak to the lighthouse"))  # old vector gone
    await store.delete_memories([canoe.id])
    assert canoe.id not in {r.id for r, _c in await nearest("Ana paddles a yellow canoe on the lake")}
    assert chroma_searches == []  # every answer came from memory
    assert len(vector_loads) == 1  # loaded once; every later write carried its vector into memory


async def test_a_forget_in_another_process_is_not_recalled_afterwards(store: MemoryStore) -> None:
    kept = await store.add_memory(record("p_ana", "Ana keeps bees on the roof"))
    gone = await store.add_memory(record("p_ana", "Ana keeps a secret diary under the bed"))
    diary = await store.vectors(["Ana keeps a secret diary under the bed"])
    hits, lexical = await store.lookup("p_ana", vectors=diary, query="secret diary", k=5)
    assert hits[0].record.id == gone.id and [r.id for r, _s in lexical] == [gone.id]  # held in memory now
    operator = await reopen(store)  # e.g. `bot.py memory forget` while kith runs
    try:
        forgetter = Forgetter(operator, TombstoneBook(store.reopen_args[2]), lambda: T0)  # type: ignore[attr-defined]
        assert (await forgetter.apply(await forgetter.plan("p_ana", "secret diary"))).memories_deleted == 1
        hits, lexical = await store.lookup("p_ana", vectors=diary, query="secret diary", k=5)
        assert [h.record.id for h in hits] == [kept.id] and lexical == []
        assert gone.id not in {c.summary.id for c in await store.candidates("p_ana", vectors=diary, k=5)}
        # What the other process writes or retires is seen as well.
        journal = await operator.add_memory(record("p_ana", "Ana keeps a journal of bee sightings"))
        await operator.replace_memory(dataclasses.replace(kept, status=Status.RETIRED))
        hits, lexical = await store.lookup("p_ana", vectors=diary, query="bees journal", k=5)
        assert [h.record.id for h in hits] == [journal.id] and [r.id for r, _s in lexical] == [journal.id]
    finally:
        await operator.close()


async def test_reassign_moves_vectors_to_the_linked_person(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    bees = await store.add_memory(record("p_old", "Ana keeps bees"))
    vectors = await store.vectors(["Ana keeps bees"])
    other = await reopen(store)  # another process that has both people in memory
    try:
        for view in (store, other):
            for person in ("p_old", "p_new", "p_last"):
                await view.lookup(person, vectors=vectors, query="bees", k=3)
        loads = [spy(monkeypatch, view.chroma, "person_vectors_sync") for view in (store, other)]
        await store.reassign("p_old", "p_new", T0)
        for view in (store, other):
            hits, lexical = await view.lookup("p_new", vectors=vectors, query="bees", k=3)
            assert [(h.record.id, h.record.person, h.record.revision) for h in hits] == [(bees.id, "p_new", 2)]
            assert hits[0].cosine == pytest.approx(1.0, abs=1e-4) and [r.id for r, _s in lexical] == [bees.id]
            assert await view.lookup("p_old", vectors=vectors, query="bees", k=3) == ([], [])
        await other.reassign("p_new", "p_last", T0)  # and back the other way round
        hits, _lexical = await store.lookup("p_last", vectors=vectors, k=3)
        assert [(h.record.id, h.record.revision) for h in hits] == [(bees.id, 3)]
        assert await store.lookup("p_new", vectors=vectors, query="bees", k=3) == ([], [])
        assert loads == [[], []]  # the vectors moved in memory: nobody read them from Chroma again
    finally:
        await other.close()


async def test_a_group_lookup_gets_its_shared_memories_without_private_ones(store: MemoryStore) -> None:
    private = [record("p_ana", f"Ana's garden plot {i} grows tomatoes") for i in range(30)]
    shared = [record("p_ana", f"Ana's garden club {i} meets on Sunday", scope=Scope.SHARED) for i in range(4)]
    await store.add_memories(private + shared)
    vectors = await store.vectors(["Ana's garden plot 3 grows tomatoes"])
    hits, lexical = await store.lookup("p_ana", vectors=vectors, query="garden", k=3, scope=Scope.SHARED)
    assert len(hits) == 3 and {h.record.scope for h in hits} == {Scope.SHARED}
    assert len(lexical) == 3 and {r.scope for r, _s in lexical} == {Scope.SHARED}
    everyone, _lexical = await store.lookup("p_ana", vectors=vectors, k=3)
    assert everyone[0].record.id == private[3].id
    pinned = await store.replace_memory(dataclasses.replace(shared[0], pinned=True, scope=Scope.DM))
    assert [r.id for r in await store.pinned_of("p_ana")] == [pinned.id]
    hits, lexical = await store.lookup("p_ana", vectors=vectors, query="garden", k=5, scope=Scope.SHARED)
    assert pinned.id not in {h.record.id for h in hits} | {r.id for r, _s in lexical}  # now private


async def test_without_a_change_log_a_group_lookup_still_gets_only_shared_memories(tmp_path: Path) -> None:
    settings = memory_settings(tmp_path)
    store = await MemoryStore.open(
        settings.memory, settings.storage.data_path(), None, NONE_STATUS, filtered_query_max=5
    )
    try:
        await store.add_memories(
            [record("p_ana", f"Ana's garden plot {i} grows tomatoes") for i in range(12)]
            + [record("p_ana", f"Ana's garden club {i} meets", scope=Scope.SHARED) for i in range(3)]
        )
        vectors = await store.vectors(["Ana's garden plot 3 grows tomatoes"])
        hits, lexical = await store.lookup("p_ana", vectors=vectors, query="garden", k=2, scope=Scope.SHARED)
        assert len(hits) == 2 and {h.record.scope for h in hits} == {Scope.SHARED}
        assert len(lexical) == 2 and {r.scope for r, _s in lexical} == {Scope.SHARED}
    finally:
        await store.close()


async def test_a_process_too_far_behind_the_change_log_reads_chroma_afresh(store: MemoryStore) -> None:
    key = await store.add_memory(record("p_ana", "Ana hides a spare key under the mat"))
    assert [r.id for r, _s in (await store.lookup("p_ana", query="spare key", k=3))[1]] == [key.id]
    settings, namespace, db = store.reopen_args  # type: ignore[attr-defined]
    # This writer's log keeps only its newest entry: the bot cannot tell what it missed.
    operator = await MemoryStore.open(
        settings.memory,
        settings.storage.data_path(),
        None,
        NONE_STATUS,
        namespace=namespace,
        changes=ChangeLog(db, keep=1, trim_every=1),
    )
    try:
        await operator.delete_memories([key.id])
        await operator.add_memories([record("p_bob", f"Bob's note {i}") for i in range(3)])
        assert await store.lookup("p_ana", query="spare key", k=3) == ([], [])
    finally:
        await operator.close()


async def test_a_change_committed_late_behind_the_cursor_is_still_read(tmp_path: Path) -> None:
    # On PostgreSQL a writer can commit sequence number 3 after another committed 4.
    db = open_db(tmp_path)
    try:
        log = ChangeLog(db, overlap=4)
        await log.prepare()
        await log.append("cli", [("p_ana", "m1"), ("p_ana", "m2")], T0)
        await log.append("bot", [("p_ana", "m_own")], T0)  # a reader never gets its own entries back
        late = {"writer": "cli", "person": "p_ana", "changed_at": T0}
        await db.run(lambda conn: conn.execute(memory_changes.insert(), [late | {"seq": 5, "memory_id": "m5"}]))
        first = await log.since(0, "bot", 100)
        assert first.complete and first.head == 5 and [c.memory_id for c in first.changes] == ["m1", "m2", "m5"]
        await db.run(lambda conn: conn.execute(memory_changes.insert(), [late | {"seq": 4, "memory_id": "m4"}]))
        second = await log.since(first.head, "bot", 100)
        assert "m4" in [c.memory_id for c in second.changes]
        assert (await log.since(first.head, "bot", 1)).complete is False  # more than the reader may re-read
    finally:
        db.close()


async def test_doctor_checks_the_chroma_in_use(tmp_path: Path, chroma_server: str) -> None:
    embedded = await check_chroma(memory_settings(tmp_path))
    server = await check_chroma(memory_settings(tmp_path, chroma_url=chroma_server))
    missing = await check_chroma(memory_settings(tmp_path, chroma_url=f"http://127.0.0.1:{free_port()}"))
    assert embedded.ok and "embedded" in embedded.detail
    assert server.ok and chroma_server in server.detail
    assert not missing.ok and "memory.chroma_url" in missing.detail


async def test_an_idle_change_log_is_not_read_again_but_another_connections_write_is(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, namespace, db = store.reopen_args  # type: ignore[attr-defined]
    await store.add_memory(record("p_ana", "Ana keeps bees on the roof"))
    reads = spy(monkeypatch, store.changes, "since")
    await store.lookup("p_ana", query="bees", k=5)
    await db.run(lambda conn: None)  # the turn's own transaction, as before every recall
    await store.lookup("p_ana", query="bees", k=5)
    await store.lookup("p_ana", query="bees", k=5)
    assert len(reads) <= 1  # nobody wrote since the last read: the log is not read again
    # A separate connection, as another process has: SQLite's data_version tells this one.
    other_db = Database(db.url)
    other = await MemoryStore.open(
        settings.memory, settings.storage.data_path(), None, NONE_STATUS, namespace=namespace,
        changes=ChangeLog(other_db),
    )
    try:
        diary = await other.add_memory(record("p_ana", "Ana keeps a diary about her bees"))
        await db.run(lambda conn: None)
        _hits, lexical = await store.lookup("p_ana", query="diary bees", k=5)
        assert diary.id in {r.id for r, _s in lexical}
    finally:
        await other.close()
        other_db.close()


async def test_staged_notes_come_from_memory_and_follow_another_process(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, namespace, db = store.reopen_args  # type: ignore[attr-defined]
    honey, rust = Note(record("p_ana", "Ana sells honey")), Note(record("p_ana", "Ana is learning Rust"))
    await store.add_notes([honey, rust])
    scans = spy(monkeypatch, store.chroma, "scan_sync")
    assert {n.record.id for n in await store.notes_of("p_ana", unpromoted_only=True)} == {honey.record.id,
                                                                                          rust.record.id}
    await db.run(lambda conn: None)  # the turn's own transaction, as before every recall
    assert len(await store.notes_of("p_ana", unpromoted_only=True)) == 2
    assert len(scans) == 1  # read once, then served from memory
    other_db = Database(db.url)  # another process, e.g. `bot.py consolidate`, promotes one of them
    other = await MemoryStore.open(
        settings.memory, settings.storage.data_path(), None, NONE_STATUS, namespace=namespace,
        changes=ChangeLog(other_db),
    )
    try:
        assert await other.mark_promoted(honey.record.id, None, T0)
        await db.run(lambda conn: None)
        assert [n.record.id for n in await store.notes_of("p_ana", unpromoted_only=True)] == [rust.record.id]
    finally:
        await other.close()
        other_db.close()
    await store.delete_notes([rust.record.id])  # this process's own write
    assert await store.notes_of("p_ana", unpromoted_only=True) == []


async def test_after_warm_up_a_new_person_costs_no_read_and_another_process_write_still_counts(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, namespace, db = store.reopen_args  # type: ignore[attr-defined]
    bees = await store.add_memory(record("p_ana", "Ana keeps bees on the roof"))
    await store.add_notes([Note(record("p_ana", "Ana sells honey at the market"))])
    await store.indexes.warm()
    scans = spy(monkeypatch, store.chroma, "scan_sync")
    _hits, lexical = await store.lookup("p_ana", query="bees", k=5)
    assert [r.id for r, _s in lexical] == [bees.id]
    assert len(await store.notes_of("p_ana", unpromoted_only=True)) == 1
    assert await store.lookup("p_newcomer", query="bees", k=5) == ([], [])  # first message of someone new
    assert await store.notes_of("p_newcomer", unpromoted_only=True) == []
    assert scans == []  # everything above came from the warm-up
    other_db = Database(db.url)  # another process remembers something of the newcomer's
    other = await MemoryStore.open(
        settings.memory, settings.storage.data_path(), None, NONE_STATUS, namespace=namespace,
        changes=ChangeLog(other_db),
    )
    try:
        kayak = await other.add_memory(record("p_later", "Bo paddles a kayak"))
        await other.add_notes([Note(record("p_later", "Bo fixes bikes"))])
    finally:
        await other.close()
        other_db.close()
    await db.run(lambda conn: None)
    _hits, lexical = await store.lookup("p_later", query="kayak", k=5)
    assert [r.id for r, _s in lexical] == [kayak.id]
    assert [n.record.text for n in await store.notes_of("p_later", unpromoted_only=True)] == ["Bo fixes bikes"]
