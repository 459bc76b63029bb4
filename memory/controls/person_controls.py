"""What a person may do with their own memory, whatever the platform: list, ask why, remember,
correct a label, pin, forget (plan first, then confirm), export, pause capture, and answer conflict questions.

What they are shown is everything kith uses: their memories and the staged notes capture wrote since the
nightly review (recall puts those into the very next prompt), each note marked as not yet reviewed
(:class:`Listed`). A label (a record's ``text``, the extractor's paraphrase) is theirs to correct
(:func:`relabel_memory`); the words it stands on (its evidence, sentences and sources) never change with it.

Only the person: every operation takes a :class:`~memory.controls.authorisation.Requester` and acts on that
requester's own memories only (:mod:`memory.controls.authorisation`); pauses are kept by
:mod:`memory.controls.pauses`. Chat, buttons and wording live in :mod:`conversation.memory_commands`.

Facts are never deleted by an answer: "the first" supersedes the second (status superseded and
``valid_to``), "neither" retires both, "both" unlinks the pair; only ``/forget`` deletes, and only
the plan the person saw and confirmed (with a tombstone, see :mod:`memory.forgetting.tombstones`).
"""

from __future__ import annotations

import asyncio
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
from memory.controls.questions import Answer, Question, QuestionBook, QuestionStatus, linked, still_current
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
from memory.core.words import words_of
from memory.forgetting.plan import ForgetPlan, ForgetResult, query_matches
from memory.graph.who import Being, beings, who
from memory.recall.engine import note_is_live
from memory.service import MemoryService
from memory.store.memory_store import MemoryStore
from memory.store.notes import Note

log = logging.getLogger("kith.memory.controls")

# What /why, /pin and /unpin take for a memory's id rather than words to search for. Memory ids are "m_" and
# 16 hex digits (memory.capture.merge_gate); anything of this looser shape is taken as an id, never searched for
# as words.
MEMORY_ID = re.compile(r"m_[0-9a-f]{6,32}")
# A staged note's id: "n_" and 20 hex digits (memory.capture.job.note_id).
NOTE_ID = re.compile(r"n_[0-9a-f]{6,32}")
# A number in the person's listing (/memory numbers its entries from 1, across pages).
LISTED_NUMBER = re.compile(r"[1-9][0-9]{0,5}")


# --- what a person types to keep: a /remember, or a label of their own ----------------------------
def checked_words(text: str, max_chars: int) -> str:
    """``text`` as kith keeps it (normalised, secrets redacted), or :class:`Refused`: nothing, too long, or an
    instruction to the model or a claim of authority over it. One rule for a /remember and a /label."""
    clean = redact(normalize(text))
    if not clean:
        raise Refused(RefusalReason.EMPTY)
    if len(clean) > max_chars:
        raise Refused(RefusalReason.TOO_LONG)
    if instruction_or_authority(clean) is not None:
        raise Refused(RefusalReason.INSTRUCTION)
    return clean


def relabelled(record: MemoryRecord, person: str, label: str, now: datetime) -> MemoryRecord | None:
    """``record`` with ``label`` as its text, the person's words (evidence, sentences, sources) untouched;
    None when it is not ``person``'s or no longer current (a correction replaced it, or it was retired)."""
    if record.person != person or record.status is not Status.ACTIVE:
        return None
    if record.text == label:
        return record
    return replace(record, text=label, updated_at=now)


async def relabel_memory(memory: MemoryService, person: str, memory_id: str, label: str,
                         now: datetime) -> MemoryRecord:
    """The one path a label is corrected by (the chat's /label, ``bot.py memory label``): ``label`` checked as a
    /remember is, then written with the store's compare-and-swap edit, so a capture merging a new receipt into
    the memory meanwhile is kept. The memory is re-embedded under its new label (replace_memory does)."""
    clean = checked_words(label, memory.settings.memory.max_memory_chars)
    stored = await memory.store.edit(memory_id, lambda m: relabelled(m, person, clean, now))
    if stored is None:
        raise Refused(RefusalReason.NOT_FOUND, memory_id)
    return stored


async def notes_in_use(memory: MemoryService, person: str, now: datetime) -> list[Note]:
    """``person``'s staged notes that recall puts into prompts now (not yet reviewed, not lapsed), oldest first."""
    return [n for n in await memory.store.notes_of(person, unpromoted_only=True) if note_is_live(n, now)]


async def said_matching(memory: MemoryService, person: str, query: str, now: datetime) -> list[Listed]:
    """What kith uses about ``person`` whose own words (or label) hold every word of ``query``: the staged notes in
    use first, then the live memories, each newest first. Matched whole words, as a forget matches them.

    The search (:meth:`memory.service.MemoryService.search`) ranks by label; a person, or an operator reading
    their chat, asks in the person's own words, which a label in another language or other words does not hold
    ("Geige" of "PERSON plays the violin", "Gdańsku" of "PERSON's sister lives in Gdansk"). ``/why`` and
    ``bot.py memory search`` put these before what the search ranks."""
    notes = [Listed(n.record, unreviewed=True) for n in reversed(await notes_in_use(memory, person, now))]
    memories = [Listed(r) for r in sorted(await memory.active_memories(person),
                                          key=lambda r: (said_at(r), r.id), reverse=True) if r.is_live(now)]
    listed = (*notes, *memories)

    def matching() -> list[Listed]:
        return [e for e in listed if query_matches(query, [e.record.text, *words_of(e.record).sentences])]

    # Matching every word form of thousands of memories takes a while (0.6 s at 10,000): off the event loop, so
    # the bot's replies go on meanwhile.
    return await asyncio.to_thread(matching)


# --- changes to a memory (each through MemoryStore.edit) --------------------------------------------
def ended(record: MemoryRecord, person: str, status: Status, now: datetime) -> MemoryRecord | None:
    """``record`` no longer current (superseded or retired), links dropped; never a delete."""
    if record.person != person or record.status is not Status.ACTIVE:
        return None
    return replace(record, status=status, valid_to=now, updated_at=now, conflicts_with=())


# --- results ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Listed:
    """One thing kith uses about a person, as they are shown it: a memory, or a staged note not yet reviewed."""

    record: MemoryRecord
    unreviewed: bool = False  # a staged note: in prompts already, not yet looked at by the nightly review


@dataclass(frozen=True, slots=True)
class MemoryPage:
    items: tuple[MemoryRecord, ...]
    page: int  # 1-based, clamped to the pages there are
    pages: int
    total: int
    unreviewed: frozenset[str] = frozenset()  # ids of the items that are staged notes, not yet reviewed
    first_number: int = 1  # the listing's number of the first item (the numbers /why and /label take)
    notes: int = 0  # staged notes among all ``total``


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
    question: Question | None  # None: a pair settled with no question asked (:meth:`MemoryControls.settle`)
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
    async def listing(self, requester: Requester) -> list[Listed]:
        """Everything kith uses about the person now, newest first: their current memories and the staged notes
        recall already puts into prompts. /memory shows it numbered from 1; /why and /label take those numbers."""
        person = person_asking(requester)
        now = self.clock()
        # From the person's index, as recall reads them (caught up with other processes' writes first): reading
        # them from the store took 1.5 s for someone with ten thousand.
        listed = [Listed(r) for r in await self.memory.active_memories(person) if r.is_live(now)]
        listed += [Listed(n.record, unreviewed=True) for n in await notes_in_use(self.memory, person, now)]
        return sorted(listed, key=lambda e: (said_at(e.record), e.record.id), reverse=True)

    async def page(self, requester: Requester, page: int = 1) -> MemoryPage:
        """The person's listing (:meth:`listing`), ``page_size`` per page."""
        listed = await self.listing(requester)
        pages = max(1, -(-len(listed) // self.page_size))
        page = min(max(page, 1), pages)
        start = (page - 1) * self.page_size
        shown = listed[start:start + self.page_size]
        return MemoryPage(tuple(e.record for e in shown), page, pages, len(listed),
                          unreviewed=frozenset(e.record.id for e in shown if e.unreviewed),
                          first_number=start + 1, notes=sum(e.unreviewed for e in listed))

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

    async def _own_note(self, requester: Requester, note_id: str) -> Note:
        notes = await self.store.get_notes([note_id])
        if not notes:
            raise Refused(RefusalReason.NOT_YOURS, note_id)
        check_owner(requester, notes[0].record.person, note_id)
        return notes[0]

    async def _numbered(self, requester: Requester, number: str) -> Listed:
        listed = await self.listing(requester)
        index = int(number) - 1
        if index >= len(listed):
            raise Refused(RefusalReason.NOT_FOUND, number)
        return listed[index]

    async def explain(self, requester: Requester, target: str) -> list[Listed]:
        """What ``target`` names (a number of the listing, a memory's or a staged note's id, or words), to show
        with its words and receipts; an id may name a memory no longer current. Words find staged notes too
        (by whole words, as a forget does: they are few), before the memories search finds."""
        person = person_asking(requester)
        target = target.strip()
        if LISTED_NUMBER.fullmatch(target):
            listed = await self.listing(requester)
            if int(target) <= len(listed):
                return [listed[int(target) - 1]]
            # Beyond the listing, a number is words to search for ("/why 1990").
        if NOTE_ID.fullmatch(target):
            return [Listed((await self._own_note(requester, target)).record, unreviewed=True)]
        said: list[Listed] = []
        if target and not MEMORY_ID.fullmatch(target):
            said = await said_matching(self.memory, person, target, self.clock())
        searched = [Listed(r) for r in await self._find(requester, target, WHY_MAX_HITS)
                    if all(r.id != e.record.id for e in said)]
        found = [*said, *searched][:WHY_MAX_HITS]
        if not found:
            raise Refused(RefusalReason.NOT_FOUND, target)
        return found

    async def who(self, requester: Requester, name: str) -> Being:
        """The being of the requester's own graph that ``name`` names, with every relation and its words."""
        person = person_asking(requester)
        if not name.strip():
            raise Refused(RefusalReason.EMPTY)
        found = who(await self.memory.graph.of(person), name)
        if found is None:
            raise Refused(RefusalReason.NOT_FOUND, name.strip())
        return found

    async def beings(self, requester: Requester) -> list[Being]:
        """Everyone and everything of the requester's own graph, those with most relations first."""
        return beings(await self.memory.graph.of(person_asking(requester)))

    async def why(self, requester: Requester, target: str) -> list[MemoryRecord]:
        """The memories and staged notes ``target`` names (:meth:`explain`), with their receipts."""
        return [e.record for e in await self.explain(requester, target)]

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
        clean = checked_words(text, self.memory.settings.memory.max_memory_chars)
        candidate = MemoryCandidate(kind=MemoryKind.FACT, text=clean, evidence=(clean,),
                                    importance=REMEMBER_IMPORTANCE, horizon=Horizon.LASTING, sources=(source,),
                                    scope=scope)
        result = await self.memory.gate.admit(person, candidate)
        if result.memory_id is None:
            raise Refused(RefusalReason.BLOCKED)
        self._changed(person)
        return result

    # --- labels -------------------------------------------------------------------------------------
    async def relabel(self, requester: Requester, target: str, label: str) -> MemoryRecord:
        """Correct the label of the memory ``target`` names (a number of the listing or an id) to ``label``,
        the person's words under it unchanged (:func:`relabel_memory`). A staged note is refused as not yet
        reviewed: the nightly review may still merge it, and a memory's label is what is corrected."""
        person = person_asking(requester)
        target = target.strip()
        async with self._locks.hold([person]):
            if LISTED_NUMBER.fullmatch(target):
                listed = await self._numbered(requester, target)
            elif NOTE_ID.fullmatch(target):
                listed = Listed((await self._own_note(requester, target)).record, unreviewed=True)
            elif MEMORY_ID.fullmatch(target):
                listed = Listed(await self._own(requester, target))
            else:
                raise Refused(RefusalReason.EMPTY if not target else RefusalReason.NOT_FOUND, target)
            if listed.unreviewed:
                raise Refused(RefusalReason.UNREVIEWED, listed.record.id)
            stored = await relabel_memory(self.memory, person, listed.record.id, label, self.clock())
        log.info("label corrected person=%s memory=%s", person, stored.id)
        self._changed(person)
        return stored

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
            resolution = await self._settle(question, person, answer, first, second, now)
        log.info("question answered id=%s person=%s answer=%s superseded=%d retired=%d", question.id, person,
                 answer.value, len(resolution.superseded), len(resolution.retired))
        self._changed(person)
        return resolution

    async def settle(self, requester: Requester, first_id: str, second_id: str, answer: Answer) -> Resolution:
        """Settle two of the person's memories in conflict as :meth:`answer` settles a question about them, when no
        question asks (the memory room's buttons). Writing a question only to answer it would count against the
        hourly cap on the questions kith asks (``QUESTIONS_PER_HOUR``)."""
        person = person_asking(requester)
        now = self.clock()
        first, second = await self.memory.get(first_id), await self.memory.get(second_id)
        for record, memory_id in ((first, first_id), (second, second_id)):
            if record is not None:
                check_owner(requester, record.person, memory_id)
        if not (first is not None and second is not None and first.person == second.person == person
                and first.is_live(now) and second.is_live(now) and linked(first, second)):
            raise Refused(RefusalReason.STALE, first_id)
        async with self._locks.hold([person]):
            resolution = await self._settle(None, person, answer, first, second, now)
        log.info("conflict settled person=%s answer=%s superseded=%d retired=%d", person, answer.value,
                 len(resolution.superseded), len(resolution.retired))
        self._changed(person)
        return resolution

    async def _settle(self, question: Question | None, person: str, answer: Answer, first: MemoryRecord,
                      second: MemoryRecord, now: datetime) -> Resolution:
        if answer is Answer.BOTH:
            await self.memory.clear_conflict(first.id, second.id)
            return Resolution(question, answer, first, second, unlinked=True)
        losers = {Answer.FIRST: [second], Answer.SECOND: [first], Answer.NEITHER: [first, second]}[answer]
        status = Status.RETIRED if answer is Answer.NEITHER else Status.SUPERSEDED
        done = [loser.id for loser in losers if await self._end(loser.id, person, status, now)]
        # The graph follows the person's word: what the ended memories said held until now (memory.graph).
        await self.memory.graph.answered(person, done)
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
    "Listed",
    "MemoryControls",
    "MemoryPage",
    "PendingForget",
    "Resolution",
    "checked_words",
    "ended",
    "forget_counts",
    "notes_in_use",
    "relabel_memory",
    "relabelled",
    "said_matching",
]
