"""Nightly consolidation: yesterday's transcripts become curated memory, from receipts only.

A run sweeps every local day before today not yet consolidated (the first run looks back
``CONSOLIDATION_FIRST_RUN_DAYS``; later runs start the day after the last completed one, so a
missed night is caught up by the next run, once). Per day and thread it keeps only user and
assistant turns, cuts them into chunks of at most ``memory.consolidation_chunk_chars`` and asks
the cheap model (``memory.capture_model``, else ``llm.model``), once per person who spoke in the
chunk and with tools withheld, for JSON with a summary and the memories worth keeping. The
answer goes through the same validation as capture (receipts quoted from that person's own
turns, ``max_memories_per_run`` per answer, ``max_memory_chars``, corrections by known id
only) and tombstones, is staged as notes (deterministic ids), and the merge/conflict gate then
promotes the person's staged notes into curated memory or drops them.

Crash safety: a chunk's progress row is written, with the ids of the notes it staged, *before*
the chunk is applied (promotion), and is marked applied after. A run that died in between
finds the row and only applies it again; promotion is idempotent (the same receipt merges
into nothing new), so nothing is written twice and no chunk is sent to the model twice once
recorded. A chunk whose model call failed is not recorded: the run stops there and the next
run resumes at that chunk.

After the sweep, staged notes past ``memory.notes_retention_days`` are pruned and each thread
the run touched gets its rolling summary advanced (the summarizer's compare-and-swap cursor).
Logs and progress rows hold ids and counts; the day's summaries are kept per chunk.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from conversation.context import clip
from conversation.summarizer import Summarizer
from ground.config import Settings
from ground.days import day_bounds, local_day
from ground.db import Database, UtcDateTime, metadata
from ground.person_data import PersonData
from ground.tunables import CONSOLIDATION_DAY_PAGE, CONSOLIDATION_FIRST_RUN_DAYS
from llm.client import LLMClient, LLMError
from memory.capture import (
    CAPTURE_MAX_TOKENS,
    names_of,
    note_id,
    render_request,
    shown_chunk,
    shown_for,
    turn_of,
    validate_off_the_loop,
    validation_limits,
)
from memory.core import AuthorRole, MemoryCandidate, MemoryRecord, Turn
from memory.service import MemoryService
from memory.store import Note
from people import history
from persona.instructions import consolidation_instruction

log = logging.getLogger("kith.consolidation")


consolidation_days = sa.Table(
    "consolidation_days",
    metadata,
    sa.Column("day", sa.String(10), primary_key=True),  # local YYYY-MM-DD
    sa.Column("completed_at", UtcDateTime(), nullable=False),
    sa.Column("chunks", sa.Integer, nullable=False, server_default="0"),
    sa.Column("chars", sa.Integer, nullable=False, server_default="0"),
)

consolidation_chunks = sa.Table(
    "consolidation_chunks",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("day", sa.String(10), nullable=False),
    sa.Column("conversation", sa.String(255), nullable=False),
    sa.Column("first_id", sa.Integer, nullable=False),
    sa.Column("last_id", sa.Integer, nullable=False),
    sa.Column("state", sa.String(8), nullable=False),  # staged | applied
    sa.Column("persons", sa.Text, nullable=False, server_default="[]"),  # JSON person ids to promote
    sa.Column("note_ids", sa.Text, nullable=False, server_default="[]"),  # JSON ids of the notes it staged
    sa.Column("summaries", sa.Text, nullable=False, server_default="{}"),  # JSON person -> the day's summary
    sa.Column("counts", sa.Text, nullable=False, server_default="{}"),  # JSON validation counters
    sa.Column("recorded_at", UtcDateTime(), nullable=False),
    sa.Column("applied_at", UtcDateTime(), nullable=True),
    sa.UniqueConstraint("day", "conversation", "last_id", name="uq_consolidation_chunk"),
)

STAGED = "staged"
APPLIED = "applied"


def day_summaries_of(conn: Connection, person: str) -> list[dict[str, str]]:
    """The nightly consolidation's summary of the person's day, one per thread and chunk it read, as their
    export lists them."""
    c = consolidation_chunks.c
    out = []
    for row in conn.execute(sa.select(c.day, c.summaries).where(c.summaries.contains(person))
                            .order_by(c.day, c.id)).all():
        try:
            by_person = json.loads(row.summaries)
        except ValueError:
            continue
        summary = by_person.get(person) if isinstance(by_person, dict) else None
        if isinstance(summary, str) and summary:
            out.append({"day": row.day, "summary": summary})
    return out


DAY_SUMMARIES_DATA = PersonData(
    "day_summaries", tables=(consolidation_chunks,), export_rows=day_summaries_of,
    forgotten_by="memory.forgetting.scrub.scan",
    stays="each chunk names the people of its night in its JSON, as they were then")


@dataclass(frozen=True, slots=True)
class Chunk:
    day: date
    conversation: str
    rows: tuple[history.StoredMessage, ...]

    @property
    def first_id(self) -> int:
        return self.rows[0].id

    @property
    def last_id(self) -> int:
        return self.rows[-1].id

    @property
    def chars(self) -> int:
        return sum(len(r.text) for r in self.rows)


@dataclass
class ConsolidationReport:
    """What one run did, in counts (never content)."""

    days: int = 0
    days_completed: int = 0
    chunks: int = 0  # chunks of the swept days
    chunks_done: int = 0  # extracted and applied by this run
    chunks_resumed: int = 0  # recorded by an earlier run that stopped before applying them
    chunks_skipped: int = 0  # already applied by an earlier run
    chars: int = 0
    calls: int = 0
    model_failures: int = 0
    notes_staged: int = 0
    tombstoned: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)  # the gate's: new, merged, conflict, blocked
    validation: Counter[str] = field(default_factory=Counter)
    notes_pruned: int = 0
    summaries_advanced: int = 0
    interrupted: bool = False
    elapsed_s: float = 0.0

    def as_counts(self) -> dict[str, int]:
        base = {k: int(v) for k, v in vars(self).items() if isinstance(v, int | bool)}
        return base | {f"gate_{k}": v for k, v in self.outcomes.items()} | dict(self.validation)


# --- pure parts -----------------------------------------------------------------------------------
def chunk_rows(rows: Sequence[history.StoredMessage], budget: int) -> list[list[history.StoredMessage]]:
    """Consecutive rows, each chunk at most ``budget`` characters (a longer single turn is its own chunk)."""
    chunks: list[list[history.StoredMessage]] = []
    current: list[history.StoredMessage] = []
    used = 0
    for row in rows:
        if current and used + len(row.text) > budget:
            chunks.append(current)
            current, used = [], 0
        current.append(row)
        used += len(row.text)
    if current:
        chunks.append(current)
    return chunks


def days_to_sweep(last_completed: date | None, first_message: date | None, today: date,
                  first_run_days: int = CONSOLIDATION_FIRST_RUN_DAYS) -> list[date]:
    """The local days before today a run must consolidate, oldest first."""
    if first_message is None:
        return []
    start = last_completed + timedelta(days=1) if last_completed else today - timedelta(days=first_run_days)
    start = max(start, first_message)
    return [start + timedelta(days=i) for i in range((today - start).days)]


# --- relational access --------------------------------------------------------------------------------
def _progress(conn: Connection) -> tuple[date | None, datetime | None]:
    last = conn.execute(sa.select(sa.func.max(consolidation_days.c.day))).scalar()
    first = conn.execute(sa.select(sa.func.min(history.messages.c.created_at))).scalar()
    return (date.fromisoformat(last) if last else None), first


def _get_chunk(conn: Connection, chunk: Chunk) -> sa.Row | None:
    c = consolidation_chunks.c
    return conn.execute(sa.select(consolidation_chunks).where(
        c.day == chunk.day.isoformat(), c.conversation == chunk.conversation, c.last_id == chunk.last_id)).first()


def _record_chunk(conn: Connection, chunk: Chunk, persons: Sequence[str], note_ids: Sequence[str],
                  summaries: dict[str, str], counts: dict[str, int], now: datetime) -> bool:
    try:
        with conn.begin_nested():
            conn.execute(consolidation_chunks.insert().values(
                day=chunk.day.isoformat(), conversation=chunk.conversation, first_id=chunk.first_id,
                last_id=chunk.last_id, state=STAGED, persons=json.dumps(list(persons)),
                note_ids=json.dumps(list(note_ids)), summaries=json.dumps(summaries, ensure_ascii=False),
                counts=json.dumps(counts), recorded_at=now))
        return True
    except sa.exc.IntegrityError:
        return False  # another run recorded it first; applying again is harmless


def _mark_applied(conn: Connection, chunk: Chunk, now: datetime) -> None:
    c = consolidation_chunks.c
    conn.execute(consolidation_chunks.update().where(
        c.day == chunk.day.isoformat(), c.conversation == chunk.conversation, c.last_id == chunk.last_id)
        .values(state=APPLIED, applied_at=now))


def _complete_day(conn: Connection, day: date, chunks: int, chars: int, now: datetime) -> None:
    exists = conn.execute(sa.select(consolidation_days.c.day).where(consolidation_days.c.day == day.isoformat()))
    if exists.first() is None:
        conn.execute(consolidation_days.insert().values(day=day.isoformat(), completed_at=now, chunks=chunks,
                                                        chars=chars))


def day_summaries(conn: Connection, day: date, person: str) -> list[str]:
    """What consolidation wrote down about ``person``'s day, in thread and chunk order."""
    rows = conn.execute(sa.select(consolidation_chunks.c.summaries).where(
        consolidation_chunks.c.day == day.isoformat()).order_by(consolidation_chunks.c.conversation,
                                                                consolidation_chunks.c.last_id)).all()
    return [text for r in rows if (text := json.loads(r.summaries).get(person))]


# --- the run ------------------------------------------------------------------------------------------------
Progress = Callable[[int, int], None]  # (chunks done, chunks in all)


class Consolidator:
    def __init__(self, *, settings: Settings, db: Database, llm: LLMClient, memory: MemoryService,
                 clock: Callable[[], datetime], tz: tzinfo) -> None:
        self.settings = settings
        self.db = db
        self.llm = llm
        self.memory = memory
        self.clock = clock
        self.tz = tz
        self.summarizer = Summarizer(db, llm, settings, clock)
        # Where the forgets stood when this run read its transcripts (RecentForgets.mark, memory.forgetting).
        self._mark = 0

    async def pending_days(self) -> list[date]:
        last, first = await self.db.run(_progress)
        today = local_day(self.clock(), self.tz)
        return days_to_sweep(last, local_day(first, self.tz) if first else None, today)

    async def chunks_of(self, day: date) -> list[Chunk]:
        """The day's user and assistant turns, by thread, cut into chunks."""
        start, end = (t.astimezone(UTC) for t in day_bounds(day, self.tz))
        by_conversation: dict[str, list[history.StoredMessage]] = {}
        after_id = 0
        while True:
            page = await self.db.run(history.since, start, end, after_id, CONSOLIDATION_DAY_PAGE)
            for row in page:
                if row.role in ("user", "assistant") and not row.silent:
                    by_conversation.setdefault(row.conversation, []).append(row)
            if len(page) < CONSOLIDATION_DAY_PAGE:
                break
            after_id = page[-1].id
        budget = self.settings.memory.consolidation_chunk_chars
        return [Chunk(day, conversation, tuple(part))
                for conversation, thread in sorted(by_conversation.items())
                for part in chunk_rows(thread, budget)]

    async def run(self, progress: Progress | None = None) -> ConsolidationReport:
        started = time.perf_counter()
        report = ConsolidationReport()
        # Every day's rows are read now and sent to the model for minutes after: a forget landing meanwhile
        # is held against what comes back, however long the run takes.
        with self.memory.forgetter.recent.watching() as mark:
            self._mark = mark
            return await self._run(report, started, progress)

    async def _run(self, report: ConsolidationReport, started: float, progress: Progress | None
                   ) -> ConsolidationReport:
        days = await self.pending_days()
        plan = [(day, await self.chunks_of(day)) for day in days]
        report.days = len(days)
        report.chunks = sum(len(chunks) for _d, chunks in plan)
        done = 0
        touched: set[str] = set()
        if progress is not None:
            progress(0, report.chunks)
        for day, chunks in plan:
            for chunk in chunks:
                touched.add(chunk.conversation)
                if not await self._chunk(chunk, report):
                    report.interrupted = True
                    break
                done += 1
                report.chars += chunk.chars
                if progress is not None:
                    progress(done, report.chunks)
            if report.interrupted:
                break
            await self.db.run(_complete_day, day, len(chunks), sum(c.chars for c in chunks), self.clock())
            report.days_completed += 1
        report.notes_pruned = await self.memory.prune_notes()
        for conversation in sorted(touched):
            report.summaries_advanced += await self.summarizer.maybe_summarize(conversation)
        report.elapsed_s = time.perf_counter() - started
        log.info("consolidation %s", " ".join(f"{k}={v}" for k, v in sorted(report.as_counts().items()) if v))
        return report

    async def _chunk(self, chunk: Chunk, report: ConsolidationReport) -> bool:
        """Extract, record, apply one chunk; False when the model could not be reached."""
        row = await self.db.run(_get_chunk, chunk)
        if row is not None and row.state == APPLIED:
            report.chunks_skipped += 1
            return True
        if row is None:
            staged = await self._extract(chunk, report)
            if staged is None:
                return False
            persons, note_ids, summaries, counts = staged
            await self.db.run(_record_chunk, chunk, persons, note_ids, summaries, counts, self.clock())
        else:
            persons = json.loads(row.persons)
            report.chunks_resumed += 1
        for person in persons:
            promoted = await self.memory.promote(person)
            report.outcomes.update(promoted.outcomes)
        await self.db.run(_mark_applied, chunk, self.clock())
        report.chunks_done += 1
        return True

    async def _extract(self, chunk: Chunk, report: ConsolidationReport
                       ) -> tuple[list[str], list[str], dict[str, str], dict[str, int]] | None:
        pairs = [(row, turn_of(row)) for row in chunk.rows]
        shown = await shown_chunk(self.db, pairs, self.memory.capture.is_paused)
        pairs, names = shown.pairs, shown.names
        persons = list(dict.fromkeys(t.person for _r, t in pairs if t.author_role is AuthorRole.USER and t.person))
        note_ids: list[str] = []
        summaries: dict[str, str] = {}
        counts: Counter[str] = Counter()
        for person in persons:
            outcome = await self._extract_person(chunk, pairs, person, names, report)
            if outcome is None:
                return None
            ids, summary, person_counts = outcome
            note_ids.extend(ids)
            counts.update(person_counts)
            if summary:
                summaries[person] = summary
        return persons, note_ids, summaries, dict(counts)

    async def _extract_person(self, chunk: Chunk, pairs: list[tuple[history.StoredMessage, Turn]], person: str,
                              names: dict[str, str], report: ConsolidationReport
                              ) -> tuple[list[str], str, dict[str, int]] | None:
        ms = self.settings.memory
        shown = await shown_for(self.memory.store, person, [t for _r, t in pairs])
        messages = [
            {"role": "system", "content": consolidation_instruction(ms.max_memories_per_run)},
            {"role": "user", "content": render_request(pairs, person, names, shown)},
        ]
        report.calls += 1
        try:
            reply = await self.llm.complete(messages, model=ms.capture_model or None, tools=None,
                                            timeout_s=ms.capture_timeout_s, max_tokens=CAPTURE_MAX_TOKENS,
                                            temperature=0.0, purpose="consolidation")
        except LLMError as exc:
            report.model_failures += 1
            log.warning("consolidation model failed day=%s conversation_len=%d person=%s kind=%s",
                        chunk.day, len(chunk.conversation), person, exc.kind)
            return None
        validation = await validate_off_the_loop(reply.text, len(reply.tool_calls), turns=[t for _r, t in pairs],
                                                 person=person, known_ids={m.id for m in shown},
                                                 limits=validation_limits(self.settings),
                                                 person_names=names_of(pairs, person, names),
                                                 entails=self.memory.capture.entails)
        counts = validation.counts()
        report.validation.update(counts)
        now = self.clock()
        notes: dict[str, Note] = {}
        proposed_with: dict[str, MemoryCandidate] = {}
        for candidate in validation.accepted:
            if await self.memory.book.blocks_candidate(person, candidate):
                report.tombstoned += 1
                continue
            record = MemoryRecord(id=note_id(person, candidate), person=person, kind=candidate.kind,
                                  text=candidate.text, evidence=candidate.evidence, sources=candidate.sources,
                                  scope=candidate.scope, importance=candidate.importance, created_at=now,
                                  updated_at=now, evidence_sentences=candidate.evidence_sentences)
            notes[record.id] = Note(record, horizon=candidate.horizon, corrects=candidate.corrects,
                                    conversation=chunk.conversation)
            proposed_with[record.id] = candidate
        recent = self.memory.forgetter.recent
        async with recent.locks.hold([person]):  # a forget either ran before (checked here) or sees these notes
            kept = self.memory.capture.not_forgotten(list(notes.values()), person, self._mark)
            report.tombstoned += len(notes) - len(kept)
            added = await self.memory.store.add_notes(kept)
            counts.update(await self.memory.capture.add_relations(person, kept, proposed_with))
        report.notes_staged += len(added)
        summary = clip(validation.summary or "", self.settings.budget.summary_chars)
        for eraser in recent.since(self._mark, person):
            summary = eraser.erase(summary)
        return [n.record.id for n in kept], summary, counts
