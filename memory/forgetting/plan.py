"""The forget plan: exactly what forgetting some words removes, shown to the person before they confirm it, and
what applying it did, counted.

A plan names the notes and memories that match, the conflict links that hang off them, the memories and notes
kept whose receipt sentences hold the words (they keep their fact and lose those sentences, see
:func:`memory.forgetting.scrub.kept_sentences`), and the rows elsewhere that hold them. It keeps each of those
records as it stood when planned (:attr:`ForgetPlan.previews`), so the person is shown their own words first and
kith's label second (:func:`memory.core.words_of`), never a label alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields

from ground.wording import counted
from memory.core.records import MemoryRecord
from memory.core.text import content_words, words_match
from memory.forgetting.scrub import Eraser, Places


@dataclass(frozen=True, slots=True)
class ForgetPlan:
    """Exactly what forgetting ``query`` for ``person`` removes, for a person to confirm first."""

    person: str
    query: str
    note_ids: tuple[str, ...]
    memory_ids: tuple[str, ...]
    # memory id -> ids it links to (conflicts_with) that the plan removes; those links go too
    unlink: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # id -> the record as it stood when planned: its words and label, shown to the person only (never journalled)
    previews: dict[str, MemoryRecord] = field(default_factory=dict)
    # The forgotten records' texts, quotes and sentences: with ``query``, what is redacted everywhere else.
    phrases: tuple[str, ...] = ()
    places: Places = field(default_factory=Places)  # rows elsewhere that hold matching text, when planned
    # Memories and notes kept whose receipt sentences hold matching text: those sentences go, the fact stays.
    receipt_ids: tuple[str, ...] = ()
    # The staged notes among the ones shown that the nightly review has not looked at yet (recall uses them).
    unreviewed: frozenset[str] = frozenset()

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
                         (places.goals, "goal", "goals"),
                         (places.graph, "graph entry", "graph entries"),
                         (places.documents, "document", "documents")):
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


__all__ = ["ForgetPlan", "ForgetResult", "describe_counts", "describe_places", "query_matches"]
