"""The terminal's formatting: plain text, and a length no reply reaches; on a real terminal, styled Markdown.

Replies are written in Markdown. Piped or scripted (``printf 'hi\n' | bot.py chat``) the terminal shows them
as written, so what a script reads is the reply's own text. On an interactive terminal they are rendered
by rich (bold, code, lists, tables, links), rather than by hand: backticks and asterisks are not shown.
"""

from __future__ import annotations

import io

from channels.markdown import MessageFormat
from channels.markdown.dialect import PLAIN

# Far past any reply: a terminal takes text of any length, so this only bounds a runaway one.
MESSAGE_MAX_CHARS = 100_000

MESSAGE_FORMAT = MessageFormat(PLAIN, MESSAGE_MAX_CHARS, len, None)


def styled(markdown: str, width: int) -> str:
    """``markdown`` rendered for a colour terminal ``width`` columns wide, without a trailing newline."""
    from rich.console import Console
    from rich.markdown import Markdown

    out = io.StringIO()
    console = Console(file=out, width=max(20, width), force_terminal=True, color_system="standard",
                      highlight=False, emoji=False)
    console.print(Markdown(markdown, hyperlinks=False))
    return out.getvalue().rstrip("\n")
