"""The bounded prompt: every part has its own character budget, all visible here.

The prompt a turn sends is the persona card, then the memory slots (pinned facts, recalled
candidates, active goals), then the rolling summary of the thread's older part, then the
recent window, then the new message. Each part is clipped to its budget from
``BudgetSettings``, so a thread of 10,000 messages costs what a thread of 500 does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ground.config import BudgetSettings
from ground.turns import MemorySlots
from persona.labels import MEMORY_NOTICE, TRUNCATED_MARK, summary_section


@dataclass(frozen=True, slots=True)
class HistoryTurn:
    role: str  # "user" or "assistant"
    text: str
    author: str = ""


@dataclass(frozen=True, slots=True)
class PromptParts:
    persona: str
    new_message: str
    memory: MemorySlots = field(default_factory=MemorySlots)
    summary: str = ""
    recent: Sequence[HistoryTurn] = ()
    speaker: str = ""  # display name of who is talking, for group chats


@dataclass(frozen=True, slots=True)
class BuiltPrompt:
    messages: list[dict[str, Any]]  # a content is text, or (a turn with photos) text and image parts
    sizes: dict[str, int]  # characters per part, for logs and tests

    @property
    def total_chars(self) -> int:
        return sum(len(m["content"]) for m in self.messages)


def clip(text: str, limit: int) -> str:
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(TRUNCATED_MARK))] + TRUNCATED_MARK


def clip_tail(text: str, limit: int) -> str:
    """Keep the end of ``text``: for the newest part of a long message."""
    if len(text) <= limit:
        return text
    return TRUNCATED_MARK + text[len(text) - max(0, limit - len(TRUNCATED_MARK)):]


def fit_recent(turns: Sequence[HistoryTurn], budget: BudgetSettings) -> list[HistoryTurn]:
    """The newest turns that fit the recent-window budget, each clipped to the per-item budget."""
    kept: list[HistoryTurn] = []
    used = 0
    for turn in reversed(turns):
        text = clip(turn.text, budget.message_item_chars)
        if used + len(text) > budget.recent_chars:
            break
        kept.append(HistoryTurn(turn.role, text, turn.author))
        used += len(text)
    kept.reverse()
    # A chat request must not open with an assistant turn after the system prompt on some providers.
    while kept and kept[0].role != "user":
        kept.pop(0)
    return kept


def build_prompt(parts: PromptParts, budget: BudgetSettings) -> BuiltPrompt:
    persona = clip(parts.persona, budget.persona_chars)
    sections = [persona]
    sizes = {"persona": len(persona)}
    data_sections: list[str] = []
    for name, text, limit in (
        ("pinned", parts.memory.pinned, budget.pinned_chars),
        ("recalled", parts.memory.recalled, budget.recall_chars),
        ("goals", parts.memory.goals, budget.goals_chars),
        ("documents", parts.memory.documents, budget.documents_chars),
        ("summary", parts.summary, budget.summary_chars),
    ):
        clipped = clip(text, limit)
        sizes[name] = len(clipped)
        if clipped:
            data_sections.append(clipped if name != "summary" else summary_section(clipped))
    if data_sections:
        sections.append(MEMORY_NOTICE)
        sections.extend(data_sections)
    messages: list[dict[str, str]] = [{"role": "system", "content": "\n\n".join(sections)}]
    recent = fit_recent(parts.recent, budget)
    sizes["recent"] = sum(len(t.text) for t in recent)
    for turn in recent:
        messages.append({"role": "user" if turn.role == "user" else "assistant", "content": turn.text})
    new = clip_tail(parts.new_message, budget.message_chars)
    sizes["message"] = len(new)
    messages.append({"role": "user", "content": new})
    return BuiltPrompt(messages, sizes)


def max_prompt_chars(budget: BudgetSettings) -> int:
    """The most characters build_prompt can produce, whatever it is given."""
    return (budget.persona_chars + budget.pinned_chars + budget.recall_chars + budget.goals_chars
            + budget.documents_chars + budget.summary_chars + budget.recent_chars + budget.message_chars
            + 5 * len("\n\n")
            + len(MEMORY_NOTICE) + 64)
