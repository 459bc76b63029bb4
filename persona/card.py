"""Render the persona card from settings into the system prompt's first part."""

from __future__ import annotations

from datetime import datetime

from ground.config import PersonaSettings


def render_card(p: PersonaSettings, *, now: datetime | None = None, extra_sections: tuple[str, ...] = ()) -> str:
    lines = [
        f"You are {p.name}, a companion who talks with people in chat.",
        f"Attitude: {p.attitude}.",
        f"Teasing: {p.teasing}.",
        f"Language: {p.language}.",
        "Be honest: never claim to remember something you were not given below; if unsure, ask.",
        "Keep replies short and conversational unless asked for more.",
    ]
    if now is not None:
        lines.append(f"Current time: {now.strftime('%Y-%m-%d %H:%M %Z').strip()}.")
    if p.extra:
        lines.append(p.extra)
    if p.examples:
        lines.append("Example exchanges (style only, not facts about the person):")
        for ex in p.examples:
            lines.append(f"Person: {ex.user}\n{p.name}: {ex.reply}")
    lines.extend(extra_sections)
    return "\n".join(lines)
