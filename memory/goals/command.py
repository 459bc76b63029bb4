"""``/goals``: list, add, finish, pause and resume one's goals from the chat.

Goals are private: in a group chat ``/goals`` answers with a pointer to the private chat instead of the list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime

from sqlalchemy.engine import Connection

from ground.tunables import GOAL_MAX_CHARS, GOALS_MAX_OPEN
from ground.types import ChatKind, InboundMessage, OutboundMessage, reply_to
from memory.goals.book import GoalBook
from memory.goals.records import GoalStatus
from memory.goals.wording import due_label, render_list
from people import directory


@dataclass(frozen=True, slots=True)
class GoalRequest:
    action: str  # "list", "add", "done", "pause", "resume"
    text: str = ""
    due: date | None = None
    number: int | None = None
    error: str = ""  # set when the request cannot be understood; the reply says why


USAGE = ("Usage: /goals (list) · /goals add <text> [due YYYY-MM-DD] · /goals done N · /goals pause N · "
         "/goals resume N")
_DUE = re.compile(r"^(?P<text>.*?)\s+due\s+(?P<due>\d{4}-\d{2}-\d{2})\s*$", re.I | re.S)
_STATUS_ACTIONS = {"done": GoalStatus.DONE, "pause": GoalStatus.PAUSED, "resume": GoalStatus.ACTIVE}


def parse_goal_args(args: str) -> GoalRequest:
    head, _, rest = args.strip().partition(" ")
    action = head.lower()
    rest = rest.strip()
    if action in ("", "list"):
        return GoalRequest("list")
    if action == "add":
        text, due = rest, None
        m = _DUE.match(rest)
        if m is not None:
            text = m.group("text").strip()
            try:
                due = date.fromisoformat(m.group("due"))
            except ValueError:
                return GoalRequest("add", error=f"{m.group('due')} is not a date (YYYY-MM-DD).")
        text = " ".join(text.split())
        if not text:
            return GoalRequest("add", error="What is the goal? " + USAGE)
        if len(text) > GOAL_MAX_CHARS:
            return GoalRequest("add", error=f"Please keep a goal under {GOAL_MAX_CHARS} characters.")
        return GoalRequest("add", text=text, due=due)
    if action in _STATUS_ACTIONS:
        number = rest.lstrip("#")
        if not number.isdigit():
            return GoalRequest(action, error=f"Which goal? Give its number, e.g. /goals {action} 2.")
        return GoalRequest(action, number=int(number))
    return GoalRequest(action, error=USAGE)



class GoalsCommand:
    """``/goals``: a handler with the ChatCommands signature ``(message, args) -> OutboundMessage | None``."""

    description = "your goals: list, add, done, pause, resume"

    def __init__(self, book: GoalBook) -> None:
        self.book = book

    async def __call__(self, message: InboundMessage, args: str) -> OutboundMessage | None:
        if message.chat_kind is ChatKind.GROUP:
            return reply_to(message, "Goals are private: send me /goals in a direct message.")
        request = parse_goal_args(args)
        if request.error:
            return reply_to(message, request.error)
        person = await self.book.db.run(_person, message.account, message.sender_name, self.book.clock())
        if request.action == "add":
            goal = await self.book.add(person, request.text, request.due)
            if goal is None:
                return reply_to(message, f"You have {GOALS_MAX_OPEN} open goals already; finish or pause one first.")
            return reply_to(message, f"Added goal #{goal.number}: {goal.text}{due_label(goal, self.book.today())}")
        if request.action in _STATUS_ACTIONS and request.number is not None:
            status = _STATUS_ACTIONS[request.action]
            changed = await self.book.set_status(person, request.number, status)
            if changed is None:
                return reply_to(message, f"You have no goal #{request.number}. /goals lists them.")
            verb = {GoalStatus.DONE: "Done", GoalStatus.PAUSED: "Paused", GoalStatus.ACTIVE: "Resumed"}[status]
            return reply_to(message, f"{verb}: #{changed.number} {changed.text}")
        return reply_to(message, render_list(await self.book.list(person), self.book.today()))


def _person(conn: Connection, account: str, name: str, now: datetime) -> str:
    # A first-time sender may open with /goals, before the conversation ever resolved them.
    return directory.person_of(conn, account) or directory.resolve(conn, account, name, now)


