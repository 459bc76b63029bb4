"""Who may touch a memory: only the person, in their own turn, and only what is theirs.

Every control takes a :class:`Requester`. A request that is not the person's own turn (a heartbeat, kith
itself) or that names another person's memory, question or forget plan is refused with :class:`Refused` and
changes nothing.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class RefusalReason(enum.StrEnum):
    NOT_A_PERSON = "not_a_person"  # not the person's own turn: a heartbeat, a scheduled job
    NOT_YOURS = "not_yours"  # another person's memory, question or plan
    NOT_FOUND = "not_found"
    EMPTY = "empty"  # nothing to act on was given
    TOO_LONG = "too_long"
    PIN_LIMIT = "pin_limit"
    NOTHING_PENDING = "nothing_pending"  # no forget plan to confirm (never shown, cancelled or expired)
    ALREADY_ANSWERED = "already_answered"
    STALE = "stale"  # the question's facts changed before the answer
    BLOCKED = "blocked"  # a tombstone refused /remember (cannot happen for a fresh message)
    INSTRUCTION = "instruction"  # /remember or /label of an instruction to the model or a claim of authority over it
    UNREVIEWED = "unreviewed"  # a /label of a staged note the nightly review has not looked at yet


class Refused(Exception):
    def __init__(self, reason: RefusalReason, subject: str = "") -> None:
        super().__init__(f"{reason.value} {subject}".strip())
        self.reason = reason
        self.subject = subject


@dataclass(frozen=True, slots=True)
class Requester:
    """Who asks. ``own_turn`` is false for anything that is not the person speaking for themselves."""

    person: str | None
    account: str
    own_turn: bool = True

    @classmethod
    def heartbeat(cls) -> Requester:
        return cls(None, "kith:heartbeat", own_turn=False)


def refusal_for(requester: Requester, owner: str) -> RefusalReason | None:
    """Pure rule: only the person, in their own turn, may touch what is theirs."""
    if not requester.own_turn or requester.person is None:
        return RefusalReason.NOT_A_PERSON
    if requester.person != owner:
        return RefusalReason.NOT_YOURS
    return None


def person_asking(requester: Requester) -> str:
    """The person who asks, in their own turn; anything else is refused."""
    if not requester.own_turn or requester.person is None:
        raise Refused(RefusalReason.NOT_A_PERSON)
    return requester.person


def check_owner(requester: Requester, owner: str, subject: str = "") -> None:
    """Refused unless ``owner`` is the person asking, in their own turn."""
    reason = refusal_for(requester, owner)
    if reason is not None:
        raise Refused(reason, subject)


__all__ = ["RefusalReason", "Refused", "Requester", "check_owner", "person_asking", "refusal_for"]
