"""Inline trees flattened into runs of text, each with the styles and links around it, outermost first."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from channels.markdown.inline import BareUrl, CodeSpan, Inline, Literal, Styled


class RunKind(enum.Enum):
    TEXT = enum.auto()
    CODE = enum.auto()
    URL = enum.auto()
    NEWLINE = enum.auto()


StyleKey = str | tuple[str, str, bool]  # "b" / "i" / "s", or ("a", url, show the url in plain text)


@dataclass(frozen=True, slots=True)
class Run:
    kind: RunKind
    text: str
    styles: tuple[StyleKey, ...]


def flatten(
    nodes: Sequence[Inline], *, link_supported: Callable[[str], bool], links_hold_styles: bool
) -> Iterator[Run]:
    """Runs of text with the styles around them, outermost first; iterative, so nesting depth is free."""
    stack: list[tuple[Iterator[Inline], tuple[StyleKey, ...], bool]] = [(iter(nodes), (), True)]
    while stack:
        children, styles, styling = stack[-1]
        node = next(children, None)
        if node is None:
            stack.pop()
        elif isinstance(node, Literal):
            for index, line in enumerate(node.text.split("\n")):
                if index:
                    yield Run(RunKind.NEWLINE, "", styles)
                if line:
                    yield Run(RunKind.TEXT, line, styles)
        elif isinstance(node, CodeSpan):
            yield Run(RunKind.CODE if styling else RunKind.TEXT, node.text, styles)
        elif isinstance(node, BareUrl):
            yield Run(RunKind.URL, node.url, styles)
        elif isinstance(node, Styled):
            inner = styles if not styling or node.style in styles else (*styles, node.style)
            stack.append((iter(node.children), inner, styling))
        else:
            label = node.children or (BareUrl(node.url),)
            show_url = _plain_text(label) != node.url
            if link_supported(node.url):
                key = ("a", node.url, show_url)
                stack.append((iter(label), (*styles, key), styling and links_hold_styles))
            else:
                suffix = (Literal(f" ({node.url})"),) if show_url else ()
                stack.append((iter((*label, *suffix)), styles, styling))


def _plain_text(nodes: Sequence[Inline]) -> str:
    parts: list[str] = []
    pending: list[Inline] = list(reversed(nodes))
    while pending:
        node = pending.pop()
        if isinstance(node, Literal | CodeSpan):
            parts.append(node.text)
        elif isinstance(node, BareUrl):
            parts.append(node.url)
        else:
            pending.extend(reversed(node.children))
    return "".join(parts)

