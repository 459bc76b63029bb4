"""The terminal's formatting: plain text, and a length no reply reaches.

``TerminalChannel`` shows a reply's Markdown as written; this is the plain rendering for a terminal that
should show none (styles dropped, links as ``text (url)``).
"""

from __future__ import annotations

from channels.markdown import MessageFormat
from channels.markdown.dialect import PLAIN

# Far past any reply: a terminal takes text of any length, so this only bounds a runaway one.
MESSAGE_MAX_CHARS = 100_000

MESSAGE_FORMAT = MessageFormat(PLAIN, MESSAGE_MAX_CHARS, len, None)
