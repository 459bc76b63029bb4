"""A document cut into passages, the pieces recall finds and a prompt shows (pure: no I/O).

Cuts fall between paragraphs where they can, then between sentences, then between words: a passage is whole
thoughts. Each passage begins with the last ``overlap`` characters of a full one before it in the same section (cut at a
word), so what falls across a cut keeps some of its context. A passage knows its page and, in Markdown, the heading
it sits under (a recipe's ingredients are found by the dish's name); the heading is kept beside the passage's
text, never written into it: the text is the person's document, as they sent it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(?P<title>.+?)\s*#*\s*$")
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])\s+")


@dataclass(frozen=True, slots=True)
class Passage:
    index: int  # its place in the document, from 0
    page: int  # the page it begins on, from 1
    heading: str  # the Markdown heading it sits under ("" for none)
    text: str

    def searchable(self) -> str:
        """What recall matches: the heading it sits under, then its text."""
        return f"{self.heading}\n{self.text}" if self.heading else self.text


def passages(pages: Sequence[str], *, markdown: bool, size: int, overlap: int) -> list[Passage]:
    """``pages`` cut into passages of at most ``size`` characters (plus the overlap carried from the one before)."""
    out: list[Passage] = []
    for page_number, page in enumerate(pages, start=1):
        for heading, block in _sections(page, markdown=markdown):
            for piece in _pack(_pieces(block, size), size):
                before = out[-1] if out else None
                # Carried only from a full passage of the same page and section: a short one is whole already.
                carried = (_tail(before.text, overlap) if before is not None and before.page == page_number
                           and before.heading == heading and len(before.text) > 2 * overlap else "")
                text = f"{carried} {piece}".strip() if carried and not piece.startswith(carried) else piece
                out.append(Passage(len(out), page_number, heading, text))
    return out


def _sections(page: str, *, markdown: bool) -> Iterator[tuple[str, str]]:
    """The page's text by the heading it sits under (Markdown), headings included in their section's text."""
    if not markdown:
        yield "", page
        return
    heading, lines = "", []
    for line in page.split("\n"):
        found = _HEADING.match(line)
        if found is not None:
            if "".join(lines).strip():
                yield heading, "\n".join(lines)
            heading, lines = found.group("title").strip(), [line]
        else:
            lines.append(line)
    if "".join(lines).strip():
        yield heading, "\n".join(lines)


def _pieces(block: str, size: int) -> Iterator[tuple[str, bool]]:
    """``block``'s paragraphs, each at most ``size`` characters (a longer one cut between sentences, then words),
    each piece with whether it begins a paragraph."""
    for paragraph in _PARAGRAPH_BREAK.split(block):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        if len(paragraph) <= size:
            yield paragraph, True
            continue
        first = True
        for sentence in _SENTENCE_END.split(paragraph):
            for piece in [sentence] if len(sentence) <= size else _by_words(sentence, size):
                yield piece, first
                first = False


def _by_words(text: str, size: int) -> Iterator[str]:
    line = ""
    for word in text.split():
        while len(word) > size:  # a "word" longer than a passage (a long URL, a run of symbols)
            if line:
                yield line
                line = ""
            yield word[:size]
            word = word[size:]
        if line and len(line) + 1 + len(word) > size:
            yield line
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        yield line


def _pack(pieces: Iterator[tuple[str, bool]], size: int) -> Iterator[str]:
    """Consecutive pieces joined while they fit in ``size``: a blank line before a paragraph, a space between the
    sentences of one."""
    current = ""
    for piece, opens in pieces:
        joiner = "\n\n" if opens else " "
        if current and len(current) + len(joiner) + len(piece) > size:
            yield current
            current = piece
        else:
            current = f"{current}{joiner}{piece}" if current else piece
    if current:
        yield current


def _tail(text: str, chars: int) -> str:
    """The last ``chars`` characters of ``text``, starting at a word."""
    if chars <= 0 or len(text) <= chars:
        return "" if chars <= 0 else text
    tail = text[-chars:]
    space = tail.find(" ")
    return tail[space + 1:] if 0 <= space < len(tail) - 1 else tail
