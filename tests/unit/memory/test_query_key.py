"""The recall query cache keys a message by a digest: it keeps no person's words in this process."""

from __future__ import annotations

from memory.recall.query_vectors import query_key


def test_the_key_holds_none_of_the_words_and_is_the_same_for_the_same_text() -> None:
    key = query_key("I have a lighthouse tattoo")
    assert "lighthouse" not in key and "tattoo" not in key
    assert key == query_key("i have a  LIGHTHOUSE tattoo")  # the same query as recall reads it
    assert key != query_key("I have a lighthouse tattoo, Ola")
