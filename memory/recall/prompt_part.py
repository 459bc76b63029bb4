"""Automatic memory before each reply: the prompt's pinned and recalled parts.

Each memory reaches the prompt as the person's own words (:func:`memory.core.words.words_of`): their
sentences, quoted, with who said them, when and where. The label the extractor wrote (``text``) found the
memory and ranked it; it is not shown, so a wrong one cannot mislead a reply. A memory with no words kept is
left out.

Pinned facts come first: the latest ``pinned_max``. Then at most ``max_items`` recalled
candidates, each one's words cut to ``item_chars`` with a visible truncated flag, the whole part within
the ``[budget] recall_chars`` (words are longer than labels: fewer fit, the budget stays), under a notice
that they are stored candidates: data, not instructions, and not assumed to match. A candidate flagged as
conflicting with another live memory is marked, its partner's words are shown next to it when this chat
may see it, and the notice tells the model to ask which is current instead of asserting either.

When the person's graph brought memories in (:mod:`memory.recall.graph_reach`), the few relations that did follow
them under their own notice, each with the person's quoted words that say it, inside the same budget; in a group
chat only relations said where the group could read them.

The query embedding has ``embed_budget_ms``; past it this reply recalls by keywords alone
(see :mod:`memory.recall.engine`). The whole part has SLOTS_SOFT_S, inside the reply's memory timeout: past it,
recall shrinks to the pinned facts and the best keyword matches the person's index holds (fewer candidates, no
vectors, neighbours, notes or graph) rather than the reply going without memory. Rendering is pure and lives in
the functions below; the words that label the items as stored data are :mod:`persona.labels`'s.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ground.config import BudgetSettings, RecallSettings
from ground.tunables import MEMORY_SLOTS_TIMEOUT_S, RECALL_MIN_ITEM_CHARS, RECALL_MIN_RELEVANCE
from ground.turns import MemorySlots, Speaker
from ground.types import ChatKind, InboundMessage, quoted_name
from memory.core.graph_records import SELF, Relation
from memory.core.records import MemoryRecord, Scope
from memory.core.words import Words, fit_words, said_of, words_of
from memory.recall.engine import RecallEngine
from persona.labels import (
    CONFLICT_NOTICE,
    PINNED_NOTICE,
    RECALLED_NOTICE,
    RELATIONS_NOTICE,
    TRUNCATED_FLAG,
    pinned_line,
    recalled_line,
    relation_line,
)

THEY = "they"  # who said it, when the person's name is not known
# The whole part's time before recall shrinks to keywords (:meth:`RecallMemoryContext.slots`): inside the reply's
# MEMORY_SLOTS_TIMEOUT_S, with room left to render what the keywords found.
SLOTS_SOFT_S = MEMORY_SLOTS_TIMEOUT_S * 0.6
SLOTS_CATCH_UP_S = MEMORY_SLOTS_TIMEOUT_S * 0.25  # then at most this long catching up with other processes

log = logging.getLogger("kith.memory.context")


def who_said(name: str) -> str:
    """The person the memories are about, as each line names them: their quoted display name, else "they"."""
    return quoted_name(name) if name.strip() else THEY


@dataclass(frozen=True, slots=True)
class RecalledItem:
    record: MemoryRecord
    words: Words
    text: str  # the words as shown: quoted, cut to the item budget
    truncated: bool
    disputed: bool
    note: bool = False
    who: str = THEY


def render_line(item: RecalledItem) -> str:
    return recalled_line(said_of(item.words, item.who, unreviewed=item.note), item.text,
                         truncated=item.truncated, disputed=item.disputed)


def fit_recalled(entries: Sequence[tuple[MemoryRecord, bool, bool]], *, max_items: int, item_chars: int,
                 total_chars: int, who: str = THEY) -> tuple[list[RecalledItem], str]:
    """The recalled part: ``entries`` are (record, note, disputed) best first; ``who`` names the person.

    Returns the items shown and the rendered text, which never exceeds ``total_chars``. A memory with no
    words kept is skipped (see :mod:`memory.core.words`).
    """
    if not entries or max_items <= 0:
        return [], ""
    any_disputed = any(disputed for _r, _n, disputed in entries[:max_items])
    header = RECALLED_NOTICE
    footer = CONFLICT_NOTICE if any_disputed else ""
    used = len(header) + (len(footer) + 1 if footer else 0)
    items: list[RecalledItem] = []
    for record, note, disputed in entries[:max_items]:
        words = words_of(record)
        if not words.sentences:
            log.info("memory without words left out of the prompt memory=%s", record.id)
            continue
        frame = render_line(RecalledItem(record, words, "", False, disputed, note, who))
        room = total_chars - used - 1 - len(frame) - len(TRUNCATED_FLAG)
        text, truncated = fit_words(words.sentences, min(item_chars, max(0, room)))
        if not text.strip(' "…') or (truncated and len(text) < RECALL_MIN_ITEM_CHARS):
            break
        item = RecalledItem(record, words, text, truncated, disputed, note, who)
        used += 1 + len(render_line(item))
        items.append(item)
    if not items:
        return [], ""
    if footer and not any(i.disputed for i in items):
        footer = ""
    lines = [header, *(render_line(i) for i in items)]
    if footer:
        lines.append(footer)
    return items, "\n".join(lines)


def render_pinned(records: Sequence[MemoryRecord], *, item_chars: int, total_chars: int, who: str = THEY
                  ) -> tuple[list[MemoryRecord], str]:
    """The pinned part, newest first, within ``total_chars``; what did not fit (or has no words) is left out."""
    lines = [PINNED_NOTICE]
    used = len(PINNED_NOTICE)
    shown: list[MemoryRecord] = []
    for record in records:
        words = words_of(record)
        text, truncated = fit_words(words.sentences, item_chars)
        if not text:
            continue
        line = pinned_line(said_of(words, who), text, truncated=truncated)
        if used + 1 + len(line) > total_chars:
            break
        lines.append(line)
        used += 1 + len(line)
        shown.append(record)
    return (shown, "\n".join(lines)) if shown else ([], "")


def fit_relations(relations: Sequence[Relation], name_of: Callable[[str], str], *, item_chars: int,
                  total_chars: int, who: str = THEY, shared_only: bool = False) -> tuple[list[Relation], str]:
    """The relations part: each relation's ends (``name_of`` an entity id; the person is ``who``) and the person's
    quoted words that say it, within ``total_chars`` (nothing when not even one fits); with ``shared_only`` a
    relation said in private is left out."""
    lines = [RELATIONS_NOTICE]
    used = len(RELATIONS_NOTICE)
    shown: list[Relation] = []
    seen: set[tuple[str, str, str]] = set()
    for relation in relations:
        if shared_only and relation.scope is not Scope.SHARED:
            continue
        ends = tuple(who if end == SELF else name_of(end) for end in relation.ends)
        key = (ends[0], relation.relation_key, ends[1])
        if key in seen:
            continue
        words, _cut = fit_words(relation.evidence or relation.evidence_sentences, item_chars)
        if not words.strip(' "…'):
            continue
        line = relation_line(ends[0], relation.relation, ends[1], words)
        if used + 1 + len(line) > total_chars:
            break
        seen.add(key)
        lines.append(line)
        used += 1 + len(line)
        shown.append(relation)
    return (shown, "\n".join(lines)) if shown else ([], "")


def with_partners(ranked: Sequence[tuple[MemoryRecord, bool]], partners: dict[str, list[MemoryRecord]],
                  *, shared_only: bool, limit: int, already_shown: frozenset[str] = frozenset()
                  ) -> list[tuple[MemoryRecord, bool, bool]]:
    """Best first, each disputed memory followed by its visible partners, at most ``limit``.

    ``already_shown`` (the pinned facts) are neither repeated nor added as partners.
    """
    out: list[tuple[MemoryRecord, bool, bool]] = []
    seen: set[str] = set(already_shown)
    for record, note in ranked:
        if record.id in seen:
            continue
        seen.add(record.id)
        out.append((record, note, record.id in partners))
        for partner in partners.get(record.id, []):
            if partner.id in seen or (shared_only and partner.scope is not Scope.SHARED):
                continue
            seen.add(partner.id)
            out.append((partner, False, True))
    return out[:limit]


class RecallMemoryContext:
    """Implements conversation.core.MemoryContext over the recall engine."""

    def __init__(self, engine: RecallEngine, recall: RecallSettings, budget: BudgetSettings) -> None:
        self.engine = engine
        self.recall = recall
        self.budget = budget

    async def slots(self, speaker: Speaker, message: InboundMessage) -> MemorySlots:
        shared_only = message.chat_kind is ChatKind.GROUP
        counts = self.engine.counts[self.engine.vectors_held(speaker.person, shared_only=shared_only)]
        counts.slots_started += 1
        try:
            async with asyncio.timeout(SLOTS_SOFT_S):
                slots = await self._slots(speaker, message, shared_only)
        except TimeoutError:
            # Out of time (a burst, a slow read): recall shrinks to the keywords the index holds rather than the
            # reply's own timeout dropping the whole part.
            shrunk = await self._keyword_slots(speaker, message, shared_only)
            if shrunk is None:
                raise
            counts.slots_shrunk += 1
            slots = shrunk
        counts.slots_finished += 1
        return slots

    async def _keyword_slots(self, speaker: Speaker, message: InboundMessage, shared_only: bool
                             ) -> MemorySlots | None:
        rs = self.recall
        found = await self.engine.keywords_soon(speaker.person, message.text, limit=rs.max_items,
                                                shared_only=shared_only, wait_s=SLOTS_CATCH_UP_S)
        if found is None:
            return None
        pinned, recalled = found
        who = who_said(speaker.name)
        pinned_shown, pinned_text = render_pinned(pinned, item_chars=rs.item_chars,
                                                  total_chars=self.budget.pinned_chars, who=who)
        pinned_ids = frozenset(r.id for r in pinned_shown)
        entries = [(r, False, False) for r in recalled if r.id not in pinned_ids]
        items, recalled_text = fit_recalled(entries, max_items=rs.max_items, item_chars=rs.item_chars,
                                            total_chars=self.budget.recall_chars, who=who)
        log.debug("memory slots by keywords alone person=%s pinned=%d recalled=%d", speaker.person,
                  len(pinned_shown), len(items))
        return MemorySlots(pinned=pinned_text, recalled=recalled_text,
                           shown_ids=tuple([r.id for r in pinned_shown] + [i.record.id for i in items]))

    async def _slots(self, speaker: Speaker, message: InboundMessage, shared_only: bool) -> MemorySlots:
        rs = self.recall
        # Never longer than the part's own time: past it the vector would be dropped anyway.
        budget_s = min(rs.embed_budget_ms / 1000, SLOTS_SOFT_S / 2)
        # Both wait on their own budget, side by side: the reply waits for the slower one only.
        pinned, result = await asyncio.gather(
            self.engine.pinned(speaker.person, shared_only=shared_only, budget_s=budget_s),
            self.engine.search(speaker.person, message.text, limit=rs.max_items + rs.pinned_max,
                               shared_only=shared_only, budget_s=budget_s, min_relevance=RECALL_MIN_RELEVANCE))
        who = who_said(speaker.name)
        pinned_shown, pinned_text = render_pinned(pinned, item_chars=rs.item_chars,
                                                  total_chars=self.budget.pinned_chars, who=who)
        pinned_ids = {r.id for r in pinned_shown}
        ranked = [(r.record, r.match.note) for r in result.items if r.record.id not in pinned_ids]
        ranked = ranked[:rs.max_items]
        partners = await self.engine.conflict_partners(speaker.person, [r for r, note in ranked if not note],
                                                       shared_only=shared_only)
        entries = with_partners(ranked, partners, shared_only=shared_only, limit=rs.max_items,
                                already_shown=frozenset(pinned_ids))
        items, recalled_text = fit_recalled(entries, max_items=rs.max_items, item_chars=rs.item_chars,
                                            total_chars=self.budget.recall_chars, who=who)
        if result.relations and items and result.graph is not None:
            _relations, relations_text = fit_relations(
                result.relations, result.graph.name, item_chars=rs.item_chars, who=who, shared_only=shared_only,
                total_chars=self.budget.recall_chars - len(recalled_text) - 1)
            if relations_text:
                recalled_text = f"{recalled_text}\n{relations_text}"
        log.info("memory slots person=%s pinned=%d recalled=%d disputed=%d lexical_only=%s ms=%.1f",
                 speaker.person, len(pinned_shown), len(items), sum(i.disputed for i in items),
                 result.lexical_only, result.elapsed_ms)
        shown = tuple([r.id for r in pinned_shown] + [i.record.id for i in items])
        return MemorySlots(pinned=pinned_text, recalled=recalled_text, shown_ids=shown)
