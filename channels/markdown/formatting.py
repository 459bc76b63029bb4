"""The model's Markdown rendered as each platform's markup, as a token stream a chunker can cut safely.

The Markdown is parsed once into a small tree (blocks holding inline nodes). A dialect then emits a flat
stream of tokens: opening markup (with the markup that closes it), text (kept raw, escaped only when
joined), separators and small atoms. Every token carries its platform markup and a markup-free twin, so
one stream yields both a chunk and the plain text sent when the platform rejects the formatting. Because
text stays raw until it is joined, a cut never lands inside an HTML entity or tag, and because the stream
knows what is open, a cut can close it and reopen it in the next chunk.

Odd Markdown is never "fixed" into markup: a delimiter with no partner, a link that does not parse or a
URL the platform would refuse renders as literal, escaped text.
"""

from __future__ import annotations

import bisect
import enum
import re
import string
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

# Parser safety bounds (candidates for core/tunables.py): a link target longer than this renders as
# literal text, and a closing delimiter looks back at most this many unclosed openers for its partner,
# which keeps adversarial input (megabytes of "*a _b") linear.
MAX_LINK_URL_CHARS = 2_048
EMPHASIS_LOOKBACK = 100


class Platform(enum.StrEnum):
    TELEGRAM = "telegram"
    DISCORD = "discord"
    SLACK = "slack"
    TERMINAL = "console"


class BreakPriority(enum.IntEnum):
    """Where a chunk may end, best first: the chunker prefers the lowest value it can reach."""

    PARAGRAPH = 0  # between blocks separated by a blank line
    BLOCK = 1  # between adjacent blocks (list items, a heading and its paragraph)
    LINE = 2  # a line break inside a block, code blocks included
    WORD = 3  # a space inside text
    HARD = 4  # anywhere else that splits no character cluster


# --- Tokens ------------------------------------------------------------------------------------------


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


# --- Sanitizing ----------------------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def sanitize(text: str) -> str:
    """Normalize line ends, drop control characters and mend surrogates no platform accepts.

    Surrogate halves that form a pair become the one character they encode; a lone half becomes U+FFFD.
    Control characters (NUL, ESC...) are invisible at best and a terminal escape at worst.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    if _SURROGATE.search(text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


# --- Inline parsing --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Literal:
    text: str


@dataclass(frozen=True, slots=True)
class _CodeSpan:
    text: str


@dataclass(frozen=True, slots=True)
class _BareUrl:
    url: str


@dataclass(frozen=True, slots=True)
class _Link:
    children: tuple[_Inline, ...]
    url: str


@dataclass(frozen=True, slots=True)
class _Styled:
    style: str  # "b", "i" or "s"
    children: tuple[_Inline, ...]


_Inline = _Literal | _CodeSpan | _BareUrl | _Link | _Styled


@dataclass(slots=True)
class _Delim:
    char: str
    count: int
    original: int
    can_open: bool
    can_close: bool


_ASCII_PUNCT = frozenset(string.punctuation)
_INLINE_SPECIAL = re.compile(r"[\\`*_~\[]|https?://", re.IGNORECASE)
_BACKTICK_RUN = re.compile(r"`+")
_DELIM_RUN = {"*": re.compile(r"\*+"), "_": re.compile(r"_+"), "~": re.compile(r"~+")}
_URL_STOP = re.compile(r"[\s<>]")
# A link target: no whitespace, parentheses balanced one level deep (Wikipedia's "Foo_(bar)"). The
# alternatives start with different characters, so matching never backtracks.
_LINK_DESTINATION = re.compile(r"(?:[^\s()\\]|\\\S|\((?:[^\s()\\]|\\\S)*\))*")
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
        for match in _BACKTICK_RUN.finditer(text):
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


def _parse_inline(text: str, *, links: bool = True) -> tuple[_Inline, ...]:
    return tuple(_resolve_emphasis(_tokenize(text, links=links)))


def _tokenize(text: str, *, links: bool) -> list[_Inline | _Delim]:
    out: list[_Inline | _Delim] = []
    pending: list[str] = []

    def flush() -> None:
        if pending:
            out.append(_Literal("".join(pending)))
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
            end = _BACKTICK_RUN.match(text, j).end()  # type: ignore[union-attr]
            backticks = backticks or _BacktickRuns(text)
            closer = backticks.closer(end - j, end)
            if closer is None:
                pending.append(text[j:end])
                i = end
            else:
                flush()
                out.append(_CodeSpan(_code_span_content(text[end:closer])))
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
                out.append(_Link(_parse_inline(label, links=False), url))
        else:
            scheme = match.group()
            end = _bare_url_end(text, j)
            if (j > 0 and text[j - 1].isalnum()) or end - j <= len(scheme):
                pending.append(scheme)
                i = j + len(scheme)
            else:
                flush()
                out.append(_BareUrl(text[j:end]))
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
        begin, i = i, _LINK_DESTINATION.match(text, i).end()  # type: ignore[union-attr]
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


def _resolve_emphasis(tokens: list[_Inline | _Delim]) -> list[_Inline]:
    """Pair delimiter runs into bold/italic/strike (CommonMark's rules, minus a few corner cases).

    Frames hold the nodes seen since an unmatched opener; a closer pairs with the nearest compatible
    opener, and openers skipped over become literal text, as do all openers still unmatched at the end.
    """
    root: list[_Inline] = []
    frames: list[tuple[_Delim, list[_Inline]]] = []

    def current() -> list[_Inline]:
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
                frames[found][1].append(_Literal(skipped.char * skipped.count))
                frames[found][1].extend(children)
            del frames[found + 1 :]
            opener, children = frames[found]
            used = 2 if opener.count >= 2 and closer.count >= 2 else 1
            node = _Styled(_STYLE_BY_CHAR[closer.char][used - 1], tuple(_merge_literals(children)))
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
                current().append(_Literal(closer.char * closer.count))
    for opener, children in frames:
        root.append(_Literal(opener.char * opener.count))
        root.extend(children)
    return _merge_literals(root)


def _merge_literals(nodes: list[_Inline]) -> list[_Inline]:
    """Adjacent literals as one node: unmatched delimiters otherwise leave thousands of tiny ones."""
    merged: list[_Inline] = []
    run: list[str] = []
    for node in nodes:
        if isinstance(node, _Literal):
            run.append(node.text)
            continue
        if run:
            merged.append(_Literal("".join(run)))
            run = []
        merged.append(node)
    if run:
        merged.append(_Literal("".join(run)))
    return merged


def _find_opener(frames: list[tuple[_Delim, list[_Inline]]], closer: _Delim) -> int | None:
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


# --- Block parsing ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Paragraph:
    inlines: tuple[_Inline, ...]


@dataclass(frozen=True, slots=True)
class _Heading:
    level: int
    inlines: tuple[_Inline, ...]


@dataclass(frozen=True, slots=True)
class _ListItem:
    indent: str
    marker: str
    inlines: tuple[_Inline, ...]


@dataclass(frozen=True, slots=True)
class _Rule:
    pass


@dataclass(frozen=True, slots=True)
class _CodeBlock:
    language: str
    lines: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Quote:
    blocks: tuple[tuple[bool, _Block], ...]


_Block = _Paragraph | _Heading | _ListItem | _Rule | _CodeBlock | _Quote

_LIST_ITEM = re.compile(r"([ \t]*)([-*+•]|\d{1,9}[.)])[ \t]+(\S.*)")
_HEADING_OPEN = re.compile(r" {0,3}(#{1,6})(?:[ \t]|$)")
_LANGUAGE = re.compile(r"[A-Za-z0-9_+#.-]{1,32}")
_BULLETS = frozenset("-*+•")
_BLOCK_START_CHARS = frozenset("`~#>-*_+•0123456789")


def _parse_blocks(text: str, *, nested: bool = False) -> tuple[tuple[bool, _Block], ...]:
    """Blocks with, for each, whether a blank line came before it (a paragraph break)."""
    lines = text.split("\n")
    blocks: list[tuple[bool, _Block]] = []
    gap = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            gap = bool(blocks)
            i += 1
            continue
        block: _Block
        fence = None if nested else _fence_open(line)
        if fence is not None:
            indent, char, length, language = fence
            body: list[str] = []
            i += 1
            while i < len(lines) and not _is_fence_close(lines[i], char, length):
                body.append(_strip_indent(lines[i], indent))
                i += 1
            i += 1
            block = _CodeBlock(language, tuple(body))
        elif (heading := _heading(line)) is not None:
            i += 1
            if not heading[1]:
                continue
            block = _Heading(heading[0], _parse_inline(heading[1]))
        elif _is_rule(line):
            i += 1
            block = _Rule()
        elif not nested and (quoted := _quote_content(line)) is not None:
            inner: list[str] = []
            while i < len(lines) and (quoted := _quote_content(lines[i])) is not None:
                inner.append(quoted)
                i += 1
            block = _Quote(_parse_blocks("\n".join(inner), nested=True))
            if not block.blocks:
                continue
        else:
            item = _LIST_ITEM.fullmatch(line)
            parts = [item.group(3).rstrip() if item else line.rstrip()]
            i += 1
            while i < len(lines) and lines[i].strip() and not _starts_block(lines[i], nested=nested):
                parts.append(lines[i].strip() if item else lines[i].rstrip())
                i += 1
            inlines = _parse_inline("\n".join(parts))
            block = _ListItem(item.group(1), item.group(2), inlines) if item else _Paragraph(inlines)
        blocks.append((gap, block))
        gap = False
    return tuple(blocks)


def _fence_open(line: str) -> tuple[int, str, int, str] | None:
    stripped = line.lstrip(" ")
    indent = len(line) - len(stripped)
    if indent > 3 or stripped[:3] not in ("```", "~~~"):
        return None
    char = stripped[0]
    length = len(stripped) - len(stripped.lstrip(char))
    info = stripped[length:].strip()
    if char == "`" and "`" in info:
        return None
    word = info.split(maxsplit=1)[0] if info else ""
    return indent, char, length, word if _LANGUAGE.fullmatch(word) else ""


def _is_fence_close(line: str, char: str, length: int) -> bool:
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3:
        return False
    body = stripped.rstrip()
    return len(body) >= length and body == char * len(body)


def _strip_indent(line: str, indent: int) -> str:
    stripped = line.lstrip(" ")
    return line[min(indent, len(line) - len(stripped)) :]


def _heading(line: str) -> tuple[int, str] | None:
    match = _HEADING_OPEN.match(line)
    if match is None:
        return None
    content = line[match.end() :].strip()
    without_closing = content.rstrip("#")
    if without_closing != content and (not without_closing or without_closing[-1] in " \t"):
        content = without_closing.rstrip()
    return len(match.group(1)), content


def _is_rule(line: str) -> bool:
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3 or not stripped or stripped[0] not in "-*_":
        return False
    body = stripped.replace(" ", "").replace("\t", "")
    return len(body) >= 3 and body == stripped[0] * len(body)


def _quote_content(line: str) -> str | None:
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3 or not stripped.startswith(">"):
        return None
    content = stripped[1:]
    return content[1:] if content.startswith(" ") else content


def _starts_block(line: str, *, nested: bool) -> bool:
    stripped = line.lstrip()
    if not stripped or stripped[0] not in _BLOCK_START_CHARS:
        return False
    if not nested and (_fence_open(line) is not None or _quote_content(line) is not None):
        return True
    return _heading(line) is not None or _is_rule(line) or _LIST_ITEM.fullmatch(line) is not None


# --- Flattening inline trees into runs ------------------------------------------------------------------


class _RunKind(enum.Enum):
    TEXT = enum.auto()
    CODE = enum.auto()
    URL = enum.auto()
    NEWLINE = enum.auto()


StyleKey = str | tuple[str, str, bool]  # "b" / "i" / "s", or ("a", url, show the url in plain text)


@dataclass(frozen=True, slots=True)
class _Run:
    kind: _RunKind
    text: str
    styles: tuple[StyleKey, ...]


def _flatten(
    nodes: Sequence[_Inline], *, link_supported: Callable[[str], bool], links_hold_styles: bool
) -> Iterator[_Run]:
    """Runs of text with the styles around them, outermost first; iterative, so nesting depth is free."""
    stack: list[tuple[Iterator[_Inline], tuple[StyleKey, ...], bool]] = [(iter(nodes), (), True)]
    while stack:
        children, styles, styling = stack[-1]
        node = next(children, None)
        if node is None:
            stack.pop()
        elif isinstance(node, _Literal):
            for index, line in enumerate(node.text.split("\n")):
                if index:
                    yield _Run(_RunKind.NEWLINE, "", styles)
                if line:
                    yield _Run(_RunKind.TEXT, line, styles)
        elif isinstance(node, _CodeSpan):
            yield _Run(_RunKind.CODE if styling else _RunKind.TEXT, node.text, styles)
        elif isinstance(node, _BareUrl):
            yield _Run(_RunKind.URL, node.url, styles)
        elif isinstance(node, _Styled):
            inner = styles if not styling or node.style in styles else (*styles, node.style)
            stack.append((iter(node.children), inner, styling))
        else:
            label = node.children or (_BareUrl(node.url),)
            show_url = _plain_text(label) != node.url
            if link_supported(node.url):
                key = ("a", node.url, show_url)
                stack.append((iter(label), (*styles, key), styling and links_hold_styles))
            else:
                suffix = (_Literal(f" ({node.url})"),) if show_url else ()
                stack.append((iter((*label, *suffix)), styles, styling))


def _plain_text(nodes: Sequence[_Inline]) -> str:
    parts: list[str] = []
    pending: list[_Inline] = list(reversed(nodes))
    while pending:
        node = pending.pop()
        if isinstance(node, _Literal | _CodeSpan):
            parts.append(node.text)
        elif isinstance(node, _BareUrl):
            parts.append(node.url)
        else:
            pending.extend(reversed(node.children))
    return "".join(parts)


# --- Dialects ---------------------------------------------------------------------------------------------

_PLAIN_BULLET = "•"
_PLAIN_QUOTE = "> "
_PLAIN_RULE = "———"


def _identity(text: str) -> str:
    return text


def _escape_html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _escape_html_attribute(text: str) -> str:
    return _escape_html(text).replace('"', "&quot;")


_MARKDOWN_ESCAPES = str.maketrans({char: "\\" + char for char in "\\`*_~|[]"})


def _escape_markdown(text: str) -> str:
    return text.translate(_MARKDOWN_ESCAPES)


def _escape_discord_code_block(text: str) -> str:
    # Discord ends a code block at the first ``` whatever the fence length; a zero-width space keeps
    # the backticks visible without closing the block.
    return text.replace("```", "``\u200b`")


def _markdown_code_span(content: str) -> tuple[str, str]:
    longest = max((len(run) for run in _BACKTICK_RUN.findall(content)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if content.startswith("`") or content.endswith("`") or content.startswith(" ") else ""
    return ticks + pad, pad + ticks


def _url_for_markdown(url: str) -> str:
    if _LINK_DESTINATION.fullmatch(url):
        return url
    return url.replace(" ", "%20").replace("(", "%28").replace(")", "%29")


def _is_web_url(url: str) -> bool:
    return re.match(r"https?://\S", url, re.IGNORECASE) is not None


@dataclass(frozen=True, slots=True)
class _Dialect:
    escape_text: Callable[[str], str]
    escape_link_text: Callable[[str], str]
    escape_url: Callable[[str], str]
    escape_code_span: Callable[[str], str]
    escape_code_block: Callable[[str], str]
    styles: Mapping[str, tuple[str, str]]
    link: Callable[[str], tuple[str, str]]
    link_supported: Callable[[str], bool]
    code_span: Callable[[str], tuple[str, str]]
    code_block: Callable[[str, Sequence[str]], tuple[str, str]]
    heading: Callable[[int], tuple[str, str, str, bool]]  # (prefix atom, open, close, drop inner bold)
    quote_wrap: tuple[str, str]
    quote_line: str
    bullet: str
    rule: str
    code_breaks_styles: bool = False  # Telegram: code may not sit inside bold, italic or a link
    links_hold_styles: bool = True  # Slack shows no formatting inside a link's label
    escape_line_starts: bool = False  # Markdown dialects: a literal "# " must not become a heading
    is_plain: bool = False


def _telegram_code_block(language: str, lines: Sequence[str]) -> tuple[str, str]:
    if language:
        return f'<pre><code class="language-{_escape_html_attribute(language)}">', "</code></pre>"
    return "<pre>", "</pre>"


def _markdown_code_block(language: str, lines: Sequence[str]) -> tuple[str, str]:
    longest = max((len(run) for line in lines for run in _BACKTICK_RUN.findall(line)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n", f"\n{fence}"


def _discord_heading(level: int) -> tuple[str, str, str, bool]:
    if level <= 3:  # Discord renders only #, ## and ###
        return "#" * level + " ", "", "", False
    return "", "**", "**", True


_TELEGRAM = _Dialect(
    escape_text=_escape_html,
    escape_link_text=_escape_html,
    escape_url=_escape_html,
    escape_code_span=_escape_html,
    escape_code_block=_escape_html,
    styles={"b": ("<b>", "</b>"), "i": ("<i>", "</i>"), "s": ("<s>", "</s>")},
    link=lambda url: (f'<a href="{_escape_html_attribute(url)}">', "</a>"),
    link_supported=lambda url: _is_web_url(url) or url.lower().startswith("tg://"),
    code_span=lambda content: ("<code>", "</code>"),
    code_block=_telegram_code_block,
    heading=lambda level: ("", "<b>", "</b>", True),
    quote_wrap=("<blockquote>", "</blockquote>"),
    quote_line="",
    bullet="•",
    rule=_PLAIN_RULE,
    code_breaks_styles=True,
)

_SLACK = _Dialect(
    escape_text=_escape_html,
    escape_link_text=_escape_html,
    escape_url=_escape_html,
    escape_code_span=_escape_html,
    escape_code_block=_escape_html,
    styles={"b": ("*", "*"), "i": ("_", "_"), "s": ("~", "~")},
    link=lambda url: (
        "<" + url.replace("&", "&amp;").replace("<", "%3C").replace(">", "%3E").replace("|", "%7C") + "|",
        ">",
    ),
    link_supported=lambda url: _is_web_url(url) or url.lower().startswith("mailto:"),
    code_span=lambda content: ("`", "`"),
    code_block=lambda language, lines: ("```\n", "\n```"),
    heading=lambda level: ("", "*", "*", True),
    quote_wrap=("", ""),
    quote_line="> ",
    bullet="•",
    rule=_PLAIN_RULE,
    links_hold_styles=False,
)

_DISCORD = _Dialect(
    escape_text=_escape_markdown,
    escape_link_text=_escape_markdown,
    escape_url=_identity,
    escape_code_span=_identity,
    escape_code_block=_escape_discord_code_block,
    styles={"b": ("**", "**"), "i": ("*", "*"), "s": ("~~", "~~")},
    link=lambda url: ("[", f"]({_url_for_markdown(url)})"),
    link_supported=_is_web_url,
    code_span=_markdown_code_span,
    code_block=lambda language, lines: (f"```{language}\n", "\n```"),
    heading=_discord_heading,
    quote_wrap=("", ""),
    quote_line="> ",
    bullet="-",
    rule=_PLAIN_RULE,
    escape_line_starts=True,
)

_MARKDOWN = _Dialect(
    escape_text=_escape_markdown,
    escape_link_text=_escape_markdown,
    escape_url=_identity,
    escape_code_span=_identity,
    escape_code_block=_identity,
    styles={"b": ("**", "**"), "i": ("*", "*"), "s": ("~~", "~~")},
    link=lambda url: ("[", f"]({_url_for_markdown(url)})"),
    link_supported=lambda url: True,
    code_span=_markdown_code_span,
    code_block=_markdown_code_block,
    heading=lambda level: ("#" * level + " ", "", "", False),
    quote_wrap=("", ""),
    quote_line="> ",
    bullet="-",
    rule="***",
    escape_line_starts=True,
)

_PLAIN = _Dialect(
    escape_text=_identity,
    escape_link_text=_identity,
    escape_url=_identity,
    escape_code_span=_identity,
    escape_code_block=_identity,
    styles={"b": ("", ""), "i": ("", ""), "s": ("", "")},
    link=lambda url: ("", ""),
    link_supported=lambda url: True,
    code_span=lambda content: ("", ""),
    code_block=lambda language, lines: ("", ""),
    heading=lambda level: ("", "", "", True),
    quote_wrap=("", ""),
    quote_line=_PLAIN_QUOTE,
    bullet=_PLAIN_BULLET,
    rule=_PLAIN_RULE,
    is_plain=True,
)

_DIALECTS: Mapping[Platform, _Dialect] = {
    Platform.TELEGRAM: _TELEGRAM,
    Platform.SLACK: _SLACK,
    Platform.DISCORD: _DISCORD,
    Platform.TERMINAL: _PLAIN,
}

# A line of text that Markdown would read as a block marker: "# x", "> x", "- x", "-# x", "1. x".
_LINE_START_MARKER = re.compile(r"#{1,6}(?:\s|$)|>|[-+](?:\s|#|$)|(\d{1,9})[.)](?:\s|$)")


# --- Emitting tokens ---------------------------------------------------------------------------------------


class _Emitter:
    def __init__(self, dialect: _Dialect) -> None:
        self._dialect = dialect
        self._tokens: list[Token] = []
        self._pending: list[str] = []  # text not yet emitted, merged into one Text token
        self._pending_escape: Callable[[str], str] = _identity
        self._styles: tuple[StyleKey, ...] = ()
        self._quote_line: Open | None = None
        self._at_line_start = True

    @property
    def tokens(self) -> list[Token]:
        self._flush()
        return self._tokens

    def _flush(self) -> None:
        if self._pending:
            self._tokens.append(Text("".join(self._pending), self._pending_escape))
            self._pending.clear()

    def _push(self, *tokens: Token) -> None:
        self._flush()
        self._tokens.extend(tokens)

    def _text(self, raw: str, escape: Callable[[str], str]) -> None:
        if escape is not self._pending_escape:
            self._flush()
            self._pending_escape = escape
        self._pending.append(raw)

    def document(self, blocks: Sequence[tuple[bool, _Block]]) -> None:
        for index, (gap, block) in enumerate(blocks):
            if index:
                self._block_separator(gap)
            self._block(block)

    def _open(self, markup: str, close: str, plain: str = "", plain_close: str = "") -> Open:
        if self._dialect.is_plain:
            return Open(plain, plain_close, plain, plain_close)
        return Open(markup, close, plain, plain_close)

    def _atom(self, markup: str, plain: str) -> Atom:
        return Atom(plain if self._dialect.is_plain else markup, plain)

    def _block_separator(self, gap: bool) -> None:
        if self._quote_line is None:
            self._push(Sep("\n\n", BreakPriority.PARAGRAPH) if gap else Sep("\n", BreakPriority.BLOCK))
            return
        self._push(CLOSE)
        if gap:
            self._push(Sep("\n", BreakPriority.PARAGRAPH))
            self._push(self._atom(self._dialect.quote_line.rstrip(), _PLAIN_QUOTE.rstrip()))
        self._push(Sep("\n", BreakPriority.BLOCK))
        self._push(self._quote_line)

    def _block(self, block: _Block) -> None:
        dialect = self._dialect
        self._at_line_start = True
        if isinstance(block, _Paragraph):
            self._inlines(block.inlines)
        elif isinstance(block, _Heading):
            prefix, opening, closing, drop_bold = dialect.heading(block.level)
            if prefix:
                self._push(self._atom(prefix, ""))
            self._push(self._open(opening, closing))
            self._inlines(block.inlines, suppress=frozenset({"b"}) if drop_bold else frozenset())
            self._push(CLOSE)
        elif isinstance(block, _ListItem):
            bullet = block.marker in _BULLETS
            markup = f"{block.indent}{dialect.bullet if bullet else block.marker} "
            self._push(self._atom(markup, f"{block.indent}{_PLAIN_BULLET if bullet else block.marker} "))
            self._at_line_start = False
            self._inlines(block.inlines)
        elif isinstance(block, _Rule):
            self._push(self._atom(dialect.rule, _PLAIN_RULE))
        elif isinstance(block, _CodeBlock):
            self._push(self._open(*dialect.code_block(block.language, block.lines)))
            for index, line in enumerate(block.lines):
                if index:
                    self._push(Sep("\n", BreakPriority.LINE))
                if line:
                    self._text(line, dialect.escape_code_block)
            self._push(CLOSE)
        else:
            self._push(self._open(*dialect.quote_wrap))
            self._quote_line = self._open(dialect.quote_line, "", _PLAIN_QUOTE, "")
            self._push(self._quote_line)
            self.document(block.blocks)
            self._push(CLOSE)
            self._quote_line = None
            self._push(CLOSE)

    def _inlines(self, nodes: Sequence[_Inline], suppress: frozenset[str] = frozenset()) -> None:
        dialect = self._dialect
        runs = _flatten(nodes, link_supported=dialect.link_supported, links_hold_styles=dialect.links_hold_styles)
        for run in runs:
            if run.kind is _RunKind.NEWLINE:
                self._newline()
                continue
            styles = tuple(style for style in run.styles if style not in suppress)
            if run.kind is _RunKind.CODE and dialect.code_breaks_styles:
                styles = ()
            self._transition(styles)
            if run.kind is _RunKind.CODE:
                self._push(self._open(*dialect.code_span(run.text)))
                self._text(run.text, dialect.escape_code_span)
                self._push(CLOSE)
            elif run.kind is _RunKind.URL:
                self._text(run.text, dialect.escape_url)
            elif self._at_line_start and not styles and dialect.escape_line_starts:
                self._escaped_line_start(run.text)
            else:
                in_link = any(isinstance(style, tuple) for style in styles)
                self._text(run.text, dialect.escape_link_text if in_link else dialect.escape_text)
            self._at_line_start = False
        self._transition(())

    def _escaped_line_start(self, text: str) -> None:
        marker = _LINE_START_MARKER.match(text)
        if marker is None:
            self._text(text, self._dialect.escape_text)
            return
        digits = marker.group(1) or ""
        if digits:
            self._text(digits, self._dialect.escape_text)
        self._push(Atom("\\", ""))
        self._text(text[len(digits) :], self._dialect.escape_text)

    def _newline(self) -> None:
        # Every platform gets its styles closed at a line end: Slack's markers do not span lines and a
        # quote's per-line prefix must sit outside them.
        self._transition(())
        if self._quote_line is None:
            self._push(Sep("\n", BreakPriority.LINE))
        else:
            self._push(CLOSE, Sep("\n", BreakPriority.LINE), self._quote_line)
        self._at_line_start = True

    def _transition(self, wanted: tuple[StyleKey, ...]) -> None:
        current = self._styles
        if current == wanted:
            return
        common = 0
        while common < min(len(current), len(wanted)) and current[common] == wanted[common]:
            common += 1
        if len(current) > common:
            self._push(*(CLOSE for _ in range(len(current) - common)))
        for key in wanted[common:]:
            if isinstance(key, tuple):
                _, url, show_url = key
                self._push(self._open(*self._dialect.link(url), "", f" ({url})" if show_url else ""))
            else:
                self._push(self._open(*self._dialect.styles[key]))
        self._styles = wanted


def _emit(markdown: str, dialect: _Dialect) -> list[Token]:
    emitter = _Emitter(dialect)
    emitter.document(_parse_blocks(sanitize(markdown)))
    return emitter.tokens


# --- Public API -------------------------------------------------------------------------------------------


def render_tokens(markdown: str, platform: Platform) -> list[Token]:
    """The token stream of ``markdown`` in ``platform``'s markup (plain text for the terminal)."""
    return _emit(markdown, _DIALECTS[platform])


def markdown_tokens(markdown: str) -> list[Token]:
    """The token stream of ``markdown`` re-emitted as normalized CommonMark."""
    return _emit(markdown, _MARKDOWN)


def to_telegram_html(markdown: str) -> str:
    """Telegram HTML parse mode: only b, i, s, code, pre, a and blockquote, always balanced."""
    return join_tokens(render_tokens(markdown, Platform.TELEGRAM)).markup


def to_slack_mrkdwn(markdown: str) -> str:
    return join_tokens(render_tokens(markdown, Platform.SLACK)).markup


def to_discord_markdown(markdown: str) -> str:
    return join_tokens(render_tokens(markdown, Platform.DISCORD)).markup


def to_plain(markdown: str) -> str:
    """No markup at all: styles dropped, links as ``text (url)``, bullets as •, quotes as ``> ``."""
    return join_tokens(render_tokens(markdown, Platform.TERMINAL)).plain
