"""Goals: what a person wants to reach, tracked with a status, their own number and an optional due date.

A goal is a direction, not a fact, so it is no memory; it sits beside capture and recall, above forgetting
(a forget removes the goals that hold its words).

* ``records``: :class:`Goal` and :class:`GoalStatus`.
* ``book``: the ``goals`` table, its row functions, and :class:`GoalBook`, each person's goals cached for replies.
* ``wording``: how goals read in the ``/goals`` list and in the prompt.
* ``command``: the ``/goals`` chat command.
* ``prompt_part``: :class:`GoalsInContext`, the prompt's goals part in a private chat.
"""

from memory.goals.book import (
    GOALS_DATA,
    GOALS_TOPIC,
    GoalBook,
    add,
    due_by,
    export_of,
    goals,
    of_person,
    reassign,
    set_status,
)
from memory.goals.command import GoalsCommand
from memory.goals.prompt_part import GoalsInContext
from memory.goals.records import Goal, GoalStatus

__all__ = [
    "GOALS_DATA",
    "GOALS_TOPIC",
    "Goal",
    "GoalBook",
    "GoalStatus",
    "GoalsCommand",
    "GoalsInContext",
    "add",
    "due_by",
    "export_of",
    "goals",
    "of_person",
    "reassign",
    "set_status",
]
