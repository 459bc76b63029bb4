"""Cut a rendered message into chunks within a platform's limit, every chunk valid on its own.

The cut works on the formatted token stream (see :mod:`channels.markdown.tokens`), so lengths are measured
after formatting and escaping, with the platform's own measure. A chunk ends at the best break it can
reach (paragraph, then block, line, word, and only then a hard cut that splits no character cluster);
whatever is open there (a code block, a bold span, a link, a quote line) is closed at the end of the chunk
and reopened at the start of the next, and the limit counts that markup too. The plain twin of each chunk
is cut at the same place and held to the same limit. The last chunk says so (``RenderedChunk.last``), so
a channel puts what rides on the end of a message (buttons) there without counting chunks again.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from channels.markdown.dialect import Dialect
from channels.markdown.emit import markdown_tokens, render_tokens
from channels.markdown.tokens import Atom, BreakPriority, Close, Open, Sep, Text, Token, join_tokens
from ground.types import OutboundMessage, RenderedChunk

# The smallest limit a split accepts, a safety floor rather than a tunable: room for any one escaped
# character ("&amp;", a surrogate pair) once every markup that does not fit has been dropped.
MIN_CHUNK_LIMIT = 16
# How far a hard cut may step back to avoid splitting an emoji sequence or a letter from its accents.
CLUSTER_BACKOFF_CHARS = 32

Measure = Callable[[str], int]


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units: a character outside the Basic Multilingual Plane counts 2."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


@dataclass(frozen=True, slots=True)
class MessageFormat:
    """What a platform's messages look like: its Markdown dialect and how long one message may be."""

    dialect: Dialect
    limit: int  # the most one message may hold, counted by ``measure``
    measure: Measure  # ``len`` (code points) or :func:`utf16_len`
    parse_mode: str | None  # what the platform is told the markup is, where it asks


def render_chunks(markdown: str, message_format: MessageFormat) -> list[RenderedChunk]:
    """The message in ``message_format`` cut to its limit; empty or blank text gives no chunks."""
    tokens = render_tokens(markdown, message_format.dialect)
    pieces = split_tokens(tokens, message_format.limit, message_format.measure)
    return [RenderedChunk(markup, message_format.parse_mode, plain, last=index == len(pieces) - 1,
                          buttons=index == len(pieces) - 1)
            for index, (markup, plain) in enumerate(pieces)]


def with_attachment(chunks: list[RenderedChunk], message: OutboundMessage, *,
                    file_takes_buttons: bool = True) -> list[RenderedChunk]:
    """``chunks``, then for a message carrying a file one more chunk: the file, its name as its text.

    The file's chunk is then the last one. It carries the buttons where the platform can attach them to a file
    (``file_takes_buttons``); elsewhere the last text chunk keeps them, so they are never lost.
    """
    if message.attachment_bytes is None:
        return chunks
    name = message.attachment_name or "attachment"
    text = [replace(chunk, last=False, buttons=chunk.buttons and not file_takes_buttons) for chunk in chunks]
    return [*text, RenderedChunk(name, None, name, last=True, buttons=file_takes_buttons or not chunks)]


def split_markdown(markdown: str, limit: int, measure: Measure) -> list[str]:
    """Markdown cut into self-contained Markdown pieces, each with ``measure(piece) <= limit``.

    The pieces are normalized CommonMark (escapes made explicit); a fenced code block cut in two is
    closed at the end of one piece and reopened, with its language, at the start of the next.
    """
    return [markup for markup, _ in split_tokens(markdown_tokens(markdown), limit, measure)]


def split_tokens(tokens: Sequence[Token], limit: int, measure: Measure) -> list[tuple[str, str]]:
    """(markup, plain) chunks of a token stream; both are held to ``limit``.

    ``measure`` must add up over concatenation and count every character at least 1 (``len`` and
    :func:`utf16_len` do).
    """
    if limit < MIN_CHUNK_LIMIT:
        raise ValueError(f"chunk limit {limit} is below {MIN_CHUNK_LIMIT}")
    return _Splitter(tokens, limit, measure).run()


@dataclass(frozen=True, slots=True)
class _Pos:
    index: int  # token index
    offset: int = 0  # character offset inside a Text token


@dataclass(frozen=True, slots=True)
class _Cut:
    end: _Pos  # the chunk holds everything before this
    resume: _Pos  # the next chunk starts here, past the dropped separator
    stack: tuple[Open, ...]  # what is open at the cut, to close now and reopen next


@dataclass(frozen=True, slots=True)
class _Overflow:
    index: int  # the token that did not fit


class _Splitter:
    def __init__(self, tokens: Sequence[Token], limit: int, measure: Measure) -> None:
        self._tokens = list(tokens)
        self._limit = limit
        self._measure = measure

    def run(self) -> list[tuple[str, str]]:
        chunks: list[tuple[str, str]] = []
        pos, carry = _Pos(0), ()
        while True:
            pos, carry = self._skip_leading(pos, carry)
            if pos.index >= len(self._tokens):
                return chunks
            outcome = self._scan(pos, carry)
            if isinstance(outcome, _Overflow):
                carry = self._degrade(pos, carry, outcome.index)
                continue
            joined = join_tokens(self._slice(pos, outcome.end), carry)
            if joined.visible:
                chunks.append((joined.markup, joined.plain))
            pos, carry = outcome.resume, outcome.stack

    def _skip_leading(self, pos: _Pos, carry: tuple[Open, ...]) -> tuple[_Pos, tuple[Open, ...]]:
        """Separators at the very start of a chunk are whitespace at a split point: drop them."""
        index, offset = pos.index, pos.offset
        while index < len(self._tokens):
            token = self._tokens[index]
            if isinstance(token, Sep):
                pass
            elif isinstance(token, Close) and carry:
                carry = carry[:-1]
            elif isinstance(token, Text) and offset >= len(token.raw):
                pass
            else:
                break
            index, offset = index + 1, 0
        return _Pos(index, offset), carry

    def _scan(self, pos: _Pos, carry: tuple[Open, ...]) -> _Cut | _Overflow:
        """The best cut for a chunk starting at ``pos``, or the token that left no room for any content.

        ``free_*`` is what the chunk has left once everything open is closed: opening an element
        reserves its closing markup at once, so closing it later costs nothing more.
        """
        measure, tokens = self._measure, self._tokens
        stack = carry
        free_markup = self._limit - sum(measure(o.markup) + measure(o.close) for o in stack)
        free_plain = self._limit - sum(measure(o.plain) + measure(o.plain_close) for o in stack)
        best: dict[int, _Cut] = {}
        content = False
        index = pos.index
        while index < len(tokens):
            token = tokens[index]
            if isinstance(token, Text):
                raw = token.raw
                start = pos.offset if index == pos.index else 0
                # Every character measures at least 1, so no more than `room` characters can fit.
                room = max(0, min(free_markup, free_plain))
                if len(raw) - start <= room:
                    piece = raw[start:] if start else raw
                    cost_markup, cost_plain = measure(token.escape(piece)), measure(piece)
                    if cost_markup <= free_markup and cost_plain <= free_plain:
                        _note_blank(best, raw, start, len(raw), index, stack, content)
                        free_markup -= cost_markup
                        free_plain -= cost_plain
                        content = content or _shows(piece)
                        index += 1
                        continue
                fit = self._longest_fit(token, start, min(len(raw) - start, room), free_markup, free_plain)
                _note_blank(best, raw, start, min(start + fit + 1, len(raw)), index, stack, content)
                hard = _cluster_safe_cut(raw, start, start + fit)
                if hard > start and (content or _shows(raw[start:hard])):
                    best.setdefault(BreakPriority.HARD, _Cut(_Pos(index, hard), _Pos(index, hard), stack))
                break
            if isinstance(token, Sep):
                if content:
                    best[token.priority] = _Cut(_Pos(index), _Pos(index + 1), stack)
                cost = measure(token.text)
                if cost > free_markup or cost > free_plain:
                    break
                free_markup -= cost
                free_plain -= cost
            elif isinstance(token, Open):
                cost_markup = measure(token.markup) + measure(token.close)
                cost_plain = measure(token.plain) + measure(token.plain_close)
                if cost_markup > free_markup or cost_plain > free_plain:
                    break
                free_markup -= cost_markup
                free_plain -= cost_plain
                stack = (*stack, token)
            elif isinstance(token, Close):
                stack = stack[:-1]
            else:
                cost_markup, cost_plain = measure(token.markup), measure(token.plain)
                if cost_markup > free_markup or cost_plain > free_plain:
                    break
                free_markup -= cost_markup
                free_plain -= cost_plain
                content = content or _shows(token.markup)
            index += 1
        else:
            return _Cut(_Pos(len(tokens)), _Pos(len(tokens)), stack)
        if content:
            # Between two tokens (or where a text stopped fitting) is always a valid, if unlovely, cut.
            here = _Pos(index, pos.offset if index == pos.index else 0)
            best.setdefault(BreakPriority.HARD, _Cut(here, here, stack))
        if not best:
            return _Overflow(index)
        return best[min(best)]

    def _longest_fit(self, token: Text, start: int, upper: int, room_markup: int, room_plain: int) -> int:
        """The most characters of ``token`` from ``start`` (at most ``upper``) that fit both rooms."""
        measure = self._measure
        low, high = 0, upper
        while low < high:
            middle = (low + high + 1) // 2
            piece = token.raw[start : start + middle]
            if measure(token.escape(piece)) <= room_markup and measure(piece) <= room_plain:
                low = middle
            else:
                high = middle - 1
        return low

    def _slice(self, start: _Pos, end: _Pos) -> list[Token]:
        """The tokens from ``start`` to ``end``, with partial Text tokens trimmed to their slice."""
        out: list[Token] = []
        for index in range(start.index, min(end.index + 1, len(self._tokens))):
            token = self._tokens[index]
            if index == end.index and (not isinstance(token, Text) or end.offset == 0):
                break
            if isinstance(token, Text):
                begin = start.offset if index == start.index else 0
                finish = end.offset if index == end.index else len(token.raw)
                out.append(Text(token.raw[begin:finish], token.escape))
            else:
                out.append(token)
        return out

    def _degrade(self, pos: _Pos, carry: tuple[Open, ...], overflow: int) -> tuple[Open, ...]:
        """Nothing fits: give up the most expendable markup in reach, keeping every visible character.

        First an element's platform markup gives way to its plain form, then the plain form to nothing,
        then an atom becomes ordinary text. Each step removes markup for good, so this ends.
        """
        reach = range(pos.index, min(overflow + 1, len(self._tokens)))
        for strip_plain in (False, True):
            for depth, opened in enumerate(carry):
                lighter = _lighter(opened, strip_plain=strip_plain)
                if lighter is not None:
                    return (*carry[:depth], lighter, *carry[depth + 1 :])
            for index in reach:
                token = self._tokens[index]
                if isinstance(token, Open) and (lighter := _lighter(token, strip_plain=strip_plain)) is not None:
                    self._tokens[index] = lighter
                    return carry
                if isinstance(token, Atom) and (token.markup or token.plain):
                    self._tokens[index] = Text(token.markup, _keep)
                    return carry
        raise RuntimeError("no markup left to drop, yet nothing fits")  # unreachable for limit >= MIN


def _note_blank(
    best: dict[int, _Cut], raw: str, start: int, end: int, index: int, stack: tuple[Open, ...], content: bool
) -> None:
    """Remember the last space or tab in ``raw[start:end]`` as a word break (the blank is dropped)."""
    blank = max(raw.rfind(" ", start, end), raw.rfind("\t", start, end))
    if blank >= start and (content or _shows(raw[start:blank])):
        best[BreakPriority.WORD] = _Cut(_Pos(index, blank), _Pos(index, blank + 1), stack)


def _shows(text: str) -> bool:
    return bool(text) and not text.isspace()


def _keep(text: str) -> str:
    return text


def _lighter(opened: Open, *, strip_plain: bool) -> Open | None:
    if not strip_plain:
        if opened.markup != opened.plain or opened.close != opened.plain_close:
            return Open(opened.plain, opened.plain_close, opened.plain, opened.plain_close)
        return None
    if opened.markup or opened.close or opened.plain or opened.plain_close:
        return Open("", "")
    return None


_ZWJ = "\u200d"


def _cluster_safe_cut(raw: str, start: int, cut: int) -> int:
    """``cut`` moved back, if need be, so it splits no emoji sequence or accented letter."""
    candidate = cut
    floor = max(start + 1, cut - CLUSTER_BACKOFF_CHARS)
    while candidate >= floor and _joins(raw, candidate):
        candidate -= 1
    return candidate if candidate >= floor else cut


def _joins(raw: str, cut: int) -> bool:
    if cut <= 0 or cut >= len(raw):
        return False
    before, after = raw[cut - 1], raw[cut]
    code = ord(after)
    if before == _ZWJ or after == _ZWJ:
        return True
    if unicodedata.category(after) in ("Mn", "Mc", "Me"):
        return True
    if 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF:  # variation selectors
        return True
    if 0x1F3FB <= code <= 0x1F3FF or 0xE0020 <= code <= 0xE007F:  # skin tones, flag tags
        return True
    if _is_regional(before) and _is_regional(after):
        run = 0
        while cut - 1 - run >= 0 and _is_regional(raw[cut - 1 - run]) and run < CLUSTER_BACKOFF_CHARS:
            run += 1
        return run % 2 == 1  # the cut would split a flag's pair of letters
    return False


def _is_regional(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF
