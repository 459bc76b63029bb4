"""A reply still being written, made fit to show: what a preview sends of the text so far (pure).

The Markdown converters already close an open code block and escape whatever is not markup, so any prefix of a
reply renders to valid platform markup. What they cannot know is that "**bo" is the start of bold rather than two
asterisks: shown as it is, the asterisks flash up and vanish a moment later. :func:`settled` cuts such an opening
that the text so far has not closed (strong, strikethrough, inline code, a link whose address is still coming), so a
preview only ever shows what the finished reply will show too, a little shorter.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^ {0,3}(```|~~~)", re.MULTILINE)
_PAIRED = ("**", "__", "~~")
# Emphasis by one marker: an opener starts a word, a closer ends one ("_Monday_", "*so*"), as the converter reads them.
_SINGLE_OPENER = re.compile(r"(?<![\w*_])([*_])(?=[^\s*_])")
_TRAILING_MARKERS = re.compile(r"(?:\A|(?<=\s))[*_~`\[!]+\Z")
# A list item's marker with nothing after it yet: the converter draws it as a bullet once its words come.
_BARE_LIST_MARKER = re.compile(r"(?:\A|\n)[ \t]*(?:[-*+]|\d+[.)]?)[ \t]*\Z")
# A link whose text or address is still being written, at the very end.
_OPEN_LINK = re.compile(r"!?\[[^\]\n]*(?:\](?:\([^)\n]*)?)?\Z")
# The first backticks of the fence that will close an open code block.
_PARTIAL_FENCE = re.compile(r"\n {0,3}(`{1,2}|~{1,2})\Z")


def _outside_code_blocks(text: str) -> tuple[str, str]:
    """(the text up to an open code block, the open block) — the block is the converter's to close."""
    fences = list(_FENCE.finditer(text))
    if len(fences) % 2 == 0:
        return text, ""
    start = fences[-1].start()
    return text[:start], text[start:]


def _cut_unclosed(prose: str) -> str:
    for _ in range(4):  # each pass cuts one opening; a few are plenty for a reply's last line
        cut = len(prose)
        ticks = [m.start() for m in re.finditer(r"(?<!`)`(?!`)", prose)]
        if len(ticks) % 2:
            cut = min(cut, ticks[-1])
        for marker in _PAIRED:
            spots = [m.start() for m in re.finditer(re.escape(marker), prose)]
            if len(spots) % 2:
                cut = min(cut, spots[-1])
        link = _OPEN_LINK.search(prose)
        if link is not None:
            cut = min(cut, link.start())
        for opener in _SINGLE_OPENER.finditer(prose):
            marker = opener.group(1)
            closer = re.compile(rf"(?<=[^\s*_]){re.escape(marker)}(?![\w*_])")
            if closer.search(prose, opener.end()) is None:
                cut = min(cut, opener.start())
                break
        bare = _BARE_LIST_MARKER.search(prose)
        if bare is not None:
            cut = min(cut, bare.start())
        trailing = _TRAILING_MARKERS.search(prose)
        if trailing is not None:
            cut = min(cut, trailing.start())
        if cut == len(prose):
            return prose
        prose = prose[:cut].rstrip(" ")
    return prose


def settled(text: str) -> str:
    """``text`` (a prefix of a reply) without a trailing opening it has not closed yet; an open code block stays,
    for the converter to close. Only the prose after the last code block is read: a block's text is not markup."""
    prose, block = _outside_code_blocks(text)
    if block:
        return prose + _PARTIAL_FENCE.sub("", block)
    fences = list(_FENCE.finditer(text))
    if not fences:
        return _cut_unclosed(text)
    after = text.find("\n", fences[-1].end())
    if after < 0:
        return text
    return text[:after + 1] + _cut_unclosed(text[after + 1:])
