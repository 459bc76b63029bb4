"""Markdown's blocks: paragraphs, headings, list items, rules, fenced code and quotes, each holding inlines.

A block remembers whether a blank line came before it, which is where a chunk would best end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from channels.markdown.inline import Inline, parse_inline


@dataclass(frozen=True, slots=True)
class Paragraph:
    inlines: tuple[Inline, ...]


@dataclass(frozen=True, slots=True)
class Heading:
    level: int
    inlines: tuple[Inline, ...]


@dataclass(frozen=True, slots=True)
class ListItem:
    indent: str
    marker: str
    inlines: tuple[Inline, ...]


@dataclass(frozen=True, slots=True)
class Rule:
    pass


@dataclass(frozen=True, slots=True)
class CodeBlock:
    language: str
    lines: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Quote:
    blocks: tuple[tuple[bool, Block], ...]


Block = Paragraph | Heading | ListItem | Rule | CodeBlock | Quote

_LIST_ITEM = re.compile(r"([ \t]*)([-*+•]|\d{1,9}[.)])[ \t]+(\S.*)")
_HEADING_OPEN = re.compile(r" {0,3}(#{1,6})(?:[ \t]|$)")
_LANGUAGE = re.compile(r"[A-Za-z0-9_+#.-]{1,32}")
BULLETS = frozenset("-*+•")
_BLOCK_START_CHARS = frozenset("`~#>-*_+•0123456789")


def parse_blocks(text: str, *, nested: bool = False) -> tuple[tuple[bool, Block], ...]:
    """Blocks with, for each, whether a blank line came before it (a paragraph break)."""
    lines = text.split("\n")
    blocks: list[tuple[bool, Block]] = []
    gap = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            gap = bool(blocks)
            i += 1
            continue
        block: Block
        fence = None if nested else _fence_open(line)
        if fence is not None:
            indent, char, length, language = fence
            body: list[str] = []
            i += 1
            while i < len(lines) and not _is_fence_close(lines[i], char, length):
                body.append(_strip_indent(lines[i], indent))
                i += 1
            i += 1
            block = CodeBlock(language, tuple(body))
        elif (heading := _heading(line)) is not None:
            i += 1
            if not heading[1]:
                continue
            block = Heading(heading[0], parse_inline(heading[1]))
        elif _is_rule(line):
            i += 1
            block = Rule()
        elif not nested and (quoted := _quote_content(line)) is not None:
            inner: list[str] = []
            while i < len(lines) and (quoted := _quote_content(lines[i])) is not None:
                inner.append(quoted)
                i += 1
            block = Quote(parse_blocks("\n".join(inner), nested=True))
            if not block.blocks:
                continue
        else:
            item = _LIST_ITEM.fullmatch(line)
            parts = [item.group(3).rstrip() if item else line.rstrip()]
            i += 1
            while i < len(lines) and lines[i].strip() and not _starts_block(lines[i], nested=nested):
                parts.append(lines[i].strip() if item else lines[i].rstrip())
                i += 1
            inlines = parse_inline("\n".join(parts))
            block = ListItem(item.group(1), item.group(2), inlines) if item else Paragraph(inlines)
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

