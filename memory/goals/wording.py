"""How goals read: the ``/goals`` list, the prompt's goals part, and a goal's due date beside it. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from ground.tunables import GOALS_DONE_LISTED, GOALS_IN_PROMPT
from memory.goals.records import Goal, GoalStatus
from persona.labels import GOALS_NOTICE


def due_label(goal: Goal, today: date) -> str:
    if goal.due is None:
        return ""
    return f" (due {goal.due.isoformat()}{', overdue' if goal.due < today else ''})"


def render_list(items: Sequence[Goal], today: date) -> str:
    """The /goals answer: active, then paused, then the last few done, each with its number."""
    if not items:
        return "No goals yet. Add one with /goals add <text> [due YYYY-MM-DD]."
    lines: list[str] = []
    sections = ((GoalStatus.ACTIVE, "Active"), (GoalStatus.PAUSED, "Paused"), (GoalStatus.DONE, "Done"))
    for status, title in sections:
        group = [g for g in items if g.status is status]
        if status is GoalStatus.DONE:
            group = sorted(group, key=lambda g: g.updated_at, reverse=True)[:GOALS_DONE_LISTED]
        if group:
            lines.append(f"{title}:")
            lines.extend(f"#{g.number} {g.text}{due_label(g, today) if status is GoalStatus.ACTIVE else ''}"
                         for g in group)
    return "\n".join(lines)


def render_slot(active: Sequence[Goal], today: date, limit_chars: int) -> str:
    """The prompt's goals part: active goals only, in their order, within ``limit_chars``."""
    shown = [g for g in active if g.status is GoalStatus.ACTIVE][:GOALS_IN_PROMPT]
    if not shown:
        return ""
    lines = [GOALS_NOTICE]
    used = len(GOALS_NOTICE)
    for g in shown:
        line = f"- {g.text}{due_label(g, today)}"
        if used + 1 + len(line) > limit_chars:
            break
        lines.append(line)
        used += 1 + len(line)
    return "\n".join(lines) if len(lines) > 1 else ""
