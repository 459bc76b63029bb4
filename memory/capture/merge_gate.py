"""The merge/conflict gate: a new fact is compared with what is stored before it is written.

For one candidate the gate takes the person's nearest active memories from Chroma
(``memory.gate_candidates``) plus the best BM25 hits, and lets :mod:`memory.core.similarity` decide:

* MERGE: the fact is already known. The existing memory gains the new evidence and source,
  a little importance and a tier of confidence; one fact, not two.
* CONFLICT: same kind, related, disagreeing. The new memory is written and both sides carry
  each other's id in ``conflicts_with``, so kith asks which is current instead of choosing.
* NEW: written as is.

The same decision folds the items of one capture run into each other by meaning
(:func:`fold_by_meaning`): rewordings of one fact in one answer become one staged note with every
receipt, before any of them is stored.

Nothing is deleted or rewritten automatically. A cosine counts only when both vectors came
from the embedder; when the embedder fails the decision is lexical and the write still
happens. Every change to an existing memory is a compare-and-swap; a lost race re-reads and
decides again. A tombstone (see :mod:`memory.forgetting.tombstones`) stops a forgotten fact at the door.
"""

from __future__ import annotations

import enum
import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from ground.config import MemorySettings
from ground.tunables import (
    GATE_QUERY_WORDS,
    MAX_CONFLICT_LINKS,
    MAX_EVIDENCE_PER_MEMORY,
    MEMORY_EDIT_ATTEMPTS,
    MERGE_IMPORTANCE_BOOST,
)
from memory.core.records import (
    Horizon,
    MemoryCandidate,
    MemoryKind,
    MemoryRecord,
    Scope,
    Status,
    Tier,
    horizon_expiry,
    merged_candidate,
    record_of,
    without_links,
)
from memory.core.similarity import Action, Match, Via, decide, matches
from memory.core.vector_table import cosine
from memory.forgetting.tombstones import TombstoneBook
from memory.graph.book import GraphBook
from memory.store.memory_store import MemoryStore
from memory.store.person_index import MemorySummary
from memory.store.vectors import Vectors
from memory.store.writes import MemoryNotFound, RevisionConflict

log = logging.getLogger("kith.memory.gate")



class Outcome(enum.StrEnum):
    NEW = "new"
    MERGED = "merged"
    CONFLICT = "conflict"
    BLOCKED = "blocked"  # a tombstone: the person asked kith to forget this


@dataclass(frozen=True, slots=True)
class GateResult:
    outcome: Outcome
    memory_id: str | None
    score: float = 0.0
    via: Via | None = None
    linked: tuple[str, ...] = ()  # conflicts flagged both ways
    superseded: str | None = None  # the memory an explicit correction replaced
    embedder_cosines: bool = False  # whether any embedder cosine took part in the decision


@dataclass(frozen=True, slots=True)
class Comparison:
    """What the gate compared a candidate with, and what similarity decided."""

    vectors: Vectors
    records: dict[str, MemorySummary]  # the in-memory view; a merge re-reads its target
    cosines: dict[str, float]  # trusted embedder cosines only
    matches: list[Match]


@dataclass
class PromoteReport:
    notes: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    superseded: int = 0
    graph_conflicts: int = 0  # memory pairs linked because their relations contradict (memory.graph)

    def add(self, result: GateResult) -> None:
        self.notes += 1
        self.outcomes[result.outcome.value] = self.outcomes.get(result.outcome.value, 0) + 1
        self.superseded += result.superseded is not None


def new_memory_id() -> str:
    return "m_" + secrets.token_hex(8)


_NEXT_TIER = {Tier.OBSERVATION: Tier.BELIEF, Tier.BELIEF: Tier.KNOWLEDGE, Tier.KNOWLEDGE: Tier.KNOWLEDGE}


def merged_record(existing: MemoryRecord, candidate: MemoryCandidate, now: datetime) -> MemoryRecord | None:
    """``existing`` reinforced by ``candidate``; ``None`` when the candidate adds no new receipt."""
    new_quotes = [q for q in candidate.evidence if q not in existing.evidence]
    new_sentences = [s for s in candidate.evidence_sentences if s not in existing.evidence_sentences]
    known_sources = {(s.platform, s.chat_id, s.message_id) for s in existing.sources}
    new_sources = [s for s in candidate.sources if (s.platform, s.chat_id, s.message_id) not in known_sources]
    if not new_quotes and not new_sources:
        return None  # the same receipt again (a re-run): nothing to reinforce
    tier = _NEXT_TIER[existing.tier]
    if existing.kind is MemoryKind.EPISODE and tier is Tier.KNOWLEDGE:
        tier = Tier.BELIEF  # a dated episode is believed, never general knowledge
    expires_at = existing.expires_at
    if candidate.horizon is Horizon.LASTING:
        expires_at = None  # "it's lasting" takes the horizon off
    return replace(
        existing,
        evidence=(*existing.evidence, *new_quotes)[-MAX_EVIDENCE_PER_MEMORY:],
        evidence_sentences=(*existing.evidence_sentences, *new_sentences)[-MAX_EVIDENCE_PER_MEMORY:],
        sources=(*existing.sources, *new_sources)[-MAX_EVIDENCE_PER_MEMORY:],
        importance=min(1.0, max(existing.importance, candidate.importance) + MERGE_IMPORTANCE_BOOST),
        # Said anywhere private, it stays private.
        scope=Scope.DM if Scope.DM in (existing.scope, candidate.scope) else Scope.SHARED,
        tier=tier,
        expires_at=expires_at,
        updated_at=now,
    )


def fold_by_meaning(
    candidates: Sequence[MemoryCandidate], vectors: Vectors, *, merge_at: float, conflict_at: float
) -> list[MemoryCandidate]:
    """The items of one capture run with each rewording folded into the first item it is the same fact as.

    ``vectors`` are the candidates' texts' vectors, in order; unless they came from the embedder the items come
    back as they are (the validator's lexical fold already ran). The decision is the gate's
    (:func:`memory.core.similarity.decide`), so two items that disagree (another place, number, negation) stay
    two, for the gate to flag against each other when they are promoted; a merge adds the later item's
    receipts to the earlier (:func:`memory.core.records.merged_candidate`)."""
    if not vectors.from_embedder or len(candidates) < 2:
        return list(candidates)
    kept: list[tuple[MemoryCandidate, Sequence[float]]] = []
    for candidate, vector in zip(candidates, vectors.values, strict=True):
        best: tuple[float, int] | None = None
        for position, (earlier, earlier_vector) in enumerate(kept):
            similar = cosine(vector, earlier_vector)
            decision = decide(candidate.text, earlier.text, cosine=similar, cosine_from_embedder=True,
                              same_kind=candidate.kind is earlier.kind, merge_at=merge_at, conflict_at=conflict_at)
            if decision.action is Action.MERGE and (best is None or decision.score > best[0]):
                best = (decision.score, position)
        if best is None:
            kept.append((candidate, vector))
        else:
            earlier, earlier_vector = kept[best[1]]
            kept[best[1]] = (merged_candidate(earlier, candidate), earlier_vector)
    return [candidate for candidate, _vector in kept]


class MemoryGate:
    def __init__(
        self,
        store: MemoryStore,
        book: TombstoneBook,
        settings: MemorySettings,
        clock: Callable[[], datetime],
        new_id: Callable[[], str] = new_memory_id,
        graph: GraphBook | None = None,
    ) -> None:
        self.store = store
        self.graph = graph
        self.book = book
        self.settings = settings
        self.clock = clock
        self.new_id = new_id

    async def compare(
        self,
        person: str,
        text: str,
        kind: MemoryKind | str,
        *,
        vectors: Vectors | None = None,
        exclude: Sequence[str] = (),
    ) -> Comparison:
        """The person's live memories nearest ``text`` (vector and BM25) and similarity's verdicts."""
        vectors = vectors or await self.store.vectors([text])
        found_candidates = await self.store.candidates(
            person,
            vectors=vectors,
            query=text,
            k=self.settings.gate_candidates,
            max_query_words=GATE_QUERY_WORDS,
        )
        now = self.clock()
        records: dict[str, MemorySummary] = {}
        cosines: dict[str, float] = {}
        for c in found_candidates:
            if c.summary.is_live(now) and c.summary.id not in exclude:
                records[c.summary.id] = c.summary
                if c.trusted and c.cosine is not None:
                    cosines[c.summary.id] = c.cosine
        found = matches(text, str(kind), list(records.values()), cosines,
                        merge_at=self.settings.merge_threshold, conflict_at=self.settings.conflict_threshold)
        return Comparison(vectors, records, cosines, found)

    async def admit(self, person: str, candidate: MemoryCandidate) -> GateResult:
        """Merge, flag or add one validated candidate for ``person``."""
        if await self.book.blocks_candidate(person, candidate):
            log.info("gate blocked by tombstone person=%s", person)
            return GateResult(Outcome.BLOCKED, None)
        vectors = await self.store.vectors([candidate.text])
        exclude = (candidate.corrects,) if candidate.corrects else ()
        result: GateResult | None = None
        lost: RevisionConflict | MemoryNotFound | None = None
        for _attempt in range(MEMORY_EDIT_ATTEMPTS):
            view = await self.compare(
                person, candidate.text, candidate.kind, vectors=vectors, exclude=exclude
            )
            try:
                result = await self._write(person, candidate, view)
                break
            except (RevisionConflict, MemoryNotFound) as exc:
                lost = exc  # someone changed the memory we meant to merge into: look again
        if result is None:
            assert lost is not None
            raise lost
        if candidate.corrects:
            superseded = await self._supersede(person, candidate.corrects)
            if superseded is None and result.memory_id is not None:
                # A pin or a standing instruction is never retired by what a model read into a message:
                # both stay, linked, and the person is asked which is current.
                if await self._link_pair(result.memory_id, candidate.corrects):
                    result = replace(result, linked=(*result.linked, candidate.corrects),
                                     outcome=Outcome.CONFLICT if result.outcome is Outcome.NEW else result.outcome)
            else:
                result = replace(result, superseded=candidate.corrects if superseded else None)
        log.info(
            "gate person=%s outcome=%s via=%s score=%.2f linked=%d",
            person,
            result.outcome.value,
            result.via.value if result.via else "-",
            result.score,
            len(result.linked),
        )
        return result

    async def _write(self, person: str, candidate: MemoryCandidate, view: Comparison) -> GateResult:
        now = self.clock()
        used_cosines = bool(view.cosines)
        best = view.matches[0] if view.matches else None
        if best is not None and best.decision.action is Action.MERGE:
            existing = await self.store.get_memory(best.id)
            if existing is None or existing.person != person or not existing.is_live(now):
                self.store.indexes.forget(person, best.id)  # gone or changed elsewhere: decide again
                raise MemoryNotFound(best.id)
            merged = merged_record(existing, candidate, now)
            if merged is not None:
                await self.store.replace_memory(merged)
            return GateResult(
                Outcome.MERGED,
                existing.id,
                best.decision.score,
                best.decision.via,
                embedder_cosines=used_cosines,
            )
        conflicts = [m for m in view.matches if m.decision.action is Action.CONFLICT][:MAX_CONFLICT_LINKS]
        record = record_of(person, candidate, self.new_id(), now, expires_at=horizon_expiry(candidate.horizon, now),
                           conflicts_with=[m.id for m in conflicts])
        await self.store.add_memory(record, view.vectors)
        if not conflicts:
            return GateResult(Outcome.NEW, record.id, embedder_cosines=used_cosines)
        linked = await self._link_back(record, [m.id for m in conflicts])
        top = conflicts[0].decision
        return GateResult(
            Outcome.CONFLICT if linked else Outcome.NEW,
            record.id,
            top.score,
            top.via,
            linked=linked,
            embedder_cosines=used_cosines,
        )

    async def _link_back(self, record: MemoryRecord, targets: Sequence[str]) -> tuple[str, ...]:
        """Add ``record.id`` to each target's conflicts_with; drop links to targets that vanished."""
        linked: list[str] = []
        for target in targets:
            if await self.store.edit(target, lambda m: _add_link(m, record.id, self.clock())) is not None:
                linked.append(target)
        if len(linked) != len(targets):
            # A target was forgotten or retired meanwhile: the link must not dangle on our side.
            await self.store.edit(
                record.id, lambda m: replace(m, conflicts_with=tuple(linked), updated_at=self.clock())
            )
        return tuple(linked)

    async def _link_pair(self, a: str, b: str) -> bool:
        """Flag ``a`` and ``b`` as in conflict, on both sides; False (and no half link) if either is gone."""
        if await self.store.edit(b, lambda m: _add_link(m, a, self.clock())) is None:
            return False
        if await self.store.edit(a, lambda m: _add_link(m, b, self.clock())) is not None:
            return True
        await self.store.edit(b, lambda m: without_links(m, {a}, self.clock()))
        return False

    async def _supersede(self, person: str, memory_id: str) -> bool | None:
        """True once superseded; False if gone or not the person's; None if the person chose to keep it as
        it is (pinned, or an instruction they gave), which only they may retire. Decided in the same
        compare-and-swap as the write."""
        now = self.clock()
        kept = False

        def change(m: MemoryRecord) -> MemoryRecord | None:
            nonlocal kept
            kept = m.person == person and (m.pinned or m.kind is MemoryKind.INSTRUCTION)
            if m.person != person or m.status is not Status.ACTIVE or kept:
                return None
            return replace(m, status=Status.SUPERSEDED, valid_to=now, updated_at=now)

        superseded = await self.store.edit(memory_id, change) is not None
        return None if kept else superseded

    async def clear_conflict(self, a: str, b: str) -> bool:
        """Remove the conflict flag between two memories, on both sides."""
        now = self.clock()
        cleared_a = await self.store.edit(a, lambda m: without_links(m, {b}, now)) is not None
        cleared_b = await self.store.edit(b, lambda m: without_links(m, {a}, now)) is not None
        return cleared_a or cleared_b

    async def promote(self, person: str) -> PromoteReport:
        """Staged notes of ``person`` -> curated memories through the gate; notes are marked, not deleted."""
        report = PromoteReport()
        handled: list[tuple[str, str | None]] = []
        try:
            for note in await self.store.notes_of(person, unpromoted_only=True):
                result = await self.admit(person, note.candidate())
                handled.append((note.record.id, result.memory_id))
                report.add(result)
        finally:
            # One write for all the marks; a crash before it only means a re-run, and admitting the
            # same receipt again changes nothing.
            await self.store.mark_promoted_many(handled, self.clock())
        if self.graph is not None:
            report.graph_conflicts = await self._link_contradictions(person, handled)
        log.info("promoted person=%s notes=%d outcomes=%s graph_conflicts=%d", person, report.notes,
                 report.outcomes, report.graph_conflicts)
        return report

    async def _link_contradictions(self, person: str, handled: Sequence[tuple[str, str | None]]) -> int:
        """The relations of the notes just curated now point at their memories; two memories whose relations
        contradict (one subject, one relation, two different things: :meth:`memory.graph.PersonGraph.contradictions`)
        are linked as any conflict is, so the person is asked which holds. Nothing is settled here."""
        assert self.graph is not None
        linked = 0
        for new, older in await self.graph.attach(person, handled):
            first, second = await self.store.get_memory(new), await self.store.get_memory(older)
            now = self.clock()
            if first is None or second is None or not first.is_live(now) or not second.is_live(now):
                continue
            if older in first.conflicts_with:
                continue
            linked += await self._link_pair(new, older)
        return linked


def _add_link(record: MemoryRecord, other: str, now: datetime) -> MemoryRecord | None:
    if not record.is_live(now):
        return None
    if other in record.conflicts_with:
        return record
    return replace(record, conflicts_with=(*record.conflicts_with, other), updated_at=now)
