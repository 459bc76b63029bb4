"""Replies cut to each platform's limit: every chunk within it, valid on its own, nothing lost."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from channels.discord.formatting import MESSAGE_FORMAT as DISCORD
from channels.discord.formatting import MESSAGE_MAX_CHARS as DISCORD_MAX_CHARS
from channels.markdown import (
    MIN_CHUNK_LIMIT,
    MessageFormat,
    render_chunks,
    split_markdown,
    to_plain,
    utf16_len,
    with_attachment,
)
from channels.slack.formatting import MESSAGE_FORMAT as SLACK
from channels.slack.formatting import MESSAGE_MAX_CHARS as SLACK_MAX_CHARS
from channels.telegram.formatting import MESSAGE_FORMAT as TELEGRAM
from channels.telegram.formatting import MESSAGE_MAX_UTF16 as TELEGRAM_MAX_UTF16
from channels.telegram.formatting import to_telegram_html
from channels.terminal.formatting import MESSAGE_FORMAT as TERMINAL
from ground.types import OutboundMessage, RenderedChunk
from tests.support.formatting import valid_telegram, words

FAMILY = "👨‍👩‍👧‍👦"  # one visible emoji: seven code points, eleven UTF-16 units
PLATFORMS = {"telegram": TELEGRAM, "discord": DISCORD, "slack": SLACK, "console": TERMINAL}


def squeeze(text: str) -> str:
    """Text without whitespace: chunks may trim blanks where they were cut, never anything else."""
    return re.sub(r"\s+", "", text)


def long_reply() -> str:
    """~10,000 characters of prose around a long fenced Python block, the way a model answers."""
    prose = [
        f"Paragraph {p} explains **step {p}** with care, including *emphasis*, `inline_code_{p}`, "
        + " ".join(f"word{p}x{w}" for w in range(70))
        + "."
        for p in range(8)
    ]
    code = "\n".join(f"    total_{n} = compute({n}) if {n} < limit and ok else None  # row {n}" for n in range(70))
    return "\n\n".join([*prose[:4], f"```python\ndef main():\n{code}\n```", *prose[4:]])


def check_chunk_limits(chunks: list[RenderedChunk], spec: MessageFormat) -> None:
    assert chunks
    for chunk in chunks:
        assert spec.measure(chunk.text) <= spec.limit
        assert spec.measure(chunk.plain) <= spec.limit
        assert chunk.text.strip() and chunk.plain.strip()


# --- Telegram -------------------------------------------------------------------------------------------


def test_long_telegram_reply_splits_into_valid_html_chunks_with_code_reopened() -> None:
    reply = long_reply()
    assert len(reply) > 10_000
    chunks = render_chunks(reply, TELEGRAM)
    assert len(chunks) >= 3
    check_chunk_limits(chunks, TELEGRAM)
    parsed = [valid_telegram(chunk.text) for chunk in chunks]
    assert all(chunk.parse_mode == "HTML" for chunk in chunks)

    # The code block did not fit in one chunk; each chunk holding part of it opens it as Python.
    with_code = [i for i, chunk in enumerate(chunks) if "total_" in chunk.text]
    assert len(with_code) >= 2
    for i in with_code:
        assert parsed[i].code_classes == ["language-python"]
        assert chunks[i].text.count("<pre>") == chunks[i].text.count("</pre>") == 1

    # Nothing visible was lost, doubled or reordered by cutting.
    whole = valid_telegram(to_telegram_html(reply)).visible
    assert squeeze("".join(p.visible for p in parsed)) == squeeze(whole)
    assert words(" ".join(p.visible for p in parsed)) == words(to_plain(reply))


def test_telegram_prefers_ending_a_chunk_before_a_code_block_to_cutting_it() -> None:
    code = "\n".join(f"line {n} of the program" for n in range(100))  # ~2,300 chars: fits on its own
    reply = "intro " * 300 + f"\n\n```sh\n{code}\n```\n\nthe end"
    chunks = render_chunks(reply, TELEGRAM)
    assert [valid_telegram(c.text).code_classes for c in chunks] == [[], ["language-sh"]]
    assert "<pre>" not in chunks[0].text and chunks[1].text.startswith("<pre>")


def test_telegram_measures_emoji_in_utf16_units() -> None:
    reply = "😀" * 3_000  # 3,000 characters but 6,000 UTF-16 units
    chunks = render_chunks(reply, TELEGRAM)
    assert len(chunks) == 2
    assert all(utf16_len(chunk.text) <= TELEGRAM_MAX_UTF16 for chunk in chunks)
    assert "".join(chunk.text for chunk in chunks) == reply


def test_hard_cut_never_splits_an_emoji_sequence() -> None:
    reply = FAMILY * 1_000  # no spaces anywhere: only hard cuts are possible
    chunks = render_chunks(reply, TELEGRAM)
    assert len(chunks) >= 3
    for chunk in chunks:
        assert utf16_len(chunk.text) <= TELEGRAM_MAX_UTF16
        assert chunk.text == FAMILY * (len(chunk.text) // len(FAMILY))
    assert "".join(chunk.text for chunk in chunks) == reply


def test_hard_cut_never_splits_an_entity() -> None:
    reply = "&<>" * 5_000
    chunks = render_chunks(reply, TELEGRAM)
    assert len(chunks) >= 4
    assert "".join(valid_telegram(chunk.text).visible for chunk in chunks) == reply


def test_bold_span_cut_in_two_is_closed_and_reopened() -> None:
    reply = "**" + " ".join(f"bold{n}" for n in range(1_200)) + "** after"
    chunks = render_chunks(reply, TELEGRAM)
    assert len(chunks) >= 2
    for chunk in chunks:
        valid_telegram(chunk.text)
        assert chunk.text.startswith("<b>")
        assert "<" not in chunk.plain
    assert words(" ".join(valid_telegram(c.text).visible for c in chunks)) == words(to_plain(reply))


def test_link_cut_in_two_is_a_link_in_both_chunks() -> None:
    label = " ".join(f"label{n}" for n in range(900))
    chunks = render_chunks(f"[{label}](https://example.com/?a=1&b=2)", TELEGRAM)
    assert len(chunks) >= 2
    for chunk in chunks:
        assert valid_telegram(chunk.text).hrefs == ["https://example.com/?a=1&b=2"]
        assert chunk.plain.endswith(" (https://example.com/?a=1&b=2)")


def test_quote_cut_in_two_stays_a_quote_on_every_platform() -> None:
    reply = "\n".join(f"> quoted line number {n} with some words" for n in range(200))
    for chunk in render_chunks(reply, TELEGRAM):
        assert chunk.text.startswith("<blockquote>") and chunk.text.endswith("</blockquote>")
    for platform in (DISCORD, SLACK):
        chunks = render_chunks(reply, platform)
        assert len(chunks) >= 2
        assert all(line.startswith(">") for chunk in chunks for line in chunk.text.split("\n"))


# --- Discord and Slack ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("platform", "limit"), [(DISCORD, DISCORD_MAX_CHARS), (SLACK, SLACK_MAX_CHARS)], ids=["discord", "slack"]
)
def test_long_reply_splits_for_discord_and_slack_with_fences_closed_and_reopened(
    platform: MessageFormat, limit: int
) -> None:
    reply = long_reply()
    chunks = render_chunks(reply, platform)
    assert len(chunks) >= -(-len(reply) // limit)
    check_chunk_limits(chunks, platform)
    assert all(chunk.parse_mode is None for chunk in chunks)
    opening = "```python\n" if platform is DISCORD else "```\n"
    with_code = [chunk for chunk in chunks if "total_" in chunk.text]
    assert len(with_code) >= 2
    for chunk in chunks:
        fences = re.findall(r"^```\w*$", chunk.text, re.MULTILINE)
        assert len(fences) % 2 == 0, chunk.text[:200]  # every block opened in a chunk closes in it
    for chunk in with_code:
        assert opening in chunk.text
    assert squeeze("".join(chunk.plain for chunk in chunks)) == squeeze(to_plain(reply))
    assert words(" ".join(chunk.plain for chunk in chunks)) == words(to_plain(reply))


def test_discord_chunks_read_back_as_the_original_text() -> None:
    reply = long_reply()
    chunks = render_chunks(reply, DISCORD)
    # Each chunk is Markdown in its own right: parsing it again gives back that chunk's plain twin.
    for chunk in chunks:
        assert squeeze(to_plain(chunk.text)) == squeeze(chunk.plain)


def test_slack_chunks_never_carry_a_stray_angle_bracket() -> None:
    reply = ("a <b> & c " * 400 + "\n\n") * 3
    for chunk in render_chunks(reply, SLACK):
        assert "<" not in chunk.text and ">" not in chunk.text
        assert not re.search(r"&(?!lt;|gt;|amp;)", chunk.text)


# --- The last chunk ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("platform", list(PLATFORMS.values()), ids=list(PLATFORMS))
def test_only_the_last_chunk_says_it_is_last(platform: MessageFormat) -> None:
    chunks = render_chunks(long_reply(), platform)
    assert [chunk.last for chunk in chunks] == [False] * (len(chunks) - 1) + [True]


def test_a_file_is_the_last_chunk() -> None:
    message = OutboundMessage(platform="telegram", chat_id="1", text=long_reply(), attachment_name="notes.txt",
                              attachment_bytes=b"line one\n")
    chunks = with_attachment(render_chunks(message.text, TELEGRAM), message)
    assert len(chunks) >= 4
    assert [chunk.last for chunk in chunks] == [False] * (len(chunks) - 1) + [True]
    assert (chunks[-1].text, chunks[-1].plain) == ("notes.txt", "notes.txt")
    only_file = replace(message, text=" ")
    assert with_attachment(render_chunks(only_file.text, TELEGRAM), only_file) == [
        RenderedChunk("notes.txt", None, "notes.txt", last=True)]
    # The buttons ride on the file where the platform attaches them to one, else on the last text chunk.
    assert [chunk.buttons for chunk in chunks] == [False] * (len(chunks) - 1) + [True]
    keep_on_text = with_attachment(render_chunks(message.text, TELEGRAM), message, file_takes_buttons=False)
    assert [chunk.buttons for chunk in keep_on_text] == [False] * (len(chunks) - 2) + [True, False]


# --- Where chunks end -------------------------------------------------------------------------------------


def test_paragraph_boundary_is_preferred_over_line_and_word_boundaries() -> None:
    first = "\n".join(f"first paragraph line {n} " + "x" * 40 for n in range(20))  # ~1,300 chars
    second = "\n".join(f"second paragraph line {n} " + "y" * 40 for n in range(20))
    chunks = render_chunks(f"{first}\n\n{second}", DISCORD)
    assert [chunk.text for chunk in chunks] == [first, second]


def test_line_boundary_is_preferred_over_word_boundary() -> None:
    lines = [f"line {n} " + " ".join(["word"] * 12) for n in range(60)]  # one paragraph, ~4,000 chars
    chunks = render_chunks("\n".join(lines), DISCORD)
    assert len(chunks) >= 2
    for chunk in chunks:
        assert all(line in lines for line in chunk.text.split("\n"))


def test_word_boundary_is_preferred_over_a_hard_cut() -> None:
    reply = " ".join(f"token{n}" for n in range(1_000))
    chunks = render_chunks(reply, DISCORD)
    assert len(chunks) >= 3
    assert " ".join(chunk.text for chunk in chunks) == reply


# --- Odd input -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("platform", list(PLATFORMS.values()), ids=list(PLATFORMS))
@pytest.mark.parametrize(
    "reply",
    [
        "e\u0301" * 3_000,  # combining accents
        "\u200f\u05e9\u05dc\u05d5\u05dd \u200e" * 700,  # right-to-left text and marks
        "a\x00b\u200bc\ufeff" * 1_500,  # NUL, zero-width space, BOM
        FAMILY + " 🇫🇷🇩🇪 " * 600,  # flags are pairs of regional indicators
        "*_~`[" * 1_500,  # nothing but would-be markup
    ],
    ids=["combining", "rtl", "nul-zw", "emoji", "delimiters"],
)
def test_odd_unicode_renders_within_limits_and_loses_nothing(reply: str, platform: MessageFormat) -> None:
    chunks = render_chunks(reply, platform)
    check_chunk_limits(chunks, platform)
    assert squeeze("".join(chunk.plain for chunk in chunks)) == squeeze(to_plain(reply))
    if platform is TELEGRAM:
        for chunk in chunks:
            valid_telegram(chunk.text)


def test_a_megabyte_without_spaces_is_cut_quickly_and_completely() -> None:
    reply = "x" * 1_000_000
    chunks = render_chunks(reply, TELEGRAM)  # a loop that never ends fails on pytest-timeout
    assert all(utf16_len(chunk.text) <= TELEGRAM_MAX_UTF16 for chunk in chunks)
    assert "".join(chunk.text for chunk in chunks) == reply


@pytest.mark.parametrize(
    "reply",
    ["*a " * 20_000, "[a](" * 20_000, "**a " * 10_000 + "b**" * 10_000, "> **q\n" * 10_000, "`` ` " * 20_000],
    ids=["openers", "links", "nested", "quotes", "backticks"],
)
def test_adversarial_markup_finishes(reply: str) -> None:
    chunks = render_chunks(reply, TELEGRAM)  # a loop that never ends fails on pytest-timeout
    visible = "".join(valid_telegram(chunk.text).visible for chunk in chunks)
    assert squeeze(visible) == squeeze(valid_telegram(to_telegram_html(reply)).visible)


@pytest.mark.parametrize("platform", list(PLATFORMS.values()), ids=list(PLATFORMS))
@pytest.mark.parametrize("reply", ["", " ", "\n\n \t\n", "```\n```"])
def test_empty_or_blank_reply_gives_no_chunks(reply: str, platform: MessageFormat) -> None:
    assert render_chunks(reply, platform) == []


def test_console_gets_plain_text() -> None:
    chunks = render_chunks("**hi** [there](https://e.com)", TERMINAL)
    assert chunks == [RenderedChunk("hi there (https://e.com)", None, "hi there (https://e.com)")]


# --- split_markdown ------------------------------------------------------------------------------------


def test_split_markdown_keeps_each_piece_within_the_limit_and_reopens_fences() -> None:
    reply = long_reply()
    pieces = split_markdown(reply, 1_500, utf16_len)
    assert len(pieces) >= 7
    assert all(utf16_len(piece) <= 1_500 for piece in pieces)
    for piece in pieces:
        assert piece.count("```") % 2 == 0
        if "total_" in piece:
            assert piece.lstrip().startswith("```python\n") or "\n```python\n" in piece
    assert squeeze("".join(to_plain(piece) for piece in pieces)) == squeeze(to_plain(reply))


def test_split_markdown_uses_the_given_measure() -> None:
    reply = " ".join(["word"] * 400)  # 1,999 characters
    assert len(split_markdown(reply, 2_000, len)) == 1
    assert len(split_markdown(reply, 2_000, lambda text: 2 * len(text))) == 2


def test_split_markdown_survives_a_tiny_limit_by_dropping_markup_it_cannot_fit() -> None:
    reply = "```verylonglanguagename\ncode line\n```\n\n[a label](https://example.com/very/long/path)"
    pieces = split_markdown(reply, MIN_CHUNK_LIMIT, len)
    assert all(len(piece) <= MIN_CHUNK_LIMIT for piece in pieces)
    assert {"code", "line", "a", "label"} <= set(words(" ".join(pieces)))


def test_split_markdown_refuses_a_limit_too_small_for_any_character() -> None:
    with pytest.raises(ValueError, match="below"):
        split_markdown("hello", MIN_CHUNK_LIMIT - 1, len)
