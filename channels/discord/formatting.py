"""Discord's formatting: its Markdown as a dialect, and how long a message may be."""

from __future__ import annotations

from channels.markdown import Dialect, MessageFormat, render
from channels.markdown.dialect import (
    PLAIN_RULE,
    escape_markdown,
    identity,
    is_web_url,
    markdown_code_span,
    url_for_markdown,
)

# A message's content may hold this many characters; Discord counts code points.
MESSAGE_MAX_CHARS = 2_000


def _escape_code_block(text: str) -> str:
    # Discord ends a code block at the first ``` whatever the fence length; a zero-width space keeps
    # the backticks visible without closing the block.
    return text.replace("```", "``\u200b`")


def _heading(level: int) -> tuple[str, str, str, bool]:
    if level <= 3:  # Discord renders only #, ## and ###
        return "#" * level + " ", "", "", False
    return "", "**", "**", True


DIALECT = Dialect(
    escape_text=escape_markdown,
    escape_link_text=escape_markdown,
    escape_url=identity,
    escape_code_span=identity,
    escape_code_block=_escape_code_block,
    styles={"b": ("**", "**"), "i": ("*", "*"), "s": ("~~", "~~")},
    link=lambda url: ("[", f"]({url_for_markdown(url)})"),
    link_supported=is_web_url,
    code_span=markdown_code_span,
    code_block=lambda language, lines: (f"```{language}\n", "\n```"),
    heading=_heading,
    quote_wrap=("", ""),
    quote_line="> ",
    bullet="-",
    rule=PLAIN_RULE,
    escape_line_starts=True,
)

MESSAGE_FORMAT = MessageFormat(DIALECT, MESSAGE_MAX_CHARS, len, None)


def to_discord_markdown(markdown: str) -> str:
    return render(markdown, DIALECT)
