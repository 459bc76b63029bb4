"""What a dialect is: how one markup writes each Markdown element, and how it escapes text.

A platform package defines its own dialect from these parts. Two dialects are neutral and live here:
``PLAIN`` (no markup at all, the twin every chunk carries) and ``COMMONMARK`` (normalized Markdown,
for cutting Markdown into Markdown).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from channels.markdown.inline import BACKTICK_RUN, LINK_DESTINATION

# How the plain twin shows a bullet, a quote line and a rule, whatever the dialect.
PLAIN_BULLET = "•"
PLAIN_QUOTE = "> "
PLAIN_RULE = "———"


@dataclass(frozen=True, slots=True)
class Dialect:
    escape_text: Callable[[str], str]
    escape_link_text: Callable[[str], str]
    escape_url: Callable[[str], str]
    escape_code_span: Callable[[str], str]
    escape_code_block: Callable[[str], str]
    styles: Mapping[str, tuple[str, str]]  # "b", "i", "s" -> (open, close)
    link: Callable[[str], tuple[str, str]]
    link_supported: Callable[[str], bool]
    code_span: Callable[[str], tuple[str, str]]
    code_block: Callable[[str, Sequence[str]], tuple[str, str]]
    heading: Callable[[int], tuple[str, str, str, bool]]  # (prefix atom, open, close, drop inner bold)
    quote_wrap: tuple[str, str]
    quote_line: str
    bullet: str
    rule: str
    code_breaks_styles: bool = False  # code may not sit inside bold, italic or a link
    links_hold_styles: bool = True  # False where a link's label shows no formatting
    escape_line_starts: bool = False  # Markdown-like dialects: a literal "# " must not become a heading
    is_plain: bool = False


# --- Escapes and markup shared by several dialects -----------------------------------------------------


def identity(text: str) -> str:
    return text


def escape_html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_html_attribute(text: str) -> str:
    return escape_html(text).replace('"', "&quot;")


_MARKDOWN_ESCAPES = str.maketrans({char: "\\" + char for char in "\\`*_~|[]"})


def escape_markdown(text: str) -> str:
    return text.translate(_MARKDOWN_ESCAPES)


def markdown_code_span(content: str) -> tuple[str, str]:
    longest = max((len(run) for run in BACKTICK_RUN.findall(content)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if content.startswith("`") or content.endswith("`") or content.startswith(" ") else ""
    return ticks + pad, pad + ticks


def markdown_code_block(language: str, lines: Sequence[str]) -> tuple[str, str]:
    longest = max((len(run) for line in lines for run in BACKTICK_RUN.findall(line)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n", f"\n{fence}"


def url_for_markdown(url: str) -> str:
    if LINK_DESTINATION.fullmatch(url):
        return url
    return url.replace(" ", "%20").replace("(", "%28").replace(")", "%29")


def is_web_url(url: str) -> bool:
    return re.match(r"https?://\S", url, re.IGNORECASE) is not None


# --- The neutral dialects ------------------------------------------------------------------------------

COMMONMARK = Dialect(
    escape_text=escape_markdown,
    escape_link_text=escape_markdown,
    escape_url=identity,
    escape_code_span=identity,
    escape_code_block=identity,
    styles={"b": ("**", "**"), "i": ("*", "*"), "s": ("~~", "~~")},
    link=lambda url: ("[", f"]({url_for_markdown(url)})"),
    link_supported=lambda url: True,
    code_span=markdown_code_span,
    code_block=markdown_code_block,
    heading=lambda level: ("#" * level + " ", "", "", False),
    quote_wrap=("", ""),
    quote_line="> ",
    bullet="-",
    rule="***",
    escape_line_starts=True,
)

PLAIN = Dialect(
    escape_text=identity,
    escape_link_text=identity,
    escape_url=identity,
    escape_code_span=identity,
    escape_code_block=identity,
    styles={"b": ("", ""), "i": ("", ""), "s": ("", "")},
    link=lambda url: ("", ""),
    link_supported=lambda url: True,
    code_span=lambda content: ("", ""),
    code_block=lambda language, lines: ("", ""),
    heading=lambda level: ("", "", "", True),
    quote_wrap=("", ""),
    quote_line=PLAIN_QUOTE,
    bullet=PLAIN_BULLET,
    rule=PLAIN_RULE,
    is_plain=True,
)
