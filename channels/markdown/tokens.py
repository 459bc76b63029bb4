"""The token stream a dialect emits and the chunker cuts, and how tokens join into text.

Every token carries its dialect's markup and a markup-free twin, so one stream yields both a chunk and
the plain text sent when a platform rejects the formatting. Text stays raw until it is joined, so a cut
never lands inside an HTML entity or tag; and because the stream knows what is open, a cut can close it
and reopen it in the next chunk.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass


class BreakPriority(enum.IntEnum):
    """Where a chunk may end, best first: the chunker prefers the lowest value it can reach."""

    PARAGRAPH = 0  # between blocks separated by a blank line
    BLOCK = 1  # between adjacent blocks (list items, a heading and its paragraph)
    LINE = 2  # a line break inside a block, code blocks included
    WORD = 3  # a space inside text
    HARD = 4  # anywhere else that splits no character cluster


@dataclass(frozen=True, slots=True)
class Open:
    """Markup that opens something; the matching ``Close`` emits ``close`` (``plain_close`` in the twin)."""

    markup: str
    close: str
    plain: str = ""
    plain_close: str = ""


@dataclass(frozen=True, slots=True)
class Close:
    """Closes the innermost open ``Open``."""


@dataclass(frozen=True, slots=True)
class Text:
    """Raw text; ``escape`` turns any slice of it into platform markup (the plain twin is the raw slice)."""

    raw: str
    escape: Callable[[str], str]


@dataclass(frozen=True, slots=True)
class Sep:
    """A line break where a chunk may end; it is dropped when a chunk ends on it."""

    text: str
    priority: BreakPriority


@dataclass(frozen=True, slots=True)
class Atom:
    """Unsplittable markup such as a list bullet or a heading's ``## ``."""

    markup: str
    plain: str


Token = Open | Close | Text | Sep | Atom
CLOSE = Close()


@dataclass(frozen=True, slots=True)
class Joined:
    markup: str
    plain: str
    visible: bool  # whether the markup shows anything but whitespace


def join_tokens(tokens: Iterable[Token], carry: Sequence[Open] = ()) -> Joined:
    """Concatenate tokens, starting inside ``carry`` and closing whatever is still open at the end.

    An element opened and closed with nothing inside is dropped, so a cut right at the edge of a code
    block or a bold span leaves no empty ``<b></b>`` (an all-empty message is refused by platforms).
    """
    items: list[tuple[bool, str, str]] = []  # (is an opening, markup, plain)
    stack = list(carry)
    visible = False
    for opened in carry:
        items.append((True, opened.markup, opened.plain))
    for token in tokens:
        if isinstance(token, Open):
            stack.append(token)
            items.append((True, token.markup, token.plain))
        elif isinstance(token, Close):
            if stack:
                _close_item(items, stack.pop())
        elif isinstance(token, Text):
            if token.raw:
                items.append((False, token.escape(token.raw), token.raw))
                visible = visible or not token.raw.isspace()
        elif isinstance(token, Sep):
            items.append((False, token.text, token.text))
        else:
            items.append((False, token.markup, token.plain))
            visible = visible or bool(token.markup.strip())
    while stack:
        _close_item(items, stack.pop())
    return Joined("".join(item[1] for item in items), "".join(item[2] for item in items), visible)


def _close_item(items: list[tuple[bool, str, str]], opened: Open) -> None:
    if items and items[-1][0]:
        items.pop()
    else:
        items.append((False, opened.close, opened.plain_close))

