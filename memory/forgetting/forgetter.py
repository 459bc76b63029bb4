"""The forgetter: remove exactly what matched, and keep it from coming back.

A person asks kith to forget something; the operator (or chat) first sees the plan
(:meth:`Forgetter.plan`, a :class:`~memory.forgetting.plan.ForgetPlan`): the notes and memories that match, the
conflict links that hang off them, and the memories and notes kept whose receipt sentences hold the words (they
keep their fact and lose those sentences, see :func:`memory.forgetting.scrub.kept_sentences`).
:meth:`Forgetter.apply` then deletes exactly that plan, records and embeddings, rewrites those receipts, unlinks
the conflicts that would dangle, checks that nothing is left, and logs counts only. It leaves tombstones first
(:mod:`memory.forgetting.tombstones`), lists the forget among the recent ones
(:mod:`memory.forgetting.recent_forgets`), and journals it until it is done (:mod:`memory.forgetting.journal`):
killed half-way, it is finished by the next start before anything is served (:meth:`Forgetter.resume`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from ground.db import Database, as_utc
from memory.core.records import MemoryRecord, without_links
from memory.forgetting.journal import plan_from_document, wipe, write_entry
from memory.forgetting.plan import ForgetPlan, ForgetResult, query_matches
from memory.forgetting.recent_forgets import RecentForgets
from memory.forgetting.scrub import (
    DOCUMENTS,
    GOALS,
    Eraser,
    Places,
    Scanned,
    checkpoint,
    kept_sentences,
    phrases_of,
    scan,
    scrub_late_reply,
    scrub_saved_exports,
)
from memory.forgetting.tombstones import TombstoneBook, digest, digests_of, source_digest
from memory.graph.book import GRAPH
from memory.store.memory_store import MemoryStore
from memory.store.notes import Note

log = logging.getLogger("kith.memory.forget")


@dataclass(frozen=True, slots=True)
class Resumed:
    """A forget a start finished for a process killed inside it: what went, and when it had been confirmed."""

    result: ForgetResult
    confirmed_at: datetime



class Forgetter:
    """Plans and applies forgetting over the memory store."""

    def __init__(self, store: MemoryStore, book: TombstoneBook, clock: Callable[[], datetime], *,
                 db: Database | None = None, saved_exports: Path | None = None,
                 recent: RecentForgets | None = None, journal: Path | None = None) -> None:
        self.store = store
        self.book = book
        self.clock = clock
        # Where history, summaries, the outbox and the inbox live: a forget reaches them too.
        self.db = db
        # Where the terminal chat saves /export files: a forget reaches those too.
        self.saved_exports = saved_exports
        self.recent = recent or RecentForgets()
        # Where a confirmed forget is journalled until it is done (JOURNAL_DIR); None: not journalled.
        self.journal = journal
        # Forgets a start finished after the process that confirmed them was killed: person -> what went.
        self.resumed: dict[str, Resumed] = {}

    async def plan(self, person: str, query: str) -> ForgetPlan:
        """Records of ``person`` whose text or evidence holds every word of ``query``, or whose id it is."""
        query = query.strip()
        notes = await self.store.notes_of(person)
        memories = await self.store.memories_of(person, statuses=None)
        matched_memories = [m for m in memories if _hit(query, m)]
        matched_ids = {m.id for m in matched_memories}
        # A note promoted into a forgotten memory holds the same fact: it goes too.
        matched_notes = [n for n in notes if _hit(query, n.record) or (n.promoted_to in matched_ids)]
        unlink = _dangling(memories, matched_ids)
        records = [*matched_memories, *(n.record for n in matched_notes)]
        # An export words a fact for its reader ("You live in Lisbon"): its entry goes by id (erase_json).
        phrases = phrases_of([t for r in records for t in (r.text, *r.evidence, *r.evidence_sentences)])
        eraser = Eraser(query, phrases, frozenset(r.id for r in records))
        gone = {r.id for r in records}
        receipts = [r for r in [*memories, *(n.record for n in notes)]
                    if r.id not in gone and _receipt_matches(r, eraser)]
        previews = {r.id: r for r in [*records, *receipts]}
        unreviewed = frozenset(n.record.id for n in notes if n.promoted_at is None and n.record.id in previews)
        places = Places()
        if self.db is not None:
            places = (await self.db.run(scan, person, eraser, apply=False)).places
        saved = await asyncio.to_thread(scrub_saved_exports, self.saved_exports, person, eraser, apply=False)
        places = replace(places, saved_exports=saved)
        return ForgetPlan(
            person,
            query,
            tuple(n.record.id for n in matched_notes),
            tuple(m.id for m in matched_memories),
            unlink,
            previews,
            phrases,
            places,
            tuple(dict.fromkeys(r.id for r in receipts)),
            unreviewed,
        )

    async def _widened(self, plan: ForgetPlan) -> ForgetPlan:
        """``plan`` with what matches its words now and did not when it was shown: a note a capture staged from
        the very message being forgotten, or a memory promoted from one, in the meantime. Leaving them would
        keep the words the person asked to forget; everything the plan showed goes as shown."""
        notes = await self.store.notes_of(plan.person)
        memories = await self.store.memories_of(plan.person, statuses=None)
        had = set(plan.memory_ids) | set(plan.note_ids)
        new_memories = [m for m in memories if m.id not in had and _hit(plan.query, m)]
        gone_ids = set(plan.memory_ids) | {m.id for m in new_memories}
        new_notes = [n for n in notes if n.record.id not in had
                     and (_hit(plan.query, n.record) or n.promoted_to in gone_ids)]
        if not new_memories and not new_notes:
            return plan
        records = [*new_memories, *(n.record for n in new_notes)]
        phrases = phrases_of([*plan.phrases, *(t for r in records for t in (r.text, *r.evidence,
                                                                          *r.evidence_sentences))])
        log.info("forget widened person=%s notes=%d memories=%d", plan.person, len(new_notes), len(new_memories))
        added = {r.id for r in records}
        return replace(plan, note_ids=(*plan.note_ids, *(n.record.id for n in new_notes)),
                       memory_ids=(*plan.memory_ids, *(m.id for m in new_memories)),
                       unlink=_dangling(memories, gone_ids), phrases=phrases,
                       receipt_ids=tuple(i for i in plan.receipt_ids if i not in added))

    async def apply(self, plan: ForgetPlan) -> ForgetResult:
        """Delete exactly ``plan`` (and what matched its words since it was shown), unlink what would dangle,
        leave tombstones, verify, log counts."""
        async with self.recent.locks.hold([plan.person]):
            plan = await self._widened(plan)
            now = self.clock()
            entry = None
            if self.journal is not None:
                entry = await asyncio.to_thread(write_entry, self.journal, plan, now)
            result = await self._apply(plan, now)
            if entry is not None:
                # Done: an entry that cannot be removed now is finished again (a no-op) and removed next start.
                await asyncio.to_thread(wipe, entry)
            return result

    def answer_owed(self, person: str, said_at: datetime | None) -> ForgetResult | None:
        """What a forget finished at this start removed, for ``person``'s yes that confirmed it: one said before
        it was begun (taken up again after the restart), or a press of its button (``said_at`` None). A yes
        said later answers something else; a forget the operator confirmed is owed to nobody in chat."""
        resumed = self.resumed.get(person)
        if resumed is None or (said_at is not None and as_utc(said_at) > as_utc(resumed.confirmed_at)):
            return None
        del self.resumed[person]
        return resumed.result

    async def resume(self) -> int:
        """Finish every forget a killed process confirmed and did not finish; how many there were."""
        if self.journal is None or not self.journal.is_dir():
            return 0
        # A journal entry whose write was cut short: that forget had not begun, and its words go.
        for path in sorted(self.journal.glob(".*.tmp")):
            await asyncio.to_thread(wipe, path)
        finished = 0
        for path in sorted(self.journal.glob("*.json")):
            try:
                plan, started = plan_from_document(await asyncio.to_thread(path.read_bytes))
            except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
                # Unreadable, it cannot be finished; kept, it would hold its words for good.
                log.error("forget journal entry unreadable: removed")
                await asyncio.to_thread(wipe, path)
                continue
            log.warning("forget resumed after a restart person=%s", plan.person)
            try:
                async with self.recent.locks.hold([plan.person]):
                    result = await self._apply(plan, started)
            except Exception as exc:
                # Kept for the next start: failing every start here would keep kith from ever starting.
                log.error("forget could not be finished at this start person=%s error=%s: kept, tried again at "
                          "the next start", plan.person, type(exc).__name__)
                continue
            # The killed process had deleted some records already: the answer names all the plan removed.
            result = replace(result, notes_deleted=max(result.notes_deleted, len(plan.note_ids)),
                             memories_deleted=max(result.memories_deleted, len(plan.memory_ids)))
            self.resumed[plan.person] = Resumed(result, started)
            await asyncio.to_thread(wipe, path)
            finished += 1
        return finished

    async def _apply(self, plan: ForgetPlan, now: datetime) -> ForgetResult:
        eraser = plan.eraser
        notes = await self.store.get_notes(plan.note_ids)
        memories = await self.store.get_memories(plan.memory_ids)
        kept_notes = await self.store.get_notes(plan.receipt_ids)
        kept_memories = await self.store.get_memories(plan.receipt_ids)
        digests: set[str] = set()
        for record in [n.record for n in notes] + memories:
            digests |= digests_of(record.text, record.evidence, record.evidence_sentences)
            digests |= {source_digest(s) for s in record.sources}
        for record in [n.record for n in kept_notes] + kept_memories:
            digests |= {digest(s) for s in record.evidence_sentences if eraser.matches(s)}
        # Tombstones first: if deleting fails half-way, the fact still cannot come back.
        added = await self.book.add(plan.person, digests, now)
        links = 0
        for memory_id, gone in plan.unlink.items():
            links += await self._unlink(memory_id, set(gone))
        receipts = await self.store.replace_notes([narrowed_note(n, eraser) for n in kept_notes
                                                   if _receipt_matches(n.record, eraser)])
        for record in kept_memories:
            receipts += await self._narrow(record.id, eraser)
        await self.store.delete_notes(list(plan.note_ids))
        await self.store.delete_memories(list(plan.memory_ids))
        scrubbed = await self.store.scrub_log([*plan.note_ids, *plan.memory_ids], kept=plan.receipt_ids)
        leftover = len(await self.store.get_notes(plan.note_ids)) + len(
            await self.store.get_memories(plan.memory_ids)
        )
        still = [n.record for n in await self.store.get_notes(plan.receipt_ids)]
        still += await self.store.get_memories(plan.receipt_ids)
        leftover += sum(_receipt_matches(r, eraser) for r in still)
        files = await asyncio.to_thread(scrub_saved_exports, self.saved_exports, plan.person, eraser, apply=True)
        leftover += await asyncio.to_thread(scrub_saved_exports, self.saved_exports, plan.person, eraser,
                                            apply=False)
        scanned = Scanned(Places(), ())
        if self.db is not None:
            # Every place outside the store, in one transaction; then the log holding the old pages is emptied.
            scanned = await self.db.run(scan, plan.person, eraser, apply=True)
            # Listed at once: a reply recorded from here on was written without this rewrite (capture's
            # after-reply check), and a person's own waits on the lock held here until the forget is done.
            self.recent.record(plan.person, eraser, scanned.conversations, scanned.through_id)
            if scanned.places.goals:
                self.db.mark(GOALS)  # the goals every prompt reads are read again, without these
            if scanned.places.documents:
                self.db.mark(DOCUMENTS)
            if scanned.places.graph:
                self.db.mark(GRAPH)  # a graph cached for recall is read again, without these
            leftover += (await self.db.run(scan, plan.person, eraser, apply=False)).places.total
            busy, _frames, _copied = await self.db.run(checkpoint)
            if busy:
                log.warning("forget checkpoint incomplete person=%s: another reader holds the log", plan.person)
            await self.db.reclaim()
        else:
            self.recent.record(plan.person, eraser, scanned.conversations, scanned.through_id)
        places = replace(scanned.places, saved_exports=files)
        result = ForgetResult(len(notes), len(memories), links, added, leftover, places, scrubbed,
                              scanned.conversations, receipts)
        log.info(
            "forget applied person=%s notes=%d memories=%d receipts=%d links=%d tombstones=%d history=%d "
            "summaries=%d outbox=%d inbox=%d saved_exports=%d graph=%d chroma_log=%d leftover=%d",
            plan.person,
            result.notes_deleted,
            result.memories_deleted,
            receipts,
            links,
            added,
            places.history,
            places.summaries,
            places.outbox,
            places.inbox,
            places.saved_exports,
            places.graph,
            scrubbed,
            leftover,
        )
        return result

    async def scrub_late_reply(self, reply_id: int, platform: str, chat_id: str, source: str,
                               eraser: Eraser) -> int:
        """A reply recorded after a forget's scan, by a turn that began before it, loses the words too."""
        if self.db is None:
            return 0
        changed = await self.db.run(scrub_late_reply, reply_id, platform, chat_id, source, eraser)
        if changed:
            await self.db.run(checkpoint)
        return changed

    async def _unlink(self, memory_id: str, gone: set[str]) -> int:
        """Take the links to ``gone`` off a memory that stays; how many it had."""
        removed = 0

        def unlinked(current: MemoryRecord) -> MemoryRecord | None:
            nonlocal removed
            updated = without_links(current, gone, self.clock())
            removed = len(current.conflicts_with) - len(updated.conflicts_with)
            return updated if removed else None

        return removed if await self.store.edit(memory_id, unlinked) is not None else 0

    async def _narrow(self, memory_id: str, eraser: Eraser) -> int:
        """Take the matching text out of a kept memory's receipt sentences; 1 if it had any, else 0."""

        def narrowed(current: MemoryRecord) -> MemoryRecord | None:
            if not _receipt_matches(current, eraser):
                return None
            sentences = kept_sentences(current.evidence_sentences, current.evidence, eraser)
            return replace(current, evidence_sentences=sentences, updated_at=self.clock())

        return 0 if await self.store.edit(memory_id, narrowed) is None else 1


def _hit(query: str, record: MemoryRecord) -> bool:
    return record.id == query or query_matches(query, [record.text, *record.evidence])


def _dangling(memories: Sequence[MemoryRecord], gone: set[str]) -> dict[str, tuple[str, ...]]:
    """memory id -> the links it holds to records that go, for every memory that stays."""
    unlink: dict[str, tuple[str, ...]] = {}
    for memory in memories:
        if memory.id in gone:
            continue
        dangling = tuple(i for i in memory.conflicts_with if i in gone)
        if dangling:
            unlink[memory.id] = dangling
    return unlink


def _receipt_matches(record: MemoryRecord, eraser: Eraser) -> bool:
    return any(eraser.matches(s) for s in record.evidence_sentences)


def narrowed_note(note: Note, eraser: Eraser) -> Note:
    """``note`` whose receipt sentences lose the words ``eraser`` matches (:func:`kept_sentences`)."""
    sentences = kept_sentences(note.record.evidence_sentences, note.record.evidence, eraser)
    return replace(note, record=replace(note.record, evidence_sentences=sentences))


__all__ = ["Forgetter", "Resumed", "narrowed_note"]
