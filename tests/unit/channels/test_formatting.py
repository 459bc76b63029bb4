"""Markdown as each platform shows it: Telegram HTML, Slack mrkdwn, Discord Markdown and plain text."""

from __future__ import annotations

import re

import pytest

from channels.discord.formatting import to_discord_markdown
from channels.markdown import sanitize, to_plain
from channels.slack.formatting import to_slack_mrkdwn
from channels.telegram.formatting import to_telegram_html
from tests.support.formatting import valid_telegram, words

# --- Telegram -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("markdown", "html"),
    [
        ("**bold** and __strong__", "<b>bold</b> and <b>strong</b>"),
        ("*italic* and _also_", "<i>italic</i> and <i>also</i>"),
        ("~~gone~~", "<s>gone</s>"),
        ("run `ls -la` now", "run <code>ls -la</code> now"),
        ("***both***", "<i><b>both</b></i>"),
        ("**bold *nested* bold**", "<b>bold <i>nested</i> bold</b>"),
        ("[docs](https://example.com/a)", '<a href="https://example.com/a">docs</a>'),
        ("# Title\nbody", "<b>Title</b>\nbody"),
        ("## **Already bold** title", "<b>Already bold title</b>"),
        ("- one\n* two\n+ three", "• one\n• two\n• three"),
        ("1. first\n2. second", "1. first\n2. second"),
        ("> wise words\n> more", "<blockquote>wise words\nmore</blockquote>"),
        ("first\n\nsecond", "first\n\nsecond"),
    ],
)
def test_markdown_becomes_telegram_html(markdown: str, html: str) -> None:
    assert to_telegram_html(markdown) == html
    valid_telegram(to_telegram_html(markdown))


def test_code_block_keeps_its_language_and_shows_markdown_inside_literally() -> None:
    html = to_telegram_html("```python\nif a < b and c > d:\n    x = **y** & z\n```")
    assert html == (
        '<pre><code class="language-python">if a &lt; b and c &gt; d:\n    x = **y** &amp; z</code></pre>'
    )
    parsed = valid_telegram(html)
    assert parsed.code_classes == ["language-python"]
    assert parsed.visible == "if a < b and c > d:\n    x = **y** & z"


def test_code_block_without_language_is_a_bare_pre() -> None:
    assert to_telegram_html("```\nplain code\n```") == "<pre>plain code</pre>"


def test_html_in_the_text_is_shown_not_obeyed() -> None:
    html = to_telegram_html("<script>alert('x')</script> & <b>not bold</b> &amp; 3 < 4 > 2")
    parsed = valid_telegram(html)
    assert "<script>" not in html and "<b>" not in html
    assert parsed.visible == "<script>alert('x')</script> & <b>not bold</b> &amp; 3 < 4 > 2"


def test_link_url_with_quote_and_ampersand_is_escaped_in_the_attribute() -> None:
    url = 'https://example.com/search?q="kith"&page=2'
    html = to_telegram_html(f"see [the results]({url})")
    assert 'href="https://example.com/search?q=&quot;kith&quot;&amp;page=2"' in html
    parsed = valid_telegram(html)
    assert parsed.hrefs == [url]
    assert parsed.visible == "see the results"


def test_link_with_a_scheme_telegram_refuses_is_plain_text() -> None:
    html = to_telegram_html("[click](javascript:alert(1)) or [mail](/relative/path)")
    parsed = valid_telegram(html)
    assert parsed.hrefs == []
    assert parsed.visible == "click (javascript:alert(1)) or mail (/relative/path)"


def test_code_span_inside_bold_closes_the_bold_around_it() -> None:
    # Telegram refuses code nested in other entities, so the bold stops and resumes around it.
    html = to_telegram_html("**run `make` first**")
    assert html == "<b>run </b><code>make</code><b> first</b>"


@pytest.mark.parametrize(
    "markdown",
    [
        "**unclosed bold",
        "*a **b* c**",
        "__init__.py and snake_case_name",
        "2 * 3 * 4 = 24",
        "[broken link](https://example.com",
        "[not a link] (https://example.com)",
        "```python\nnever closed **fence**",
        "` unmatched backtick and ``double",
        "~~~\ntilde fence\n~~~",
        "~single~ ~~~triple~~~",
        "<b>raw html</b> <i>",
        "> quote **bold\n> continues** here\n>\n> > nested",
        "***\n---\n___",
        "- [ ] task\n- [x] done",
        "**bold [link **inside**](https://e.com/x) end**",
        "![image](https://e.com/cat.png)",
        "\\*escaped\\* \\_too\\_ \\\\ back",
        "a\\\nb",
        "# \n##\n###### deep heading ######",
        "| a | b |\n|---|---|\n| 1 | 2 |",
        "_*mixed_* *_mixed*_",
        "**" * 50 + "x" + "*" * 33,
        "[" * 40 + "x" + "]" * 40 + "(https://e.com)",
        "`" * 7 + "code" + "`" * 7,
        "https://example.com/path_with_underscores_(and_parens)?a=1&b=2.",
        "👨‍👩‍👧‍👦 **família** e\u0301 \u200f\u05e9\u05dc\u05d5\u05dd\u200e *טקסט*",
    ],
)
def test_odd_markdown_always_gives_balanced_html_and_keeps_every_word(markdown: str) -> None:
    parsed = valid_telegram(to_telegram_html(markdown))
    shown = set(words(" ".join([parsed.visible, *parsed.hrefs, *parsed.code_classes])))
    assert set(words(markdown)) <= shown
    assert set(words(to_plain(markdown))) <= shown


def test_underscores_inside_words_are_not_italics() -> None:
    assert to_telegram_html("call my_func_name now") == "call my_func_name now"


def test_bare_urls_are_left_whole() -> None:
    html = to_telegram_html("see https://example.com/a_b_c?x=1&y=2.")
    assert html == "see https://example.com/a_b_c?x=1&amp;y=2."


# --- Slack ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        ("**bold** *it* ~~gone~~", "*bold* _it_ ~gone~"),
        ("[docs](https://example.com/?a=1&b=2)", "<https://example.com/?a=1&amp;b=2|docs>"),
        ("# Title", "*Title*"),
        ("- item", "• item"),
        ("> quoted\n> twice", "> quoted\n> twice"),
        ("use `x < y`", "use `x &lt; y`"),
        ("```js\nif (a && b) {}\n```", "```\nif (a &amp;&amp; b) {}\n```"),
    ],
)
def test_markdown_becomes_slack_mrkdwn(markdown: str, mrkdwn: str) -> None:
    assert to_slack_mrkdwn(markdown) == mrkdwn


def test_slack_text_cannot_smuggle_a_mention_or_link() -> None:
    mrkdwn = to_slack_mrkdwn("hi <!channel> and <@U123> & <https://evil.example|totally safe>")
    assert "<" not in mrkdwn and ">" not in mrkdwn
    assert mrkdwn == (
        "hi &lt;!channel&gt; and &lt;@U123&gt; &amp; &lt;https://evil.example|totally safe&gt;"
    )


def test_slack_link_label_is_plain_and_url_cannot_break_out() -> None:
    mrkdwn = to_slack_mrkdwn("[**the** docs](https://e.com/a|b>c)")
    assert mrkdwn == "<https://e.com/a%7Cb%3Ec|the docs>"


def test_slack_bold_spanning_lines_is_closed_on_each_line() -> None:
    assert to_slack_mrkdwn("**one\ntwo**") == "*one*\n*two*"


# --- Discord -------------------------------------------------------------------------------------------


def test_discord_keeps_markdown_and_escapes_what_was_literal() -> None:
    markdown = "## Plan\n**bold** *it* ~~gone~~ `code` [docs](https://e.com)\n- item\n> quote"
    assert to_discord_markdown(markdown) == markdown
    assert to_discord_markdown("2 * 3 * 4 and snake_case") == "2 \\* 3 \\* 4 and snake\\_case"


def test_discord_code_block_keeps_language_and_cannot_be_closed_early() -> None:
    rendered = to_discord_markdown("````md\n```\ninner\n```\n````")
    assert rendered.startswith("```md\n") and rendered.endswith("\n```")
    assert rendered.count("```") == 2  # the inner fences no longer read as fences


def test_discord_rendering_reads_back_as_the_same_text() -> None:
    markdown = "# Hi\n\n**a** _b_ 2*3 `c*d` \\# not a heading [x](https://e.com/a_(b)) snake_case"
    assert to_plain(to_discord_markdown(markdown)) == to_plain(markdown)


# --- Plain text ----------------------------------------------------------------------------------------


def test_plain_text_has_no_markup_and_keeps_links_readable() -> None:
    markdown = (
        "# Heading\n\n**bold** *it* ~~s~~ `code` [docs](https://e.com/x)\n\n- item\n\n> quote\n\n"
        "```py\nprint(1)\n```"
    )
    plain = to_plain(markdown)
    assert plain == "Heading\n\nbold it s code docs (https://e.com/x)\n\n• item\n\n> quote\n\nprint(1)"
    assert not re.search(r"<[a-z/]|\*\*|```|~~", plain)


def test_plain_text_keeps_characters_that_look_like_markup() -> None:
    assert to_plain("a < b & c > d, 2 * 3") == "a < b & c > d, 2 * 3"


# --- Odd input -----------------------------------------------------------------------------------------


def test_sanitize_removes_control_characters_and_mends_surrogates() -> None:
    assert sanitize("a\x00b\x1bc\r\nd\re\tf") == "abc\nd\ne\tf"
    assert sanitize("\ud83d\ude00") == "😀"  # a surrogate pair becomes the character it encodes
    assert sanitize("x\ud800y") == "x\ufffdy"  # a lone half cannot be sent anywhere


@pytest.mark.parametrize("markdown", ["", "   ", "\n\n\t\n", "```\n```", ">", "#"])
def test_empty_input_renders_to_nothing(markdown: str) -> None:
    assert to_telegram_html(markdown).strip() == ""
    assert to_plain(markdown).strip() == ""
