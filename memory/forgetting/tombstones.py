"""Forgetting with tombstones: remove exactly what matched, and keep it from coming back.

A person asks kith to forget something; the operator (or, later, chat) first sees the plan
(:meth:`Forgetter.plan`): the notes and memories that match, the conflict links that hang off
them, and the memories and notes kept whose receipt sentences hold the words (they keep their
fact and lose those sentences, see :func:`memory.forgetting.scrub.kept_sentences`). :meth:`Forgetter.apply`
then deletes exactly that plan, records and embeddings, rewrites those receipts, unlinks the
conflicts that would dangle, checks that nothing is left, and logs counts only.

It also leaves a tombstone per forgotten text, evidence quote and receipt sentence, so that a
later capture or promotion over the same old transcript cannot resurrect the fact.

Work that was under way when a forget landed must not bring the words back either: a capture waiting on
its model, a reply or an export being written. :class:`RecentForgets` keeps, for as long as a shown plan
would be kept, each applied forget's eraser, so such work can check what it is about to store against the
forgets applied since it began; a capture stages its notes under the same per-person lock a forget holds.
And a confirmed forget is journalled (a file under ``JOURNAL_DIR``) until it is done: killed half-way, it is
finished by the next start before anything is served (:meth:`Forgetter.resume`).
A tombstone holds a salted SHA-256 of the normalised text and the time of forgetting, never
the text. It blocks a candidate only when none of the candidate's sources is newer than the
forgetting: a person who says it again afterwards is heard again.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.db import Database, UtcDateTime, as_utc, metadata
from ground.keyed_locks import KeyedLocks
from ground.private_files import write_private_atomically
from ground.tunables import FORGET_CAS_RETRIES, FORGET_PLAN_TTL_S
from ground.wording import counted
from memory.core.records import MemoryCandidate, MemoryRecord, Source, Status
from memory.core.text import content_words, normalize, words_match
from memory.forgetting.scrub import (
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
from memory.store.memory_store import MemoryStore, RevisionConflict
from memory.store.notes import Note

log = logging.getLogger("kith.memory.forget")

DIGEST_DOMAIN = b"kith-tombstone-v1\x00"

tombstones = sa.Table(
    "memory_tombstones",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("person", sa.String(64), nullable=False),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("forgotten_at", UtcDateTime(), nullable=False),
    sa.Index("ix_memory_tombstones_person_digest", "person", "digest"),
)

def digest(text: str) -> str:
    """The tombstone key of a text or quote: case and spacing do not matter, the words do."""
    return hashlib.sha256(DIGEST_DOMAIN + normalize(text).casefold().encode("utf-8")).hexdigest()


def digests_of(text: str, evidence: Iterable[str], sentences: Iterable[str] = ()) -> set[str]:
    return {digest(text)} | {digest(q) for q in evidence} | {digest(s) for s in sentences}


def source_digest(source: Source) -> str:
    """The tombstone key of a message a forgotten memory was quoted from.

    Re-reading that message (the nightly consolidation) may word the fact and pick its quote
    differently; a candidate drawn only from forgotten messages is the forgotten fact again.
    """
    key = "\x00".join(("source", source.platform, source.chat_id, source.message_id))
    return hashlib.sha256(DIGEST_DOMAIN + key.encode("utf-8")).hexdigest()


def is_blocked(forgotten_at: datetime | None, source_times: Sequence[datetime]) -> bool:
    """Pure rule: a match blocks unless some source was said after the forgetting."""
    if forgotten_at is None:
        return False
    if not source_times:
        return True
    return max(as_utc(t) for t in source_times) <= as_utc(forgotten_at)


# --- relational access -------------------------------------------------------------------
def _add(conn: Connection, person: str, digests: Iterable[str], now: datetime) -> int:
    wanted = sorted(set(digests))
    # A forget finished after a restart leaves its tombstones once, not twice.
    there = set(conn.execute(sa.select(tombstones.c.digest).where(
        tombstones.c.person == person, tombstones.c.forgotten_at == now,
        tombstones.c.digest.in_(wanted))).scalars()) if wanted else set()
    rows = [{"person": person, "digest": d, "forgotten_at": now} for d in wanted if d not in there]
    if rows:
        conn.execute(tombstones.insert(), rows)
    return len(rows)


def _forgotten(conn: Connection, person: str, digests: Sequence[str]) -> dict[str, datetime]:
    """Each of ``digests`` that is a tombstone of ``person``, with when it was last forgotten."""
    if not digests:
        return {}
    rows = conn.execute(
        sa.select(tombstones.c.digest, sa.func.max(tombstones.c.forgotten_at))
        .where(tombstones.c.person == person, tombstones.c.digest.in_(list(digests)))
        .group_by(tombstones.c.digest)
    ).all()
    return {str(d): at for d, at in rows}


def _reassign(conn: Connection, old: str, new: str) -> int:
    return conn.execute(tombstones.update().where(tombstones.c.person == old).values(person=new)).rowcount


def _count(conn: Connection, person: str) -> int:
    return int(
        conn.execute(
            sa.select(sa.func.count()).select_from(tombstones).where(tombstones.c.person == person)
        ).scalar_one()
    )


class TombstoneBook:
    """The tombstones of every person, in the relational store."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, person: str, digests: Iterable[str], now: datetime) -> int:
        return await self.db.run(_add, person, list(digests), now)

    async def blocks_candidate(self, person: str, candidate: MemoryCandidate) -> bool:
        """Blocked when its words match a forgotten memory, or when every message it was drawn from was a
        forgotten memory's source, said before that forgetting. One read for both."""
        words = digests_of(candidate.text, candidate.evidence, candidate.evidence_sentences)
        sources = {source_digest(s): s.timestamp for s in candidate.sources}
        forgotten = await self.db.run(_forgotten, person, sorted(words | set(sources)))
        word_times = [forgotten[d] for d in words if d in forgotten]
        if is_blocked(max(word_times, default=None), [s.timestamp for s in candidate.sources]):
            return True
        return bool(sources) and all(
            key in forgotten and is_blocked(forgotten[key], [said]) for key, said in sources.items())

    async def reassign(self, old: str, new: str) -> int:
        return await self.db.run(_reassign, old, new)

    async def count(self, person: str) -> int:
        return await self.db.run(_count, person)


# --- planning and applying ----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ForgetPlan:
    """Exactly what forgetting ``query`` for ``person`` removes, for a person to confirm first."""

    person: str
    query: str
    note_ids: tuple[str, ...]
    memory_ids: tuple[str, ...]
    # memory id -> ids it links to (conflicts_with) that the plan removes; those links go too
    unlink: dict[str, tuple[str, ...]] = field(default_factory=dict)
    previews: dict[str, str] = field(default_factory=dict)  # id -> text, shown to the person only
    # The forgotten records' texts, quotes and sentences: with ``query``, what is redacted everywhere else.
    phrases: tuple[str, ...] = ()
    places: Places = field(default_factory=Places)  # rows elsewhere that hold matching text, when planned
    # Memories and notes kept whose receipt sentences hold matching text: those sentences go, the fact stays.
    receipt_ids: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.note_ids and not self.memory_ids and not self.receipt_ids and not self.places.total

    def key(self) -> list[str]:
        """Everything the plan touches, as plain strings: two plans with the same key remove the same things."""
        counts = [f"{f.name}:{getattr(self.places, f.name)}" for f in fields(self.places)
                  if getattr(self.places, f.name)]
        return sorted([*self.memory_ids, *self.note_ids, *(f"receipt:{i}" for i in self.receipt_ids), *counts])

    @property
    def eraser(self) -> Eraser:
        return Eraser(self.query, self.phrases, frozenset((*self.memory_ids, *self.note_ids)))

    def describe(self) -> str:
        """Every place the plan touches, counted: "1 memory, 2 notes, 4 history rows, 1 summary"."""
        return describe_counts(len(self.memory_ids), len(self.note_ids), self.places, len(self.receipt_ids))


@dataclass(frozen=True, slots=True)
class ForgetResult:
    notes_deleted: int
    memories_deleted: int
    links_removed: int
    tombstones: int
    leftover: int  # records and rows still found after forgetting (0 unless something went wrong)
    places: Places = field(default_factory=Places)  # rows elsewhere whose matching text was redacted
    chroma_log: int = 0  # entries of Chroma's own queue blanked
    conversations: tuple[str, ...] = ()  # threads whose history or summary was rewritten
    receipts: int = 0  # memories and notes kept whose receipt sentences lost the words

    def describe(self) -> str:
        return describe_counts(self.memories_deleted, self.notes_deleted, self.places, self.receipts)


def describe_counts(memories: int, notes: int, places: Places, receipts: int = 0) -> str:
    """Plain counts of every place a forget touches, the ones with nothing left out."""
    kept = [counted(receipts, "receipt", "receipts")] if receipts else []
    return ", ".join([counted(memories, "memory", "memories"), counted(notes, "note", "notes"), *kept,
                      *_place_parts(places)])


def describe_places(places: Places) -> str:
    """The rows outside memory a forget touches ("4 history rows, 1 summary"), or "" when none."""
    return ", ".join(_place_parts(places))


def _place_parts(places: Places) -> list[str]:
    parts = []
    for n, one, many in ((places.history, "history row", "history rows"), (places.summaries, "summary", "summaries"),
                         (places.outbox, "outbox row", "outbox rows"),
                         (places.inbox, "waiting message", "waiting messages"),
                         (places.saved_exports, "saved export file", "saved export files"),
                         (places.goals, "goal", "goals")):
        if n:
            parts.append(counted(n, one, many))
    return parts


def query_matches(query: str, texts: Sequence[str]) -> bool:
    """Whole-word match: every content word of the query appears (as the same word) in one of the texts."""
    wanted = set(content_words(query))
    if not wanted:
        return False
    for text in texts:
        have = set(content_words(text))
        if all(any(words_match(w, h) for h in have) for w in wanted):
            return True
    return False


# A confirmed forget under way is journalled in a file of this directory (under the data directory) until it is
# done, so that one killed half-way is finished at the next start. The file holds the words (a forget cannot be
# finished without them), and only while they are still in the rows it rewrites: it is overwritten and removed
# once they are gone. Not a table: a row's old bytes would stay in the database's free pages and log until the
# next checkpoint, and a journal must outlive exactly the commit that would take them out.
JOURNAL_DIR = "forgetting"


def plan_document(plan: ForgetPlan, started: datetime) -> bytes:
    return json.dumps({"person": plan.person, "query": plan.query, "note_ids": list(plan.note_ids),
                       "memory_ids": list(plan.memory_ids), "unlink": {k: list(v) for k, v in plan.unlink.items()},
                       "phrases": list(plan.phrases), "receipt_ids": list(plan.receipt_ids),
                       "started_at": started.isoformat()}, ensure_ascii=False).encode("utf-8")


def plan_from_document(data: bytes) -> tuple[ForgetPlan, datetime]:
    d = json.loads(data.decode("utf-8"))
    plan = ForgetPlan(str(d["person"]), str(d["query"]), tuple(map(str, d["note_ids"])),
                      tuple(map(str, d["memory_ids"])), {str(k): tuple(v) for k, v in d["unlink"].items()}, {},
                      tuple(map(str, d["phrases"])), Places(), tuple(map(str, d["receipt_ids"])))
    return plan, datetime.fromisoformat(str(d["started_at"]))


def wipe(path: Path) -> bool:
    """Overwrite ``path`` with zeros, then remove it: its words do not stay in the file's old blocks where the
    file system reuses them in place. Best effort: a copy-on-write disk keeps what it keeps. Never raises: a
    disk that turned read-only or full keeps the file, which is logged (no path, no words) and left to the next
    start. True when the file is gone."""
    try:
        size = path.stat().st_size
        with path.open("r+b") as f:
            f.write(b"\0" * size)
            f.flush()
            os.fsync(f.fileno())
    except FileNotFoundError:
        return True
    except OSError as exc:  # removed all the same: a file that is gone cannot be read back by name
        log.warning("forget journal entry not overwritten error=%s", _errno_name(exc))
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("forget journal entry not removed error=%s: the next start removes it", _errno_name(exc))
        return False
    return True


def _errno_name(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, type(exc).__name__)


class JournalUnwritable(Exception):
    """A confirmed forget could not be journalled (a full or read-only disk): it was not begun, nothing changed."""

    def __init__(self, cause: OSError) -> None:
        self.errno = cause.errno
        super().__init__(f"nothing was forgotten: the forget could not be recorded before starting it "
                         f"({_errno_name(cause)}); free the data directory's disk and ask again")

    @property
    def disk(self) -> str:
        """What is wrong with the disk, in a few plain words."""
        if self.errno in (errno.ENOSPC, errno.EDQUOT):
            return "my disk is full"
        if self.errno == errno.EROFS:
            return "my disk is read-only"
        if self.errno in (errno.EACCES, errno.EPERM):
            return "I may not write to my data folder"
        return "I could not write to my data folder"


@dataclass(frozen=True, slots=True)
class Resumed:
    """A forget a start finished for a process killed inside it: what went, and when it had been confirmed."""

    result: ForgetResult
    confirmed_at: datetime


@dataclass(frozen=True, slots=True)
class Applied:
    """A forget applied in this process, kept a while so work that was under way can be held to it."""

    seq: int
    person: str
    eraser: Eraser
    conversations: tuple[str, ...]
    through_id: int  # the newest history row its scan saw
    at: float  # time.monotonic()


class RecentForgets:
    """The forgets applied lately, in order, and the per-person lock a forget and a capture's staging share.

    Kept as long as a shown plan is (the words are in this process's memory no longer than a plan keeps them):
    capture, replies and exports take longer than that only when their model is already past its deadline."""

    def __init__(self, keep_s: float = FORGET_PLAN_TTL_S, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.keep_s = keep_s
        self.monotonic = monotonic
        self.locks = KeyedLocks()
        self._seq = 0
        self._applied: list[Applied] = []
        # Marks of work under way (:meth:`watching`) -> how many: a forget applied after the oldest is kept
        # until that work is done, however long its model takes.
        self._watching: dict[int, int] = {}
        self._timer: asyncio.TimerHandle | None = None

    def mark(self) -> int:
        """Where the forgets stand now; :meth:`since` with it names those applied later."""
        return self._seq

    @contextmanager
    def watching(self) -> Iterator[int]:
        """A mark for work that reads words now and stores what it made of them later: every forget applied
        after it is kept (with its words) until the work is done, however long that takes."""
        mark = self._seq
        self._watching[mark] = self._watching.get(mark, 0) + 1
        try:
            yield mark
        finally:
            left = self._watching.pop(mark) - 1
            if left:
                self._watching[mark] = left
            self._prune()

    @property
    def held(self) -> int:
        """How many applied forgets (and so their words) this process holds now."""
        return len(self._applied)

    def since(self, mark: int, person: str) -> list[Eraser]:
        """The erasers of ``person``'s forgets applied after ``mark``: what work begun at it must not keep."""
        self._prune()
        return [a.eraser for a in self._applied if a.seq > mark and a.person == person]

    def recent(self) -> list[Applied]:
        self._prune()
        return list(self._applied)

    def record(self, person: str, eraser: Eraser, conversations: tuple[str, ...], through_id: int) -> None:
        self._seq += 1
        self._applied.append(Applied(self._seq, person, eraser, conversations, through_id, self.monotonic()))
        self._prune()

    def _prune(self) -> None:
        cutoff = self.monotonic() - self.keep_s
        oldest = min(self._watching, default=None)
        self._applied = [a for a in self._applied if a.at > cutoff or self._watched(a, oldest)]
        self._schedule(oldest)

    @staticmethod
    def _watched(applied: Applied, oldest: int | None) -> bool:
        return oldest is not None and applied.seq > oldest

    def _schedule(self, oldest: int | None) -> None:
        """Let the words go when their time is up, whether or not anything asks again: held until some later
        call would otherwise keep them in this process for as long as the bot stays quiet."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        due = [a.at for a in self._applied if not self._watched(a, oldest)]
        if not due:
            return  # nothing, or only what running work holds: its end prunes
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._timer = loop.call_later(max(0.0, min(due) + self.keep_s - self.monotonic()) + 0.001, self._prune)


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
        previews = {r.id: r.text for r in [*records, *receipts]}
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
                entry = self.journal / f"{time.time_ns()}-{os.getpid()}.json"
                try:
                    await asyncio.to_thread(write_private_atomically, entry, plan_document(plan, now))
                except OSError as exc:
                    # Begun unjournalled, a kill half-way would leave the words with nothing to finish it.
                    log.warning("forget not begun person=%s: its journal entry could not be written error=%s",
                                plan.person, _errno_name(exc))
                    raise JournalUnwritable(exc) from None
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
            leftover += (await self.db.run(scan, plan.person, eraser, apply=False)).places.total
            busy, _frames, _copied = await self.db.run(checkpoint)
            if busy:
                log.warning("forget checkpoint incomplete person=%s: another reader holds the log", plan.person)
        else:
            self.recent.record(plan.person, eraser, scanned.conversations, scanned.through_id)
        places = replace(scanned.places, saved_exports=files)
        result = ForgetResult(len(notes), len(memories), links, added, leftover, places, scrubbed,
                              scanned.conversations, receipts)
        log.info(
            "forget applied person=%s notes=%d memories=%d receipts=%d links=%d tombstones=%d history=%d "
            "summaries=%d outbox=%d inbox=%d saved_exports=%d chroma_log=%d leftover=%d",
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
        for _attempt in range(FORGET_CAS_RETRIES):
            current = await self.store.get_memory(memory_id)
            if current is None:
                return 0
            keep = tuple(i for i in current.conflicts_with if i not in gone)
            if len(keep) == len(current.conflicts_with):
                return 0
            try:
                await self.store.replace_memory(_with_links(current, keep, self.clock()))
                return len(current.conflicts_with) - len(keep)
            except RevisionConflict:
                continue
        raise RuntimeError(f"could not unlink conflicts of {memory_id} after {FORGET_CAS_RETRIES} attempts")


    async def _narrow(self, memory_id: str, eraser: Eraser) -> int:
        """Take the matching text out of a kept memory's receipt sentences; 1 if it had any, else 0."""
        for _attempt in range(FORGET_CAS_RETRIES):
            current = await self.store.get_memory(memory_id)
            if current is None or not _receipt_matches(current, eraser):
                return 0
            sentences = kept_sentences(current.evidence_sentences, current.evidence, eraser)
            try:
                await self.store.replace_memory(replace(current, evidence_sentences=sentences,
                                                        updated_at=self.clock()))
                return 1
            except RevisionConflict:
                continue
        raise RuntimeError(f"could not rewrite the receipts of {memory_id} after {FORGET_CAS_RETRIES} attempts")


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


def _with_links(record: MemoryRecord, links: tuple[str, ...], now: datetime) -> MemoryRecord:
    return replace(record, conflicts_with=links, updated_at=now)


def _receipt_matches(record: MemoryRecord, eraser: Eraser) -> bool:
    return any(eraser.matches(s) for s in record.evidence_sentences)


def narrowed_note(note: Note, eraser: Eraser) -> Note:
    """``note`` whose receipt sentences lose the words ``eraser`` matches (:func:`kept_sentences`)."""
    sentences = kept_sentences(note.record.evidence_sentences, note.record.evidence, eraser)
    return replace(note, record=replace(note.record, evidence_sentences=sentences))


__all__ = [
    "Applied",
    "ForgetPlan",
    "ForgetResult",
    "Forgetter",
    "JournalUnwritable",
    "RecentForgets",
    "Resumed",
    "Status",
    "TombstoneBook",
    "describe_counts",
    "describe_places",
    "digest",
    "digests_of",
    "is_blocked",
    "narrowed_note",
    "query_matches",
    "tombstones",
]
