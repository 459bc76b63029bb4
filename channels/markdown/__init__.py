"""Markdown as any platform shows it: parsed once, emitted in a dialect, cut to a limit. Names no platform.

The model writes Markdown. A platform package gives its dialect (how its markup writes each element) and
its limit (a :class:`MessageFormat`); this package parses the Markdown (``inline``, ``blocks``), emits the
dialect's token stream (``emit``, ``tokens``) and cuts it into chunks each valid on its own (``chunking``).
"""

from channels.markdown.chunking import (
    MIN_CHUNK_LIMIT,
    Measure,
    MessageFormat,
    render_chunks,
    split_markdown,
    split_tokens,
    utf16_len,
    with_attachment,
)
from channels.markdown.dialect import Dialect
from channels.markdown.emit import markdown_tokens, render, render_tokens, to_plain
from channels.markdown.sanitize import sanitize

__all__ = [
    "MIN_CHUNK_LIMIT",
    "Dialect",
    "Measure",
    "MessageFormat",
    "markdown_tokens",
    "render",
    "render_chunks",
    "render_tokens",
    "sanitize",
    "split_markdown",
    "split_tokens",
    "to_plain",
    "utf16_len",
    "with_attachment",
]
