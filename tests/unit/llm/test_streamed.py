"""A streamed answer put back together: text, tool calls in pieces, the provider's usage (llm.streamed)."""

from __future__ import annotations

from types import SimpleNamespace as Data
from typing import Any

from llm.streamed import StreamAssembly


def chunk(content: str | None = None, calls: list[Any] | None = None, usage: Any = None) -> Data:
    return Data(choices=[Data(delta=Data(content=content, tool_calls=calls))], usage=usage)


def call(index: int | None, *, id: str | None = None, name: str | None = None, arguments: str = "") -> Data:
    return Data(index=index, id=id, function=Data(name=name, arguments=arguments))


def assembled(*chunks: Data) -> StreamAssembly:
    answer = StreamAssembly()
    for c in chunks:
        answer.add(c)
    return answer


def test_the_text_grows_chunk_by_chunk_and_reads_whole_at_the_end() -> None:
    answer = StreamAssembly()
    grew = [answer.add(c) for c in (chunk(""), chunk("Hel"), chunk(None), chunk("lo \U0001f9f6"), chunk("!"))]
    assert grew == [False, True, False, True, True]
    assert answer.text == "Hello \U0001f9f6!"


def test_a_tool_calls_arguments_in_pieces_are_joined_under_its_index() -> None:
    answer = assembled(
        chunk(calls=[call(0, id="call_a", name="recall")]),
        chunk(calls=[call(1, id="call_b", name="who")]),
        chunk(calls=[call(0, arguments='{"query": ')]),
        chunk(calls=[call(1, arguments='{"name": "Ola"}')]),
        chunk(calls=[call(0, arguments='"sister"}')]))
    assert answer.tool_calls == [("call_a", "recall", '{"query": "sister"}'), ("call_b", "who", '{"name": "Ola"}')]
    assert answer.text == ""


def test_calls_that_a_provider_numbers_all_zero_stay_apart_by_their_ids() -> None:
    answer = assembled(
        chunk(calls=[call(0, id="call_a", name="recall", arguments='{"query": "dog"}')]),
        chunk(calls=[call(0, id="call_b", name="recall", arguments='{"query": ')]),
        chunk(calls=[call(0, arguments='"cat"}')]))
    assert answer.tool_calls == [("call_a", "recall", '{"query": "dog"}'), ("call_b", "recall", '{"query": "cat"}')]


def test_calls_with_no_index_are_told_apart_by_their_place_in_the_chunk() -> None:
    answer = assembled(chunk(calls=[call(None, id="x", name="recall", arguments="{}"),
                                    call(None, id="y", name="who", arguments="{}")]))
    assert [(i, n) for i, n, _a in answer.tool_calls] == [("x", "recall"), ("y", "who")]


def test_the_providers_usage_at_the_end_is_kept_and_a_chunk_with_no_choice_is_no_text() -> None:
    end = Data(choices=[], usage=Data(prompt_tokens=120, completion_tokens=30, total_tokens=150))
    answer = assembled(chunk("Hi"), end)
    assert answer.usage == {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
    assert answer.text == "Hi"
    assert assembled(chunk("Hi"), chunk("!", usage={"total_tokens": 9, "prompt_tokens": None})).usage == {
        "total_tokens": 9}
