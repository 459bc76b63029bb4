"""The memory façade the rest of kith calls: one object built at start-up, closed at shutdown.

It owns the embedder (probed once per start; its status is visible), the Chroma store, the
merge/conflict gate, the after-reply capture observer, the tombstones and forgetting. Memory
belongs to a person id, not an account: :meth:`MemoryService.reassign` moves it when accounts
are linked later.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ground.config import Settings
from ground.db import Database
from ground.person_data import PersonData, move_person
from ground.tunables import SEARCH_POOL_FACTOR
from ground.types import utcnow
from llm.client import LLMClient
from memory.capture.job import Capture, PausedHook
from memory.capture.merge_gate import MemoryGate, PromoteReport
from memory.core.records import MemoryRecord, Status
from memory.core.wording import person_facing
from memory.core.words import words_of
from memory.encoders.embedders import Embedder, EmbedderStatus, open_embedder
from memory.encoders.entailment import optional_entailment
from memory.forgetting.forgetter import Forgetter
from memory.forgetting.journal import JOURNAL_DIR
from memory.forgetting.plan import ForgetPlan, ForgetResult
from memory.forgetting.recent_forgets import RecentForgets
from memory.forgetting.scrub import checkpoint, reassign_saved_exports
from memory.forgetting.tombstones import TOMBSTONES_DATA, TombstoneBook
from memory.graph.book import GraphBook
from memory.recall.engine import visible
from memory.recall.ranking import lookup_matches, memory_matches, rank
from memory.store.changes import CHANGES_DATA, ChangeLog
from memory.store.memory_store import MemoryStore
from memory.store.memory_tables import memory_records
from memory.store.notes import Note

log = logging.getLogger("kith.memory")



@dataclass(frozen=True, slots=True)
class SearchHit:
    record: MemoryRecord
    score: float  # recall's score (:func:`memory.recall.ranking.score`)
    cosine: float | None  # the embedder's, when this memory was among its nearest
    bm25: float  # normalised to the best lexical hit (0..1)


@dataclass(frozen=True, slots=True)
class SearchResult:
    hits: list[SearchHit]
    lexical_only: bool  # no embedder cosine took part (and ``reason`` says why)
    reason: str = ""


def record_json(record: MemoryRecord) -> dict[str, Any]:
    """A memory as plain JSON, every field, for export and the operator commands: the person's words first
    (:func:`memory.core.words_of`), then kith's label for them (``text``)."""

    def when(value: datetime | None) -> str | None:
        return value.isoformat() if value is not None else None

    return {
        "id": record.id,
        "person": record.person,
        "words": list(words_of(record).sentences),
        "text": record.text,
        "kind": record.kind.value,
        "evidence": list(record.evidence),
        "evidence_sentences": list(record.evidence_sentences),
        "sources": [
            {
                "platform": s.platform,
                "chat_id": s.chat_id,
                "message_id": s.message_id,
                "timestamp": s.timestamp.isoformat(),
                "voice": s.medium == "voice",
            }
            for s in record.sources
        ],
        "scope": record.scope.value,
        "origin": record.origin.value,
        "tier": record.tier.value,
        "importance": record.importance,
        "pinned": record.pinned,
        "status": record.status.value,
        "revision": record.revision,
        "conflicts_with": list(record.conflicts_with),
        "expires_at": when(record.expires_at),
        "valid_to": when(record.valid_to),
        "created_at": when(record.created_at),
        "updated_at": when(record.updated_at),
        "use_count": record.use_count,
        "last_used_at": when(record.last_used_at),
    }


def note_json(note: Note) -> dict[str, Any]:
    return record_json(note.record) | {
        "horizon": note.horizon.value if note.horizon else None,
        "corrects": note.corrects,
        "conversation": note.conversation,
        "promoted_to": note.promoted_to,
        "promoted_at": note.promoted_at.isoformat() if note.promoted_at else None,
    }


def _worded(entry: dict[str, Any], *, you: bool, name: str) -> dict[str, Any]:
    """``entry`` with its text as the reader of an export would say it: ``you`` for the person themselves ("You
    live in Berlin"), else ``name`` (or "this person"). The stored form keeps the extractor's placeholder, which
    is no one's word for anybody and is not data about the person: an export never shows it."""
    return entry | {"text": person_facing(entry["text"], you=you, name=name)}


class MemoryService:
    def __init__(
        self,
        *,
        settings: Settings,
        db: Database,
        store: MemoryStore,
        book: TombstoneBook,
        gate: MemoryGate,
        capture: Capture,
        forgetter: Forgetter,
        clock: Callable[[], datetime],
        graph: GraphBook,
    ) -> None:
        self.settings = settings
        self.db = db
        self.store = store
        self.book = book
        self.gate = gate
        self.capture = capture
        self.forgetter = forgetter
        self.clock = clock
        self.graph = graph

    @classmethod
    async def open(
        cls,
        settings: Settings,
        db: Database,
        llm: LLMClient,
        *,
        clock: Callable[[], datetime] = utcnow,
        is_paused: PausedHook | None = None,
        embedder: Embedder | None = None,
        status: EmbedderStatus | None = None,
        namespace: str = "",
        announce: bool = True,
    ) -> MemoryService:
        """Probe the embedder, open Chroma, wire the parts.

        ``embedder`` and ``status`` replace the probe (tests; commands that need no vectors pass a
        not-ready status and ``announce=False``). ``announce`` logs the embedder's status line.
        """
        if status is None:
            embedder, status = await open_embedder(settings)
        if announce:
            if status.ready or status.disabled:
                log.info("%s", status.line())
            else:
                log.warning("%s", status.line())
        store = await MemoryStore.open(
            settings.memory, settings.storage.data_path(), embedder, status, namespace=namespace,
            changes=ChangeLog(db), database=db,
        )
        book = TombstoneBook(db)
        graph = GraphBook(db, clock)
        gate = MemoryGate(store, book, settings.memory, clock, graph=graph)
        ms = settings.memory
        # Loading a model takes seconds: off the event loop, and only when one is configured.
        entails = (await asyncio.to_thread(optional_entailment, ms.entailment_model, ms.entailment_threshold)
                   if ms.entailment_model else None)
        forgetter = Forgetter(store, book, clock, db=db, saved_exports=settings.storage.exports_path(),
                              recent=RecentForgets(), journal=settings.storage.data_path() / JOURNAL_DIR)
        capture = Capture(db, store, book, llm, settings, clock, is_paused=is_paused, entails=entails,
                          forgetter=forgetter, graph=graph)
        # A forget the last process was killed in the middle of is finished before anything is served; and the
        # log is emptied, in case it was killed after the forget's last commit but before its checkpoint.
        await forgetter.resume()
        await db.run(checkpoint)
        return cls(
            settings=settings,
            db=db,
            store=store,
            book=book,
            gate=gate,
            capture=capture,
            forgetter=forgetter,
            clock=clock,
            graph=graph,
        )

    @property
    def status(self) -> EmbedderStatus:
        """The embedder's state now (it degrades to unavailable if re-embedding failed at open)."""
        return self.store.vector_source.status

    @property
    def observer(self) -> Capture:
        """The after-reply capture, to append to ``ConversationCore.observers``."""
        return self.capture

    async def close(self) -> None:
        await self.store.close()

    # --- reading ------------------------------------------------------------------------
    async def get(self, memory_id: str) -> MemoryRecord | None:
        return await self.store.get_memory(memory_id)

    async def list_memories(self, person: str, *, include_inactive: bool = False) -> list[MemoryRecord]:
        return await self.store.memories_of(person, statuses=None if include_inactive else (Status.ACTIVE,))

    async def active_memories(self, person: str) -> list[MemoryRecord]:
        """The person's active memories, served from memory where the store keeps them current."""
        return await self.store.active_of(person)

    async def list_notes(self, person: str) -> list[Note]:
        return await self.store.notes_of(person)

    async def search(self, person: str, query: str, limit: int | None = None) -> SearchResult:
        """The person's live memories for ``query``, ranked as recall ranks them (:mod:`memory.recall.ranking`):
        embedder cosine blended with BM25, or BM25 alone, times recency, importance and use.

        Without a working embedder the result says so (``lexical_only`` and ``reason``) instead of
        coming back quietly empty.
        """
        rs = self.settings.recall
        limit = limit or rs.tool_max_items
        pool = limit * SEARCH_POOL_FACTOR
        now = self.clock()
        vectors = await self.store.vectors([query])
        hits, lexical = await self.store.lookup(
            person, vectors=vectors if vectors.from_embedder else None, query=query, k=pool
        )
        found = lookup_matches(hits, lexical, lambda r: visible(r, person, now, shared_only=False))
        lexical_only = not found.cosines
        ranked = rank(memory_matches(found, vector_path=not lexical_only), now, rs, vector_path=not lexical_only)
        shown = [
            SearchHit(r.record, r.score, max(0.0, found.cosines[r.record.id]) if r.record.id in found.cosines
                      else None, r.match.bm25)
            for r in ranked[:limit]
        ]
        reason = ""
        if lexical_only:
            status = self.status
            reason = (
                status.line()
                if not status.ready
                else "the embedder failed for this query"
                if not vectors.from_embedder
                else "no stored memory has an embedder vector yet"
            )
        return SearchResult(shown, lexical_only, reason)

    # --- curating -----------------------------------------------------------------------
    async def promote(self, person: str) -> PromoteReport:
        return await self.gate.promote(person)

    async def clear_conflict(self, a: str, b: str) -> bool:
        return await self.gate.clear_conflict(a, b)

    async def prune_notes(self, now: datetime | None = None) -> int:
        """Drop staged notes older than ``memory.notes_retention_days`` (curated memory is untouched)."""
        cutoff = (now or self.clock()) - timedelta(days=self.settings.memory.notes_retention_days)
        removed = await self.store.delete_notes(await self.store.notes_older_than(cutoff))
        log.info("notes pruned count=%d", removed)
        return removed

    # --- forgetting ---------------------------------------------------------------------
    async def plan_forget(self, person: str, query: str) -> ForgetPlan:
        return await self.forgetter.plan(person, query)

    async def apply_forget(self, plan: ForgetPlan) -> ForgetResult:
        return await self.forgetter.apply(plan)

    # --- people -------------------------------------------------------------------------
    def person_data(self) -> tuple[PersonData, ...]:
        """What memory keeps about a person (:mod:`ground.person_data`), in the export's order."""
        forgotten_by = "memory.forgetting.Forgetter.apply"
        return (
            # Kept in Chroma, or in the memory tables of this database (``[memory] store``): one table holds both
            # memories and staged notes, named here once, and the store moves both (``reassign``).
            PersonData("memories", tables=(memory_records,), reassign=self._reassign_memories,
                       export_kept=self.export_memories, forgotten_by=forgotten_by),
            PersonData("notes", reassign=self.store.reassign_notes, export_kept=self.export_notes,
                       forgotten_by=forgotten_by),
            TOMBSTONES_DATA,
            # Their saved export files follow too, or a forget by the person they became would pass them by.
            PersonData("saved_exports", reassign=self._reassign_saved_exports,
                       left_out="copies of earlier exports, kept as files the person was given",
                       forgotten_by="memory.forgetting.scrub.scrub_saved_exports"),
            CHANGES_DATA,
            self.graph.person_data(),
        )

    async def _reassign_memories(self, old: str, new: str) -> int:
        return await self.store.reassign_memories(old, new, self.clock())

    async def _reassign_saved_exports(self, old: str, new: str) -> int:
        return await asyncio.to_thread(reassign_saved_exports, self.forgetter.saved_exports, old, new)

    async def reassign(self, old_person: str, new_person: str) -> dict[str, int]:
        """Memory follows the person: move everything of ``old_person`` to ``new_person``; how many of each
        kind (:meth:`person_data`) moved, by name."""
        if old_person == new_person:
            return {entry.name: 0 for entry in self.person_data() if entry.moves}
        return await move_person(self.db, self.person_data(), old_person, new_person)

    async def export_memories(self, person: str, *, you: bool = False, name: str = "") -> list[dict[str, Any]]:
        """Every memory of ``person``, every status, as JSON worded for the reader (:func:`_worded`)."""
        memories = await self.list_memories(person, include_inactive=True)
        return [_worded(record_json(m), you=you, name=name) for m in memories]

    async def export_notes(self, person: str, *, you: bool = False, name: str = "") -> list[dict[str, Any]]:
        """Every staged note of ``person``, as JSON worded for the reader (:func:`_worded`)."""
        return [_worded(note_json(n), you=you, name=name) for n in await self.list_notes(person)]

    async def export(self, person: str, *, you: bool = False, name: str = "") -> dict[str, Any]:
        """Everything stored about ``person``: memories (every status) and staged notes, worded for the reader
        (:func:`_worded`), and how many tombstones."""
        return {
            "person": person,
            "exported_at": self.clock().isoformat(),
            "memories": await self.export_memories(person, you=you, name=name),
            "notes": await self.export_notes(person, you=you, name=name),
            "tombstones": await self.book.count(person),
        }
