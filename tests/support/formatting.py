"""Checks of rendered markup that the formatting and chunking tests both apply."""

from __future__ import annotations

import re
from html.parser import HTMLParser

TELEGRAM_TAGS = {"b", "i", "u", "s", "code", "pre", "a", "blockquote"}


class TelegramHtml(HTMLParser):
    """Reads Telegram HTML the strict way: supported tags only, each closed in order, nothing left open."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.open_tags: list[str] = []
        self.parts: list[str] = []
        self.hrefs: list[str] = []
        self.code_classes: list[str] = []
        self.feed(markup)
        self.close()
        if self.open_tags:
            self.problems.append(f"left open: {self.open_tags}")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in TELEGRAM_TAGS:
            self.problems.append(f"unsupported tag <{tag}>")
        for name, value in attrs:
            if (tag, name) == ("a", "href"):
                self.hrefs.append(value or "")
            elif (tag, name) == ("code", "class") and self.open_tags[-1:] == ["pre"]:
                self.code_classes.append(value or "")
            else:
                self.problems.append(f"attribute {name} on <{tag}>")
        self.open_tags.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open_tags or self.open_tags[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.open_tags[-1:] or 'nothing'}")
            return
        self.open_tags.pop()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.problems.append(f"self-closing <{tag}/>")

    def handle_data(self, data: str) -> None:
        self.parts.append(data)

    @property
    def visible(self) -> str:
        return "".join(self.parts)


def valid_telegram(markup: str) -> TelegramHtml:
    """Assert that Telegram would accept ``markup``; returns it parsed, for checks of what it shows."""
    parsed = TelegramHtml(markup)
    assert not parsed.problems, (parsed.problems, markup[:300])
    # Telegram accepts only &lt; &gt; &amp; &quot; and numeric entities; any other "&" breaks parsing.
    assert not re.search(r"&(?!lt;|gt;|amp;|quot;|#\d+;|#x[0-9a-fA-F]+;)", markup), markup[:300]
    return parsed


def words(text: str) -> list[str]:
    """Letters and digits in order: what a reader sees whatever the markup around them."""
    return re.findall(r"[^\W_]+", text)
