"""Inline Markdown parsed into a small tree: literal text, code spans, bare URLs, links and styled spans.

Emphasis follows CommonMark's delimiter rules (minus a few corner cases). Odd Markdown is never "fixed"
into markup: a delimiter with no partner or a link that does not parse stays literal text.
"""

from __future__ import annotations

import bisect
import re
import string
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

# Parser safety bounds, not tunables: they keep adversarial input (megabytes of "*a _b") linear, and no
# real reply comes near them. A link target longer than this renders as literal text...
MAX_LINK_URL_CHARS = 2_048
# ...and a closing delimiter looks back at most this many unclosed openers for its partner.
EMPHASIS_LOOKBACK = 100


@dataclass(frozen=True, slots=True)
class Literal:
    text: str


@dataclass(frozen=True, slots=True)
class CodeSpan:
    text: str


@dataclass(frozen=True, slots=True)
class BareUrl:
    url: str


@dataclass(frozen=True, slots=True)
class Link:
    children: tuple[Inline, ...]
    url: str


@dataclass(frozen=True, slots=True)
class Styled:
    style: str  # "b", "i" or "s"
    children: tuple[Inline, ...]


Inline = Literal | CodeSpan | BareUrl | Link | Styled


@dataclass(slots=True)
class _Delim:
    char: str
    count: int
    original: int
    can_open: bool
    can_close: bool


_ASCII_PUNCT = frozenset(string.punctuation)
_INLINE_SPECIAL = re.compile(r"[\\`*_~\[]|https?://", re.IGNORECASE)
BACKTICK_RUN = re.compile(r"`+")
_DELIM_RUN = {"*": re.compile(r"\*+"), "_": re.compile(r"_+"), "~": re.compile(r"~+")}
_URL_STOP = re.compile(r"[\s<>]")
# A link target: no whitespace, parentheses balanced one level deep (Wikipedia's "Foo_(bar)"). The
# alternatives start with different characters, so matching never backtracks.
LINK_DESTINATION = re.compile(r"(?:[^\s()\\]|\\\S|\((?:[^\s()\\]|\\\S)*\))*")
_URL_TRAILING = frozenset(".,:;!?'\"*_~")
_STYLE_BY_CHAR = {"*": ("i", "b"), "_": ("i", "b"), "~": ("s", "s")}


def _is_punct(char: str) -> bool:
    if char.isascii():
        return char in _ASCII_PUNCT
    return unicodedata.category(char)[0] in "PS"


class _BacktickRuns:
    """Positions of backtick runs by length, so finding a code span's closer is a bisect, not a scan."""

    def __init__(self, text: str) -> None:
        self._by_length: dict[int, list[int]] = {}
        for match in BACKTICK_RUN.finditer(text):
            self._by_length.setdefault(len(match.group()), []).append(match.start())

    def closer(self, length: int, after: int) -> int | None:
        starts = self._by_length.get(length, [])
        index = bisect.bisect_left(starts, after)
        return starts[index] if index < len(starts) else None


def _match_brackets(text: str) -> dict[int, int]:
    pairs: dict[int, int] = {}
    opened: list[int] = []
    for match in re.finditer(r"\\.|[\[\]]", text, re.DOTALL):
        if match.group() == "[":
            opened.append(match.start())
        elif match.group() == "]" and opened:
            pairs[opened.pop()] = match.start()
    return pairs


def parse_inline(text: str, *, links: bool = True) -> tuple[Inline, ...]:
    return tuple(_resolve_emphasis(_tokenize(text, links=links)))


def _tokenize(text: str, *, links: bool) -> list[Inline | _Delim]:
    out: list[Inline | _Delim] = []
    pending: list[str] = []

    def flush() -> None:
        if pending:
            out.append(Literal("".join(pending)))
            pending.clear()

    backticks: _BacktickRuns | None = None
    brackets = _match_brackets(text) if links and "[" in text else {}
    size = len(text)
    i = 0
    while i < size:
        match = _INLINE_SPECIAL.search(text, i)
        if match is None:
            pending.append(text[i:])
            break
        j = match.start()
        pending.append(text[i:j])
        char = text[j]
        if char == "\\":
            escaped = text[j + 1 : j + 2]
            if escaped and escaped in _ASCII_PUNCT:
                pending.append(escaped)
                i = j + 2
            else:
                pending.append("\\")
                i = j + 1
        elif char == "`":
            end = BACKTICK_RUN.match(text, j).end()  # type: ignore[union-attr]
            backticks = backticks or _BacktickRuns(text)
            closer = backticks.closer(end - j, end)
            if closer is None:
                pending.append(text[j:end])
                i = end
            else:
                flush()
                out.append(CodeSpan(_code_span_content(text[end:closer])))
                i = closer + (end - j)
        elif char in _DELIM_RUN:
            end = _DELIM_RUN[char].match(text, j).end()  # type: ignore[union-attr]
            delim = _delimiter(text, j, end)
            if delim is None:
                pending.append(text[j:end])
            else:
                flush()
                out.append(delim)
            i = end
        elif char == "[":
            link = _try_link(text, j, brackets)
            if link is None:
                pending.append("[")
                i = j + 1
            else:
                label, url, i = link
                if j > 0 and text[j - 1] == "!" and pending and pending[-1].endswith("!"):
                    pending[-1] = pending[-1][:-1]  # an image: show its alt text as the link
                flush()
                out.append(Link(parse_inline(label, links=False), url))
        else:
            scheme = match.group()
            end = _bare_url_end(text, j)
            if (j > 0 and text[j - 1].isalnum()) or end - j <= len(scheme):
                pending.append(scheme)
                i = j + len(scheme)
            else:
                flush()
                out.append(BareUrl(text[j:end]))
                i = end
    flush()
    return out


def _code_span_content(content: str) -> str:
    content = content.replace("\n", " ")
    if len(content) >= 2 and content[0] == " " and content[-1] == " " and content.strip(" "):
        return content[1:-1]
    return content


def _delimiter(text: str, start: int, end: int) -> _Delim | None:
    char, count = text[start], end - start
    if char == "~" and count != 2:
        return None
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    before_space, after_space = before.isspace(), after.isspace()
    before_punct, after_punct = _is_punct(before), _is_punct(after)
    left = not after_space and (not after_punct or before_space or before_punct)
    right = not before_space and (not before_punct or after_space or after_punct)
    if char == "_":
        can_open = left and (not right or before_punct)
        can_close = right and (not left or after_punct)
    else:
        can_open, can_close = left, right
    if not (can_open or can_close):
        return None
    return _Delim(char, count, count, can_open, can_close)


def _try_link(text: str, start: int, brackets: Mapping[int, int]) -> tuple[str, str, int] | None:
    """``[label](url "title")`` at ``start``: (label, url, end) or None when it is not a link."""
    close = brackets.get(start)
    size = len(text)
    if close is None or close + 1 >= size or text[close + 1] != "(":
        return None
    i = close + 2
    while i < size and text[i] in " \t":
        i += 1
    if i < size and text[i] == "<":
        end = text.find(">", i + 1, i + 2 + MAX_LINK_URL_CHARS)
        if end == -1 or "\n" in text[i + 1 : end]:
            return None
        url, i = text[i + 1 : end], end + 1
    else:
        begin, i = i, LINK_DESTINATION.match(text, i).end()  # type: ignore[union-attr]
        if i - begin > MAX_LINK_URL_CHARS:
            return None
        url = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", text[begin:i])
    while i < size and text[i] in " \t\n":
        i += 1
    if i < size and text[i] in "\"'(":
        closer = ")" if text[i] == "(" else text[i]
        end = text.find(closer, i + 1, i + 2 + MAX_LINK_URL_CHARS)
        if end == -1:
            return None
        i = end + 1
        while i < size and text[i] in " \t\n":
            i += 1
    if not url or i >= size or text[i] != ")":
        return None
    return text[start + 1 : close], url, i + 1


def _bare_url_end(text: str, start: int) -> int:
    stop = _URL_STOP.search(text, start)
    end = stop.start() if stop else len(text)
    while end > start and text[end - 1] in _URL_TRAILING:
        end -= 1
    opened = text.count("(", start, end)
    closed = text.count(")", start, end)
    while end > start and text[end - 1] == ")" and closed > opened:
        end -= 1
        closed -= 1
    return end


def _resolve_emphasis(tokens: list[Inline | _Delim]) -> list[Inline]:
    """Pair delimiter runs into bold/italic/strike (CommonMark's rules, minus a few corner cases).

    Frames hold the nodes seen since an unmatched opener; a closer pairs with the nearest compatible
    opener, and openers skipped over become literal text, as do all openers still unmatched at the end.
    """
    root: list[Inline] = []
    frames: list[tuple[_Delim, list[Inline]]] = []

    def current() -> list[Inline]:
        return frames[-1][1] if frames else root

    for token in tokens:
        if not isinstance(token, _Delim):
            current().append(token)
            continue
        closer = token
        while closer.can_close and closer.count > 0:
            found = _find_opener(frames, closer)
            if found is None:
                break
            for skipped, children in frames[found + 1 :]:
                frames[found][1].append(Literal(skipped.char * skipped.count))
                frames[found][1].extend(children)
            del frames[found + 1 :]
            opener, children = frames[found]
            used = 2 if opener.count >= 2 and closer.count >= 2 else 1
            node = Styled(_STYLE_BY_CHAR[closer.char][used - 1], tuple(_merge_literals(children)))
            opener.count -= used
            closer.count -= used
            if opener.count:
                frames[found] = (opener, [node])
            else:
                frames.pop()
                current().append(node)
        if closer.count > 0:
            if closer.can_open:
                frames.append((closer, []))
            else:
                current().append(Literal(closer.char * closer.count))
    for opener, children in frames:
        root.append(Literal(opener.char * opener.count))
        root.extend(children)
    return _merge_literals(root)


def _merge_literals(nodes: list[Inline]) -> list[Inline]:
    """Adjacent literals as one node: unmatched delimiters otherwise leave thousands of tiny ones."""
    merged: list[Inline] = []
    run: list[str] = []
    for node in nodes:
        if isinstance(node, Literal):
            run.append(node.text)
            continue
        if run:
            merged.append(Literal("".join(run)))
            run = []
        merged.append(node)
    if run:
        merged.append(Literal("".join(run)))
    return merged


def _find_opener(frames: list[tuple[_Delim, list[Inline]]], closer: _Delim) -> int | None:
    for index in range(len(frames) - 1, max(-1, len(frames) - 1 - EMPHASIS_LOOKBACK), -1):
        opener = frames[index][0]
        if opener.char != closer.char or not opener.can_open:
            continue
        both_flank = opener.can_close or closer.can_open
        sum_of_three = (opener.original + closer.original) % 3 == 0
        if both_flank and sum_of_three and not (opener.original % 3 == 0 and closer.original % 3 == 0):
            continue  # CommonMark's "rule of 3": ***a** pairs the inner two
        return index
    return None

