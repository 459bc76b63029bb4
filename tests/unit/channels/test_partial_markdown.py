"""A reply still being written, as a preview shows it: every prefix renders to well-formed platform markup, and
what it shows is always the start of what the finished reply shows (nothing flashes up and vanishes)."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from channels.markdown.chunking import render_chunks
from channels.markdown.partial import settled
from channels.telegram.formatting import MESSAGE_FORMAT

REPLIES = [
    "Here is **the plan** for _Monday_:\n\n1. Call [Ola](https://example.com/ola) about `the cello`.\n"
    "2. Book ~~Sopot~~ Gdańsk & <tickets>.\n\n```python\nprint('a < b')\n```\nDone.",
    "A *quick* note: snake_case_names stay, 2*3 = 6, and __this__ is bold.\n\n- one\n- two with `x < y`",
    "Zażółć **gęślą** jaźń — 東京 and [a link](https://example.com/a_b) ~~then~~ now.\n~~~\nraw ~~~ text\n~~~",
]


class _Markup(HTMLParser):
    """The visible text of Telegram HTML, failing on an unbalanced or stray tag."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: object) -> None:
        self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open.pop() == tag, f"unbalanced </{tag}>"

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def visible(markdown: str) -> str:
    shown = []
    for chunk in render_chunks(markdown, MESSAGE_FORMAT):
        parser = _Markup()
        parser.feed(chunk.text)
        parser.close()
        assert not parser.open, f"unclosed {parser.open} in {chunk.text!r}"
        shown.append("".join(parser.text))
    return "".join(shown)


@pytest.mark.parametrize("reply", REPLIES)
def test_every_prefix_shows_only_the_start_of_the_finished_reply(reply: str) -> None:
    final = visible(reply)
    for end in range(1, len(reply) + 1):
        shown = visible(settled(reply[:end]))
        assert final.startswith(shown.rstrip()), (reply[:end], shown)
    assert settled(reply) == reply


@pytest.mark.parametrize(("partial", "shown"), [
    ("Hello **bol", "Hello"),
    ("Hello **bold** and `co", "Hello **bold** and"),
    ("see [the docs](http://ex", "see"),
    ("see [the docs]", "see"),
    ("x ~~gone", "x"),
    ("an _ital", "an"),
    ("trailing *", "trailing"),
    ("it's 2*3 and snake_case", "it's 2*3 and snake_case"),
    ("code:\n```py\nx = 1 < 2\n``", "code:\n```py\nx = 1 < 2"),
])
def test_an_opening_not_yet_closed_is_held_back(partial: str, shown: str) -> None:
    assert settled(partial) == shown
