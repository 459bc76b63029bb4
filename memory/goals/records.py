"""A goal as the rest of the room handles it: a tracked desired outcome with a status and the person's number."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import date, datetime


class GoalStatus(enum.StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    DONE = "done"


@dataclass(frozen=True, slots=True)
class Goal:
    id: int
    person: str
    number: int
    text: str
    status: GoalStatus
    due: date | None
    updated_at: datetime
