"""Slack's formatting: mrkdwn as a Markdown dialect, and how long a message may be."""

from __future__ import annotations

from dataclasses import replace

from channels.markdown import Dialect, MessageFormat, render, render_chunks
from channels.markdown.dialect import PLAIN_RULE, escape_html, is_web_url
from channels.slack.translate import SECTION_TEXT_MAX_CHARS
from ground.types import OutboundMessage, RenderedChunk

# Under the 4,000 characters Slack shows of a message before it truncates it.
MESSAGE_MAX_CHARS = 3_900

# Styles are single markers that do not span lines, and a link's label shows no formatting.
DIALECT = Dialect(
    escape_text=escape_html,
    escape_link_text=escape_html,
    escape_url=escape_html,
    escape_code_span=escape_html,
    escape_code_block=escape_html,
    styles={"b": ("*", "*"), "i": ("_", "_"), "s": ("~", "~")},
    link=lambda url: (
        "<" + url.replace("&", "&amp;").replace("<", "%3C").replace(">", "%3E").replace("|", "%7C") + "|",
        ">",
    ),
    link_supported=lambda url: is_web_url(url) or url.lower().startswith("mailto:"),
    code_span=lambda content: ("`", "`"),
    code_block=lambda language, lines: ("```\n", "\n```"),
    heading=lambda level: ("", "*", "*", True),
    quote_wrap=("", ""),
    quote_line="> ",
    bullet="•",
    rule=PLAIN_RULE,
    links_hold_styles=False,
)

MESSAGE_FORMAT = MessageFormat(DIALECT, MESSAGE_MAX_CHARS, len, None)


def to_slack_mrkdwn(markdown: str) -> str:
    return render(markdown, DIALECT)


def chunk_limit(message: OutboundMessage) -> int:
    """Characters per chunk: buttons put the last chunk in a Block Kit section, which holds fewer."""
    return min(MESSAGE_MAX_CHARS, SECTION_TEXT_MAX_CHARS) if message.buttons else MESSAGE_MAX_CHARS


def text_chunks(message: OutboundMessage) -> list[RenderedChunk]:
    """The message's text as Slack mrkdwn, cut so every chunk is valid on its own (deterministic)."""
    return render_chunks(message.text, replace(MESSAGE_FORMAT, limit=chunk_limit(message)))
