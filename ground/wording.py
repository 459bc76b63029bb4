"""Small rules for the words kith shows people and operators."""

from __future__ import annotations


def counted(n: int, one: str, many: str) -> str:
    """``n`` with the noun that agrees with it: "1 memory", "0 memories", "2 memories"."""
    return f"{n} {one if n == 1 else many}"


def unreadable_reply(what: str) -> str:
    """The honest answer to a message with nothing kith can read; ``what`` names it ("voice message", "photo").

    Said instead of an answer, so the person knows kith did not see it rather than that kith ignores them.
    """
    return f"I can only read text so far, so that {what} didn't reach me. Could you put it in words?"
