"""Text as a reader sees it: characters that render as nothing dropped, compatibility forms folded (NFKC).

Two jobs need that view and must not each define it: recognising words a person wrote with invisible or
look-alike characters in them (memory's rules), and finding a secret someone pasted with zero-width
spaces, fullwidth digits or dotted groups (:mod:`ground.redaction`). A :class:`SourceMappedText` keeps,
for every character of the view, where it came from, so what is found in the view is changed in the
text as it was typed and nothing else of it moves.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

# Default-ignorable code points that are not of category Cf (which covers zero-width spaces and joiners,
# the bidirectional controls, the soft hyphen and the tag characters): the combining grapheme joiner,
# Hangul fillers, Khmer inherent vowels, Mongolian variation selectors.
_INVISIBLE_EXTRA = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180e\u180f\u3164\uffa0")


def is_invisible(char: str) -> bool:
    """Whether ``char`` renders as nothing (and so only splits what a reader sees as one word): every
    Default_Ignorable_Code_Point of Unicode, the bidirectional controls among them (a right-to-left override),
    variation selectors and the code points reserved as ignorable but not yet assigned."""
    code = ord(char)
    return (unicodedata.category(char) == "Cf" or char in _INVISIBLE_EXTRA
            or 0xFE00 <= code <= 0xFE0F or 0xE0000 <= code <= 0xE0FFF  # variation selectors, tags and their block
            or code == 0x2065 or 0xFFF0 <= code <= 0xFFF8)  # reserved default-ignorables


def visible(text: str) -> str:
    """``text`` without the characters that render as nothing."""
    return "".join(c for c in text if not is_invisible(c))


@dataclass(frozen=True, slots=True)
class SourceMappedText:
    """A normalised view of ``source``: ``text``, and for each of its characters the index it came from."""

    source: str
    text: str
    origin: tuple[int, ...] | None  # None: character i came from index i (nothing was dropped or expanded)

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """The stretch of ``source`` that view characters ``start`` to ``end`` came from."""
        if self.origin is None:
            return start, end
        if end <= start:
            at = self.origin[start] if start < len(self.origin) else len(self.source)
            return at, at
        return self.origin[start], self.origin[end - 1] + 1


def folded_for_matching(text: str) -> SourceMappedText:
    """``text`` with invisible characters dropped and each character in its NFKC form (fullwidth digits and
    letters become ASCII, a no-break space a space)."""
    if text.isascii():  # most messages: nothing is invisible or has another form, so the view keeps every index
        return SourceMappedText(text, text, None)
    chars: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        if is_invisible(char):
            continue
        folded = unicodedata.normalize("NFKC", char) if not char.isascii() else char
        for piece in folded:
            chars.append(piece)
            origin.append(index)
    return SourceMappedText(text, "".join(chars), tuple(origin))
