"""What a Slack preview stream shows and appends, and how its message is named (pure)."""

from __future__ import annotations

import pytest

from channels.slack.stream import MessageRef, next_piece, parse_message_id, stream_markdown


def test_a_streamed_message_says_so_in_its_id_and_an_old_id_still_reads() -> None:
    streamed = MessageRef("D0ANA", "1700000000.000100", stream=True)
    assert streamed.id == "D0ANA:1700000000.000100:stream"
    assert streamed.plain_id == "D0ANA:1700000000.000100"
    assert parse_message_id(streamed.id) == streamed
    assert parse_message_id("D0ANA:1700000000.000100") == MessageRef("D0ANA", "1700000000.000100")


@pytest.mark.parametrize("message_id", ["", "D0ANA", "D0ANA:", ":1.2", "D0ANA:1.2:other", "D0ANA:1.2:stream:x"])
def test_an_id_that_names_no_message(message_id: str) -> None:
    assert parse_message_id(message_id) is None


def test_the_stream_shows_settled_markdown_of_the_first_messages_worth() -> None:
    assert stream_markdown("Plan: **call Ola", 100) == "Plan:"
    assert stream_markdown("Plan: **call Ola** today", 100) == "Plan: **call Ola** today"
    assert stream_markdown("Run:\n```\nmake", 100) == "Run:\n"  # the block waits for its closing fence
    assert stream_markdown("Run:\n```\nmake\n```\nok", 100) == "Run:\n```\nmake\n```\nok"
    assert stream_markdown("x" * 50, 20) == "x" * 20


def test_each_append_is_only_what_is_new() -> None:
    assert next_piece("Plan:", "Plan: **call Ola** today", 100) == " **call Ola** today"
    assert stream_markdown("Plan: x **ca", 100) == "Plan: x"
    assert next_piece("Plan: x ", "Plan: x **ca", 100) == ""  # settling cut back further: the stream holds
    assert next_piece("Plan: x", "Plan: x", 100) == ""
    assert next_piece("The fox", "A fox jumped", 100) is None  # the reply started over
    assert next_piece("x" * 20, "x" * 50, 20) == ""  # the first message's worth was streamed
