"""What a person may do with their own memory, whatever the platform: list, ask why, remember,
pin, forget (plan first, then confirm), export, pause capture, and answer conflict questions.

Only the person: every operation takes a :class:`~memory.controls.authorisation.Requester` and acts on that
requester's own memories only (:mod:`memory.controls.authorisation`); pauses are kept by
:mod:`memory.controls.pauses`. Chat, buttons and wording live in :mod:`conversation.memory_commands`.

Facts are never deleted by an answer: "the first" supersedes the second (status superseded and
``valid_to``), "neither" retires both, "both" unlinks the pair; only ``/forget`` deletes, and only
the plan the person saw and confirmed (with a tombstone, see :mod:`memory.forgetting.tombstones`).
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from ground.db import Database
from ground.keyed_locks import KeyedLocks
from ground.redaction import redact
from ground.tunables import (
    FORGET_PLAN_TTL_S,
    MEMORY_PAGE_SIZE,
    PINNED_MAX,
    REMEMBER_IMPORTANCE,
    WHY_MAX_HITS,
)
from memory.capture.merge_gate import GateResult
from memory.capture.validation import instruction_or_authority
from memory.controls.authorisation import RefusalReason, Refused, Requester, check_owner, person_asking
from memory.controls.pauses import PauseBook
from memory.controls.questions import Answer, Question, QuestionBook, QuestionStatus, still_current
from memory.core.records import (
    Horizon,
    MemoryCandidate,
    MemoryKind,
    MemoryRecord,
    Scope,
    Source,
    Status,
    said_at,
    without_links,
)
from memory.core.text import normalize
from memory.forgetting.plan import ForgetPlan, ForgetResult, query_matches
from memory.service import MemoryService
from memory.store.memory_store import MemoryStore

log = logging.getLogger("kith.memory.controls")

# What /why, /pin and /unpin take for a memory's id rather than words to search for. Memory ids are "m_" and
# 16 hex digits (memory.capture.merge_gate); anything of this looser shape is taken as an id, never searched for
# as words.
MEMORY_ID = re.compile(r"m_[0-9a-f]{6,32}")


# --- changes to a memory (each through MemoryStore.edit) --------------------------------------------
def ended(record: MemoryRecord, person: str, status: Status, now: datetime) -> MemoryRecord | None:
    """``record`` no longer current (superseded or retired), links dropped; never a delete."""
    if record.person != person or record.status is not Status.ACTIVE:
        return None
    return replace(record, status=status, valid_to=now, updated_at=now, conflicts_with=())


# --- results ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class MemoryPage:
    items: tuple[MemoryRecord, ...]
    page: int  # 1-based, clamped to the pages there are
    pages: int
    total: int


@dataclass(frozen=True, slots=True)
class PendingForget:
    token: str
    plan: ForgetPlan
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ExportFile:
    name: str
    data: bytes
    counts: dict[str, int]  # entries of each list in the document: "memories", "notes", "goals", "messages", …

    @property
    def memories(self) -> int:
        return self.counts.get("memories", 0)

    @property
    def notes(self) -> int:
        return self.counts.get("notes", 0)


@dataclass(frozen=True, slots=True)
class Resolution:
    question: Question
    answer: Answer
    first: MemoryRecord  # as they stood when the person answered
    second: MemoryRecord
    superseded: tuple[str, ...] = ()
    retired: tuple[str, ...] = ()
    unlinked: bool = False


def new_token() -> str:
    return secrets.token_hex(6)


# Everything stored about one person, as one JSON document (the "you" wording: it goes to the person).
# Assembled above this layer, where goals, links and the outbox are seen too; the caller checks who asks.
Exporter = Callable[[str], Awaitable[dict[str, Any]]]


class MemoryControls:
    def __init__(self, memory: MemoryService, questions: QuestionBook, pauses: PauseBook, db: Database,
                 clock: Callable[[], datetime], *, pinned_max: int = PINNED_MAX,
                 page_size: int = MEMORY_PAGE_SIZE, forget_ttl_s: float = FORGET_PLAN_TTL_S,
                 on_change: Callable[[str], None] | None = None,
                 new_token: Callable[[], str] = new_token,
                 drop_window: Callable[[str], None] | None = None,
                 exporter: Exporter | None = None) -> None:
        self.memory = memory
        self.questions = questions
        self.pauses = pauses
        self.db = db
        self.clock = clock
        self.pinned_max = pinned_max
        self.page_size = page_size
        self.forget_ttl = timedelta(seconds=forget_ttl_s)
        # Called with a person whose pins or live facts changed (e.g. the recall engine's forget_pinned).
        self.on_change = on_change
        self.new_token = new_token
        # Called with each thread whose history a forget rewrote: a window of it kept in memory is stale.
        self.drop_window = drop_window
        self.exporter = exporter
        self._pending: dict[str, PendingForget] = {}  # token -> plan shown, awaiting the person's word
        self._locks = KeyedLocks()  # one change to a person's pins or conflicts at a time

    @property
    def store(self) -> MemoryStore:
        return self.memory.store

    def _changed(self, person: str) -> None:
        if self.on_change is not None:
            self.on_change(person)

    # --- reading ----------------------------------------------------------------------------------
    async def page(self, requester: Requester, page: int = 1) -> MemoryPage:
        """The person's current memories, newest first, ``page_size`` per page."""
        person = person_asking(requester)
        records = sorted(await self.memory.list_memories(person), key=lambda r: (said_at(r), r.id), reverse=True)
        now = self.clock()
        records = [r for r in records if r.is_live(now)]
        pages = max(1, -(-len(records) // self.page_size))
        page = min(max(page, 1), pages)
        start = (page - 1) * self.page_size
        return MemoryPage(tuple(records[start:start + self.page_size]), page, pages, len(records))

    async def _own(self, requester: Requester, memory_id: str) -> MemoryRecord:
        record = await self.memory.get(memory_id)
        if record is None:
            # The same answer as for someone else's id: whether it exists is not this person's business.
            raise Refused(RefusalReason.NOT_YOURS, memory_id)
        check_owner(requester, record.person, memory_id)
        return record

    async def _find(self, requester: Requester, target: str, limit: int,
                    keep: Callable[[MemoryRecord], bool] = lambda _r: True) -> list[MemoryRecord]:
        person = person_asking(requester)
        target = target.strip()
        if not target:
            raise Refused(RefusalReason.EMPTY)
        if MEMORY_ID.fullmatch(target):
            record = await self._own(requester, target)
            return [record] if keep(record) else []
        hits = [h.record for h in (await self.memory.search(person, target, limit * 3)).hits if keep(h.record)]
        return hits[:limit]

    async def why(self, requester: Requester, target: str) -> list[MemoryRecord]:
        """The memories ``target`` (an id, or words) names, with their receipts; an id may be inactive."""
        found = await self._find(requester, target, WHY_MAX_HITS)
        if not found:
            raise Refused(RefusalReason.NOT_FOUND, target)
        return found

    async def open_question(self, requester: Requester) -> Question | None:
        """The person's oldest open question that still asks about current facts.

        One whose facts changed since (a /forget, a correction) is voided on the way, so a typed "2"
        meant for the conversation is not taken as an answer to a question nobody needs any more.
        """
        for question in await self.questions.open_of(person_asking(requester)):
            if await self.questions.still_open(question, self.memory.get):
                return question
        return None

    # --- remembering --------------------------------------------------------------------------------
    async def remember(self, requester: Requester, text: str, source: Source, scope: Scope) -> GateResult:
        """An explicit memory: the person's own words, this very message as the receipt, through the gate."""
        person = person_asking(requester)
        clean = redact(normalize(text))
        if not clean:
            raise Refused(RefusalReason.EMPTY)
        if len(clean) > self.memory.settings.memory.max_memory_chars:
            raise Refused(RefusalReason.TOO_LONG)
        if instruction_or_authority(clean) is not None:
            raise Refused(RefusalReason.INSTRUCTION)
        candidate = MemoryCandidate(kind=MemoryKind.FACT, text=clean, evidence=(clean,),
                                    importance=REMEMBER_IMPORTANCE, horizon=Horizon.LASTING, sources=(source,),
                                    scope=scope)
        result = await self.memory.gate.admit(person, candidate)
        if result.memory_id is None:
            raise Refused(RefusalReason.BLOCKED)
        self._changed(person)
        return result

    # --- pins ---------------------------------------------------------------------------------------
    async def pins(self, requester: Requester) -> list[MemoryRecord]:
        return await self.store.pinned_of(person_asking(requester))

    async def pin(self, requester: Requester, target: str) -> MemoryRecord:
        person = person_asking(requester)
        now = self.clock()
        async with self._locks.hold([person]):
            found = await self._find(requester, target, 1, lambda r: r.is_live(now))
            if not found:
                raise Refused(RefusalReason.NOT_FOUND, target)
            record = found[0]
            if record.pinned:
                return record
            if len(await self.store.pinned_of(person)) >= self.pinned_max:
                raise Refused(RefusalReason.PIN_LIMIT, str(self.pinned_max))
            stored = await self.store.edit(record.id, lambda m: self._set_pin(m, person, True))
        if stored is None:
            raise Refused(RefusalReason.NOT_FOUND, target)
        self._changed(person)
        return stored

    async def unpin(self, requester: Requester, target: str) -> MemoryRecord:
        person = person_asking(requester)
        async with self._locks.hold([person]):
            if MEMORY_ID.fullmatch(target.strip()):
                found = [r for r in await self._find(requester, target, 1) if r.pinned]
            else:
                # Among a dozen pins, whole words pick the one meant better than ranked search.
                pinned = await self.store.pinned_of(person)
                found = [r for r in pinned if query_matches(target, [r.text])] or await self._find(
                    requester, target, 1, lambda r: r.pinned)
            if not found:
                raise Refused(RefusalReason.NOT_FOUND, target)
            stored = await self.store.edit(found[0].id, lambda m: self._set_pin(m, person, False))
        if stored is None:
            raise Refused(RefusalReason.NOT_FOUND, target)
        self._changed(person)
        return stored

    def _set_pin(self, record: MemoryRecord, person: str, pinned: bool) -> MemoryRecord | None:
        if record.person != person or record.status is not Status.ACTIVE:
            return None
        if record.pinned == pinned:
            return record
        return replace(record, pinned=pinned, updated_at=self.clock())

    # --- forgetting ---------------------------------------------------------------------------------
    async def plan_forget(self, requester: Requester, query: str) -> PendingForget:
        """The plan for forgetting ``query``, kept until the person confirms, cancels or it expires."""
        person = person_asking(requester)
        if not query.strip():
            raise Refused(RefusalReason.EMPTY)
        plan = await self.memory.plan_forget(person, query)
        pending = PendingForget(self.new_token(), plan, self.clock())
        self._drop_expired()
        # One plan per person: a new /forget replaces the one shown before.
        for token in [t for t, p in self._pending.items() if p.plan.person == person]:
            del self._pending[token]
        if not plan.empty:
            self._pending[pending.token] = pending
        return pending

    def pending_forget(self, person: str) -> PendingForget | None:
        self._drop_expired()
        return next((p for p in self._pending.values() if p.plan.person == person), None)

    def _take(self, requester: Requester, token: str | None) -> PendingForget:
        person = person_asking(requester)
        self._drop_expired()
        pending = self._pending.get(token) if token is not None else self.pending_forget(person)
        if pending is None:
            raise Refused(RefusalReason.NOTHING_PENDING)
        check_owner(requester, pending.plan.person)
        del self._pending[pending.token]
        return pending

    async def confirm_forget(self, requester: Requester, token: str | None = None) -> ForgetResult:
        """Delete exactly the plan the person was shown (their latest, or the one ``token`` names)."""
        pending = self._take(requester, token)
        result = await self.memory.apply_forget(pending.plan)
        if self.drop_window is not None:
            for conversation in result.conversations:
                self.drop_window(conversation)
        self._changed(pending.plan.person)
        return result

    def cancel_forget(self, requester: Requester, token: str | None = None) -> ForgetPlan:
        return self._take(requester, token).plan

    def _drop_expired(self) -> None:
        cutoff = self.clock() - self.forget_ttl
        for token in [t for t, p in self._pending.items() if p.created_at <= cutoff]:
            del self._pending[token]

    # --- export, pause ------------------------------------------------------------------------------
    async def export(self, requester: Requester) -> ExportFile:
        """Everything stored about the person, as one JSON file; nothing about anyone else."""
        person = person_asking(requester)
        if self.exporter is None:
            raise RuntimeError("no exporter was given to MemoryControls")
        data = await self.exporter(person)
        body = json.dumps(data, ensure_ascii=False, indent=2).encode("utf-8")
        name = f"kith-export-{self.clock().astimezone(UTC).strftime('%Y%m%d-%H%M%S')}.json"
        counts = {key: len(value) for key, value in data.items() if isinstance(value, list)}
        log.info("export person=%s memories=%d notes=%d messages=%d bytes=%d", person, counts.get("memories", 0),
                 counts.get("notes", 0), counts.get("messages", 0), len(body))
        return ExportFile(name, body, counts)

    async def pause(self, requester: Requester) -> None:
        await self.pauses.set(person_asking(requester), True, self.clock())

    async def resume(self, requester: Requester) -> None:
        await self.pauses.set(person_asking(requester), False, self.clock())

    def is_paused(self, person: str) -> bool:
        return self.pauses.is_paused(person)

    # --- answering a conflict question ---------------------------------------------------------------
    async def answer(self, requester: Requester, question_id: str, answer: Answer) -> Resolution:
        """Settle a conflict question the way its person answered it."""
        person_asking(requester)
        question = await self.questions.get(question_id)
        if question is None:
            raise Refused(RefusalReason.NOT_FOUND, question_id)
        check_owner(requester, question.person, question_id)
        if question.status is not QuestionStatus.OPEN:
            raise Refused(RefusalReason.ALREADY_ANSWERED, question_id)
        person = question.person
        now = self.clock()
        first, second = await self.memory.get(question.first_id), await self.memory.get(question.second_id)
        if not still_current(question, first, second, now):
            await self.questions.close(question.id, QuestionStatus.VOID, by=requester.account)
            raise Refused(RefusalReason.STALE, question_id)
        assert first is not None and second is not None
        if not await self.questions.close(question.id, QuestionStatus.ANSWERED, answer, by=requester.account):
            raise Refused(RefusalReason.ALREADY_ANSWERED, question_id)
        async with self._locks.hold([person]):
            resolution = await self._settle(question, answer, first, second, now)
        log.info("question answered id=%s person=%s answer=%s superseded=%d retired=%d", question.id, person,
                 answer.value, len(resolution.superseded), len(resolution.retired))
        self._changed(person)
        return resolution

    async def _settle(self, question: Question, answer: Answer, first: MemoryRecord, second: MemoryRecord,
                      now: datetime) -> Resolution:
        person = question.person
        if answer is Answer.BOTH:
            await self.memory.clear_conflict(first.id, second.id)
            return Resolution(question, answer, first, second, unlinked=True)
        losers = {Answer.FIRST: [second], Answer.SECOND: [first], Answer.NEITHER: [first, second]}[answer]
        status = Status.RETIRED if answer is Answer.NEITHER else Status.SUPERSEDED
        done = [loser.id for loser in losers if await self._end(loser.id, person, status, now)]
        if status is Status.RETIRED:
            return Resolution(question, answer, first, second, retired=tuple(done))
        return Resolution(question, answer, first, second, superseded=tuple(done))

    async def _end(self, memory_id: str, person: str, status: Status, now: datetime) -> bool:
        """Stop a memory being current and take its conflict links off every partner too."""
        partners: list[str] = []

        def change(current: MemoryRecord) -> MemoryRecord | None:
            partners[:] = current.conflicts_with
            return ended(current, person, status, now)

        if await self.store.edit(memory_id, change) is None:
            return False
        for partner in partners:
            await self.store.edit(partner, lambda m: without_links(m, {memory_id}, now))
        return True


def forget_counts(plan: ForgetPlan) -> tuple[int, int, int, int]:
    """(memories, notes, other memories whose links to them go, rows elsewhere holding its words) of a plan."""
    return len(plan.memory_ids), len(plan.note_ids), len(plan.unlink), plan.places.total


__all__ = [
    "ExportFile",
    "Exporter",
    "MemoryControls",
    "MemoryPage",
    "PendingForget",
    "Resolution",
    "ended",
    "forget_counts",
]
