"""Capture: after a reply, a cheap model reads the thread's new turns and proposes memories.

It runs as a background :class:`~conversation.core.TurnObserver`, never delaying the reply.
Each run reads the turns after its own cursor (table ``capture_cursors``), in chunks of at
most ``memory.consolidation_chunk_chars``, and asks the capture model once per person who
spoke in the chunk, with tools withheld. What comes back goes through
:func:`memory.capture.validation.validate_extraction` (JSON only, receipts quoted from that person's
own turns, limits, redaction); survivors not stopped by a tombstone are staged as notes
(the day's raw notes) for :meth:`memory.capture.merge_gate.MemoryGate.promote` to curate later.

The model sees the transcript and any stored memories as data and is told so first (the words
are :func:`persona.instructions.capture_instruction` and :func:`persona.labels.extraction_request`). An
answer with a tool call, or that is not JSON, is discarded whole and counted. The cursor
moves past a chunk once its answer was judged, good or not, so no chunk is retried forever;
a model that cannot be reached gets ``CAPTURE_MAX_ATTEMPTS`` tries at the same chunk.
Logs carry ids and counts only.

A forget can land while a run waits on its model: the run read the words before they were rewritten. Its
notes are staged under the forget's per-person lock, and any that hold words forgotten since the run read
its rows are dropped (a receipt sentence alone loses them, as a kept memory's does). A reply whose turn
began before a forget and was recorded after it loses the words here too, before capture reads it.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.config import Settings
from ground.db import Database, UtcDateTime, metadata
from ground.keyed_locks import KeyedLocks
from ground.tunables import (
    CAPTURE_MAX_ATTEMPTS,
    CAPTURE_MAX_CHUNKS_PER_RUN,
    CAPTURE_MAX_TOKENS,
    CAPTURE_MAX_TURNS,
    CAPTURE_SHOWN_MEMORIES,
)
from ground.turns import CompletedTurn
from llm.client import LLMClient, LLMError
from memory.capture.merge_gate import fold_by_meaning
from memory.capture.validation import ValidationLimits, validate_off_the_loop
from memory.core.records import AuthorRole, MemoryCandidate, MemoryRecord, Scope, Turn, record_of, said_at
from memory.core.text import normalize
from memory.core.words import shown_words
from memory.encoders.entailment import Entails
from memory.forgetting.forgetter import Forgetter, narrowed_note
from memory.forgetting.tombstones import TombstoneBook
from memory.graph.book import GraphBook
from memory.graph.view import Proposed
from memory.store.chroma import Collection
from memory.store.memory_store import MemoryStore
from memory.store.notes import Note
from memory.store.vectors import HASH_SPACE, Vectors
from people import directory, history
from persona.instructions import capture_instruction
from persona.labels import KITH_LABEL, PERSON_LABEL, extraction_request, other_label, stored_memory_line

log = logging.getLogger("kith.memory.capture")

# Each stored memory's words as the extractor reads them: enough for a sentence or two, so the memories it is
# shown cost about what the chunk's own transcript does, not more.
CAPTURE_SHOWN_WORDS_CHARS = 320


capture_cursors = sa.Table(
    "capture_cursors",
    metadata,
    sa.Column("conversation", sa.String(255), primary_key=True),
    sa.Column("through_id", sa.Integer, nullable=False, server_default="0"),
    sa.Column("failures", sa.Integer, nullable=False, server_default="0"),
    sa.Column("updated_at", UtcDateTime(), nullable=False),
)

PausedHook = Callable[[str], bool]


@dataclass(frozen=True, slots=True)
class Cursor:
    through: int
    failures: int
    exists: bool


def _get_cursor(conn: Connection, conversation: str) -> Cursor:
    row = conn.execute(
        sa.select(capture_cursors.c.through_id, capture_cursors.c.failures).where(
            capture_cursors.c.conversation == conversation
        )
    ).first()
    return Cursor(int(row.through_id), int(row.failures), True) if row else Cursor(0, 0, False)


def _move_cursor(
    conn: Connection, conversation: str, expected: Cursor, through: int, failures: int, now: datetime
) -> bool:
    """Compare-and-swap on the cursor, so two runs never both take one chunk."""
    if not expected.exists:
        try:
            with conn.begin_nested():
                conn.execute(
                    capture_cursors.insert().values(
                        conversation=conversation, through_id=through, failures=failures, updated_at=now
                    )
                )
            return True
        except sa.exc.IntegrityError:
            return False
    result = conn.execute(
        capture_cursors.update()
        .where(
            capture_cursors.c.conversation == conversation,
            capture_cursors.c.through_id == expected.through,
            capture_cursors.c.failures == expected.failures,
        )
        .values(through_id=through, failures=failures, updated_at=now)
    )
    return result.rowcount == 1


def _reset_cursor(conn: Connection, conversation: str) -> None:
    conn.execute(capture_cursors.delete().where(capture_cursors.c.conversation == conversation))


def _pending(
    conn: Connection, conversation: str, cursor: Cursor, through_id: int | None
) -> list[history.StoredMessage]:
    if cursor.exists:
        return history.between(conn, conversation, cursor.through, through_id, CAPTURE_MAX_TURNS)
    # A thread capture has never read: its newest turns only, not its whole past.
    rows = history.recent(conn, conversation, CAPTURE_MAX_TURNS)
    return [r for r in rows if through_id is None or r.id <= through_id]


@dataclass
class CaptureReport:
    """What one run did, in counts (never content)."""

    conversation: str
    turns: int = 0
    chunks: int = 0
    calls: int = 0
    model_failures: int = 0
    paused_people: int = 0
    tombstoned: int = 0
    duplicates: int = 0
    written: int = 0
    cursor_from: int = 0
    cursor_to: int = 0
    counts: Counter[str] = field(default_factory=Counter)  # validation counters, summed over calls
    note_ids: list[str] = field(default_factory=list)

    def as_counts(self) -> dict[str, int]:
        base = {
            "turns": self.turns,
            "chunks": self.chunks,
            "calls": self.calls,
            "model_failures": self.model_failures,
            "paused_people": self.paused_people,
            "tombstoned": self.tombstoned,
            "duplicates": self.duplicates,
            "written": self.written,
        }
        return base | dict(self.counts)


def note_id(person: str, candidate: MemoryCandidate) -> str:
    """Deterministic, so the same capture twice stages one note."""
    key = "\x00".join(
        [
            person,
            candidate.kind.value,
            normalize(candidate.text).casefold(),
            *sorted(normalize(q) for q in candidate.evidence),
        ]
    )
    return "n_" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]


def turn_of(row: history.StoredMessage) -> Turn:
    """A history row as the validator sees it (the author's role, person and provenance)."""
    return Turn(
        author_role=AuthorRole(row.role),
        person=row.person if row.role == "user" else None,
        text=row.text,
        platform=row.platform,
        chat_id=row.chat_id,
        message_id=row.platform_message_id or str(row.id),
        timestamp=row.created_at,
        scope=Scope.SHARED if row.chat_kind == "group" else Scope.DM,
        medium=row.medium,
    )


Pair = tuple[history.StoredMessage, Turn]


@dataclass(frozen=True)
class ShownChunk:
    """What the extractor may be shown of a chunk of history."""
    pairs: list[Pair]  # without anything a paused person sent
    paused_people: int  # how many paused people that left out
    names: dict[str, str]  # the display name of each account that wrote in what is shown


async def shown_chunk(db: Database, pairs: Sequence[Pair], is_paused: PausedHook) -> ShownChunk:
    """``pairs`` as the extractor may see them, from one read of their authors' accounts.

    A paused person's messages are not shown to the model at all: their own words, and what they
    forwarded (recorded as no one's words, so found by its author's account).
    """
    authors = await db.run(directory.by_account, sorted({row.author for row, _t in pairs if row.role == "user"}))

    def sender(row: history.StoredMessage) -> str | None:
        if row.role != "user":
            return None
        account = authors.get(row.author)
        return row.person or (account.person if account is not None else None)

    paused = {person for row, _t in pairs if (person := sender(row)) and is_paused(person)}
    shown = [(row, turn) for row, turn in pairs if sender(row) not in paused]
    writers = {row.author for row, _t in shown if row.role == "user"}
    names = {a: account.display_name for a, account in authors.items() if a in writers and account.display_name}
    return ShownChunk(shown, len(paused), names)


async def shown_for(store: MemoryStore, person: str, turns: Sequence[Turn]) -> list[MemoryRecord]:
    """The person's stored memories nearest what they said in ``turns``, as the extractor may see them:
    capture and the nightly consolidation show the same. In a chat others can read, only what was said
    where others could read it: a DM memory never reaches a group's prompt, here either."""
    own_text = "\n".join(t.text for t in turns if t.person == person)
    shared = any(t.scope is Scope.SHARED for t in turns)
    found = await store.lexical(person, own_text, CAPTURE_SHOWN_MEMORIES, scope=Scope.SHARED if shared else None)
    return [r for r, _s in found]


def stored_lines(shown: Sequence[MemoryRecord]) -> list[str]:
    """``shown`` as the extractor reads them: each one's id, PERSON's own words, then kith's label for it (so a
    correction can name it). A memory with no words kept is not shown: a label alone is no receipt."""
    lines = []
    for memory in shown:
        said = shown_words(memory, PERSON_LABEL, CAPTURE_SHOWN_WORDS_CHARS)
        if said is not None:
            lines.append(stored_memory_line(memory.id, said, memory.text))
    return lines


def names_of(pairs: Sequence[Pair], person: str, names: dict[str, str]) -> list[str]:
    """The display names of ``person``'s accounts that wrote in ``pairs``: a memory may call them that."""
    own = (row.author for row, turn in pairs if turn.person == person)
    return list(dict.fromkeys(names[author] for author in own if author in names))


def validation_limits(settings: Settings) -> ValidationLimits:
    """The configured limits and gate thresholds the extractor's answer is checked with."""
    ms = settings.memory
    return ValidationLimits(
        max_items=ms.max_memories_per_run,
        max_text_chars=ms.max_memory_chars,
        merge_at=ms.merge_threshold,
        conflict_at=ms.conflict_threshold,
    )


def render_request(
    turns: Sequence[tuple[history.StoredMessage, Turn]],
    person: str,
    names: dict[str, str],
    shown: Sequence[MemoryRecord],
) -> str:
    """The user message: who PERSON is, the stored memories and the transcript, all marked as data."""
    others: dict[str, str] = {}
    lines: list[tuple[str, str]] = []
    for row, turn in turns:
        if turn.author_role is AuthorRole.ASSISTANT:
            label = KITH_LABEL
        elif turn.person == person:
            label = PERSON_LABEL
        else:
            label = others.setdefault(turn.person or row.author, other_label(len(others) + 1))
        lines.append((label, turn.text))
    own_accounts = [row.author for row, turn in turns if turn.person == person]
    name = next((names[a] for a in own_accounts if a in names), "")
    return extraction_request(name, stored_lines(shown), lines)


def _vectors_of(notes: Sequence[Note], candidates: Sequence[MemoryCandidate], vectors: Vectors) -> Vectors:
    """The vectors of ``notes`` out of ``vectors``, computed for ``candidates`` in order: a note's text is one of
    theirs (a fold keeps the earlier candidate's text), so no text is embedded twice in one capture."""
    by_text = dict(zip((c.text for c in candidates), vectors.values, strict=True))
    return Vectors([by_text[n.record.text] for n in notes], vectors.space)


class Capture:
    """The after-reply capture job (a TurnObserver)."""

    def __init__(
        self,
        db: Database,
        store: MemoryStore,
        book: TombstoneBook,
        llm: LLMClient,
        settings: Settings,
        clock: Callable[[], datetime],
        *,
        is_paused: PausedHook | None = None,
        entails: Entails | None = None,
        forgetter: Forgetter | None = None,
        graph: GraphBook | None = None,
    ) -> None:
        self.db = db
        self.forgetter = forgetter
        self.graph = graph  # where the relations proposed with the notes go (memory.graph)
        self.entails = entails  # the optional local NLI check (memory.encoders.entailment)
        self.store = store
        self.book = book
        self.llm = llm
        self.settings = settings
        self.clock = clock
        self.is_paused: PausedHook = is_paused or (lambda _person: False)
        self.totals: Counter[str] = Counter()
        self._locks = KeyedLocks()  # one capture run per conversation at a time

    async def after_reply(self, turn: CompletedTurn) -> None:
        try:
            await self.forgotten_meanwhile(turn)
        except Exception as exc:  # logged; the forget's own scan already ran, this is its late twin
            log.warning("late forget scrub failed person=%s error=%s", turn.speaker.person, type(exc).__name__)
        if not self.settings.memory.capture:
            return
        try:
            await self.run(turn.message.conversation_key, through_id=turn.reply_message_id)
        except Exception as exc:  # capture must never disturb the conversation
            self.totals["errors"] += 1
            log.warning("capture failed person=%s error=%s", turn.speaker.person, type(exc).__name__)

    async def forgotten_meanwhile(self, turn: CompletedTurn) -> int:
        """A forget applied after this turn's message was recorded and before its reply was: the reply, written
        from a prompt that may have recalled the words, loses them where it is stored. Returns rows rewritten."""
        if self.forgetter is None:
            return 0
        # A forget of this person under way may have rewritten history before this reply was recorded and not be
        # listed yet: waited for, under the lock it holds until it is done.
        async with self.forgetter.recent.locks.hold([turn.speaker.person]):
            return await self._forgotten_meanwhile(turn)

    async def _forgotten_meanwhile(self, turn: CompletedTurn) -> int:
        assert self.forgetter is not None
        changed = 0
        for applied in self.forgetter.recent.recent():
            if not turn.user_message_id <= applied.through_id < turn.reply_message_id:
                continue
            if applied.person != turn.speaker.person and turn.message.conversation_key not in applied.conversations:
                continue
            if not applied.eraser.matches(turn.reply_text):
                continue
            message = turn.message
            changed += await self.forgetter.scrub_late_reply(turn.reply_message_id, message.platform,
                                                             message.chat_id, message.message_id, applied.eraser)
        if changed:
            log.info("late forget scrub person=%s rows=%d", turn.speaker.person, changed)
        return changed

    async def reset(self, conversation: str) -> None:
        """Forget the cursor: the next run reads the thread's newest turns again (operators, tests)."""
        await self.db.run(_reset_cursor, conversation)

    async def run(self, conversation: str, through_id: int | None = None) -> CaptureReport:
        """Capture the thread's turns after the cursor, up to ``through_id``."""
        report = CaptureReport(conversation)
        async with self._locks.hold([conversation]):
            for _chunk in range(CAPTURE_MAX_CHUNKS_PER_RUN):
                if not await self._next_chunk(conversation, through_id, report):
                    break
        self.totals.update(report.as_counts())
        log.info(
            "capture conversation=%s %s",
            conversation,
            " ".join(f"{k}={v}" for k, v in sorted(report.as_counts().items()) if v),
        )
        return report

    async def _next_chunk(self, conversation: str, through_id: int | None, report: CaptureReport) -> bool:
        """Process one chunk; False when there is nothing more to do now."""
        if self.forgetter is None:
            return await self._chunk_from(conversation, through_id, report, 0)
        # Forgets applied from here on are held (with their words) until this chunk's notes are staged.
        with self.forgetter.recent.watching() as mark:
            return await self._chunk_from(conversation, through_id, report, mark)

    async def _chunk_from(self, conversation: str, through_id: int | None, report: CaptureReport,
                          mark: int) -> bool:
        cursor = await self.db.run(_get_cursor, conversation)
        rows = await self.db.run(_pending, conversation, cursor, through_id)
        if not rows:
            return False
        if report.chunks == 0:
            report.cursor_from = cursor.through
        chunk = self._chunk(rows)
        report.chunks += 1
        pairs = [(row, turn_of(row)) for row in chunk if row.role in ("user", "assistant") and not row.silent]
        shown = await shown_chunk(self.db, pairs, self.is_paused)
        pairs, names = shown.pairs, shown.names
        report.paused_people += shown.paused_people
        report.turns += len(pairs)
        persons = list(
            dict.fromkeys(t.person for _r, t in pairs if t.author_role is AuthorRole.USER and t.person)
        )
        failed = False
        for person in persons:
            failed |= not await self._capture_person(conversation, pairs, person, names, report, mark)
        last = chunk[-1].id
        if failed and cursor.failures + 1 < CAPTURE_MAX_ATTEMPTS:
            await self.db.run(
                _move_cursor, conversation, cursor, cursor.through, cursor.failures + 1, self.clock()
            )
            return False
        moved = await self.db.run(_move_cursor, conversation, cursor, last, 0, self.clock())
        report.cursor_to = last
        return moved and (through_id is None or last < through_id)

    def _chunk(self, rows: list[history.StoredMessage]) -> list[history.StoredMessage]:
        """The oldest rows that fit the chunk budget (at least one)."""
        budget = self.settings.memory.consolidation_chunk_chars
        used = 0
        for index, row in enumerate(rows):
            used += len(row.text) if row.role in ("user", "assistant") else 0
            if used > budget and index > 0:
                return rows[:index]
        return rows

    async def _capture_person(
        self,
        conversation: str,
        pairs: list[tuple[history.StoredMessage, Turn]],
        person: str,
        names: dict[str, str],
        report: CaptureReport,
        mark: int,
    ) -> bool:
        """One model call about ``person``; False only when the model could not be reached."""
        shown = await shown_for(self.store, person, [t for _r, t in pairs])
        ms = self.settings.memory
        messages = [
            {"role": "system", "content": capture_instruction(ms.max_memories_per_run)},
            {"role": "user", "content": render_request(pairs, person, names, shown)},
        ]
        report.calls += 1
        try:
            reply = await self.llm.complete(
                messages,
                model=ms.capture_model or None,
                tools=None,
                timeout_s=ms.capture_timeout_s,
                max_tokens=CAPTURE_MAX_TOKENS,
                temperature=0.0,
                purpose="capture",
            )
        except LLMError as exc:
            report.model_failures += 1
            log.warning(
                "capture model failed conversation=%s person=%s kind=%s", conversation, person, exc.kind
            )
            return False
        validation = await validate_off_the_loop(
            reply.text,
            len(reply.tool_calls),
            turns=[t for _r, t in pairs],
            person=person,
            known_ids={m.id for m in shown},
            limits=self._limits(),
            person_names=names_of(pairs, person, names),
            entails=self.entails,
        )
        report.counts.update(validation.counts())
        # One embedding per accepted text, for both the fold and the notes' own vectors.
        texts = [c.text for c in validation.accepted]
        vectors = await self.store.vectors(texts, Collection.NOTES) if texts else Vectors([], HASH_SPACE)
        accepted = self._folded_by_meaning(validation.accepted, vectors)
        report.counts["duplicate_by_meaning"] += len(validation.accepted) - len(accepted)
        notes: list[Note] = []
        proposed_with: dict[str, MemoryCandidate] = {}
        now = self.clock()
        for candidate in accepted:
            if await self.book.blocks_candidate(person, candidate):
                report.tombstoned += 1
                continue
            record = record_of(person, candidate, note_id(person, candidate), now)
            proposed_with[record.id] = candidate
            notes.append(
                Note(
                    record, horizon=candidate.horizon, corrects=candidate.corrects, conversation=conversation
                )
            )
        unique = list({n.record.id: n for n in notes}.values())
        if self.forgetter is None:
            added = await self.store.add_notes(unique, _vectors_of(unique, validation.accepted, vectors))
            report.counts.update(await self.add_relations(person, unique, proposed_with))
        else:
            # Under the forget's lock: a forget either ran before (and is checked here) or sees these notes.
            async with self.forgetter.recent.locks.hold([person]):
                kept = self.not_forgotten(unique, person, mark)
                report.tombstoned += len(unique) - len(kept)
                added = await self.store.add_notes(kept, _vectors_of(kept, validation.accepted, vectors))
                report.counts.update(await self.add_relations(person, kept, proposed_with))
        report.written += len(added)
        report.duplicates += len(notes) - len(added)
        report.note_ids.extend(added)
        return True

    async def add_relations(self, person: str, notes: Sequence[Note],
                            proposed_with: dict[str, MemoryCandidate]) -> Counter[str]:
        """The relations proposed with ``notes`` (by note id, the candidate each came from) join the person's graph,
        with each note's receipts as they were kept (a forget's words already out of its sentences); counted.
        Called under the forget's per-person lock, as the notes are staged, so a forget sees both or neither."""
        counts: Counter[str] = Counter()
        if self.graph is None:
            return counts
        proposals = [
            Proposed(relation, n.record.evidence, n.record.evidence_sentences, n.record.sources, n.record.scope,
                     said_at(n.record),
                     note_id=n.record.id, aliases=proposed_with[n.record.id].aliases)
            for n in notes if n.record.id in proposed_with for relation in proposed_with[n.record.id].relations
        ]
        if proposals:
            growth = await self.graph.add(person, proposals)
            counts["graph_relations"] += len(growth.relations)
            counts["graph_merges"] += len(growth.merges)
        return counts

    def _limits(self) -> ValidationLimits:
        """The validator's limits for this run. With an embedder, its fold of one answer's items merges lexical
        repeats only: two items it could only call a conflict (it drops the later, receipts and all) are left
        for :meth:`_folded_by_meaning`, which folds them when they mean the same and keeps both otherwise."""
        limits = validation_limits(self.settings)
        return replace(limits, conflict_at=math.inf) if self.store.vector_source.ready else limits

    def _folded_by_meaning(self, accepted: list[MemoryCandidate], vectors: Vectors) -> list[MemoryCandidate]:
        """``accepted`` with rewordings of one fact folded into one (:func:`memory.capture.merge_gate.fold_by_meaning`),
        when ``vectors`` (theirs, in order) came from the embedder; as they are otherwise (the validator's lexical
        fold is what there is)."""
        limits = validation_limits(self.settings)
        return fold_by_meaning(accepted, vectors, merge_at=limits.merge_at, conflict_at=limits.conflict_at)

    def not_forgotten(self, notes: list[Note], person: str, mark: int) -> list[Note]:
        """``notes`` without the words of forgets applied since ``mark``: a note holding them in its text or
        quotes goes; one holding them only in a receipt sentence keeps its fact and loses that sentence."""
        assert self.forgetter is not None
        erasers = self.forgetter.recent.since(mark, person)
        if not erasers:
            return notes
        kept: list[Note] = []
        for note in notes:
            r = note.record
            if any(x.matches(t) for x in erasers for t in (r.text, *r.evidence)):
                continue
            for x in erasers:
                note = narrowed_note(note, x)
            kept.append(note)
        return kept
