"""Telegram's formatting: the HTML parse mode as a Markdown dialect, and how long a message may be."""

from __future__ import annotations

from collections.abc import Sequence

from channels.markdown import Dialect, MessageFormat, render, utf16_len
from channels.markdown.dialect import PLAIN_RULE, escape_html, escape_html_attribute, is_web_url

# A message's text may hold this many UTF-16 code units (a character outside the BMP counts 2).
MESSAGE_MAX_UTF16 = 4_096


def _code_block(language: str, lines: Sequence[str]) -> tuple[str, str]:
    if language:
        return f'<pre><code class="language-{escape_html_attribute(language)}">', "</code></pre>"
    return "<pre>", "</pre>"


# Only b, i, s, code, pre, a and blockquote, always balanced; code may not sit inside a style or a link.
DIALECT = Dialect(
    escape_text=escape_html,
    escape_link_text=escape_html,
    escape_url=escape_html,
    escape_code_span=escape_html,
    escape_code_block=escape_html,
    styles={"b": ("<b>", "</b>"), "i": ("<i>", "</i>"), "s": ("<s>", "</s>")},
    link=lambda url: (f'<a href="{escape_html_attribute(url)}">', "</a>"),
    link_supported=lambda url: is_web_url(url) or url.lower().startswith("tg://"),
    code_span=lambda content: ("<code>", "</code>"),
    code_block=_code_block,
    heading=lambda level: ("", "<b>", "</b>", True),
    quote_wrap=("<blockquote>", "</blockquote>"),
    quote_line="",
    bullet="•",
    rule=PLAIN_RULE,
    code_breaks_styles=True,
)

MESSAGE_FORMAT = MessageFormat(DIALECT, MESSAGE_MAX_UTF16, utf16_len, "HTML")


def to_telegram_html(markdown: str) -> str:
    """Telegram HTML parse mode: only b, i, s, code, pre, a and blockquote, always balanced."""
    return render(markdown, DIALECT)
