"""Markdown emitted as a dialect's token stream: parse once, then write each block and run in its markup.

Odd Markdown is never "fixed" into markup: a delimiter with no partner, a link that does not parse or a
URL the dialect would refuse renders as literal, escaped text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from channels.markdown.blocks import BULLETS, Block, CodeBlock, Heading, ListItem, Paragraph, Rule, parse_blocks
from channels.markdown.dialect import COMMONMARK, PLAIN, PLAIN_BULLET, PLAIN_QUOTE, PLAIN_RULE, Dialect, identity
from channels.markdown.inline import Inline
from channels.markdown.runs import RunKind, StyleKey, flatten
from channels.markdown.sanitize import sanitize
from channels.markdown.tokens import CLOSE, Atom, BreakPriority, Open, Sep, Text, Token, join_tokens

# A line of text that Markdown would read as a block marker: "# x", "> x", "- x", "-# x", "1. x".
_LINE_START_MARKER = re.compile(r"#{1,6}(?:\s|$)|>|[-+](?:\s|#|$)|(\d{1,9})[.)](?:\s|$)")


class _Emitter:
    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._tokens: list[Token] = []
        self._pending: list[str] = []  # text not yet emitted, merged into one Text token
        self._pending_escape: Callable[[str], str] = identity
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

    def document(self, blocks: Sequence[tuple[bool, Block]]) -> None:
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
            self._push(self._atom(self._dialect.quote_line.rstrip(), PLAIN_QUOTE.rstrip()))
        self._push(Sep("\n", BreakPriority.BLOCK))
        self._push(self._quote_line)

    def _block(self, block: Block) -> None:
        dialect = self._dialect
        self._at_line_start = True
        if isinstance(block, Paragraph):
            self._inlines(block.inlines)
        elif isinstance(block, Heading):
            prefix, opening, closing, drop_bold = dialect.heading(block.level)
            if prefix:
                self._push(self._atom(prefix, ""))
            self._push(self._open(opening, closing))
            self._inlines(block.inlines, suppress=frozenset({"b"}) if drop_bold else frozenset())
            self._push(CLOSE)
        elif isinstance(block, ListItem):
            bullet = block.marker in BULLETS
            markup = f"{block.indent}{dialect.bullet if bullet else block.marker} "
            self._push(self._atom(markup, f"{block.indent}{PLAIN_BULLET if bullet else block.marker} "))
            self._at_line_start = False
            self._inlines(block.inlines)
        elif isinstance(block, Rule):
            self._push(self._atom(dialect.rule, PLAIN_RULE))
        elif isinstance(block, CodeBlock):
            self._push(self._open(*dialect.code_block(block.language, block.lines)))
            for index, line in enumerate(block.lines):
                if index:
                    self._push(Sep("\n", BreakPriority.LINE))
                if line:
                    self._text(line, dialect.escape_code_block)
            self._push(CLOSE)
        else:
            self._push(self._open(*dialect.quote_wrap))
            self._quote_line = self._open(dialect.quote_line, "", PLAIN_QUOTE, "")
            self._push(self._quote_line)
            self.document(block.blocks)
            self._push(CLOSE)
            self._quote_line = None
            self._push(CLOSE)

    def _inlines(self, nodes: Sequence[Inline], suppress: frozenset[str] = frozenset()) -> None:
        dialect = self._dialect
        runs = flatten(nodes, link_supported=dialect.link_supported, links_hold_styles=dialect.links_hold_styles)
        for run in runs:
            if run.kind is RunKind.NEWLINE:
                self._newline()
                continue
            styles = tuple(style for style in run.styles if style not in suppress)
            if run.kind is RunKind.CODE and dialect.code_breaks_styles:
                styles = ()
            self._transition(styles)
            if run.kind is RunKind.CODE:
                self._push(self._open(*dialect.code_span(run.text)))
                self._text(run.text, dialect.escape_code_span)
                self._push(CLOSE)
            elif run.kind is RunKind.URL:
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
        # Styles close at every line end, in every dialect: some dialects' markers do not span lines,
        # and a quote's per-line prefix must sit outside them.
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


def render_tokens(markdown: str, dialect: Dialect) -> list[Token]:
    """The token stream of ``markdown`` in ``dialect``'s markup."""
    emitter = _Emitter(dialect)
    emitter.document(parse_blocks(sanitize(markdown)))
    return emitter.tokens


def render(markdown: str, dialect: Dialect) -> str:
    """``markdown`` in ``dialect``'s markup, whole (uncut), every element it opens closed."""
    return join_tokens(render_tokens(markdown, dialect)).markup


def markdown_tokens(markdown: str) -> list[Token]:
    """The token stream of ``markdown`` re-emitted as normalized CommonMark."""
    return render_tokens(markdown, COMMONMARK)


def to_plain(markdown: str) -> str:
    """No markup at all: styles dropped, links as ``text (url)``, bullets as •, quotes as ``> ``."""
    return join_tokens(render_tokens(markdown, PLAIN)).plain
