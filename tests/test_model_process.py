"""The model process: litellm calls made from a child process, as ``bot.py run`` makes them.

Each test starts a real child (``python -m persona.model_worker``) that talks to the loopback fake
OpenAI server through litellm; the parent sees replies and classified failures as before.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
from collections.abc import AsyncIterator

import pytest

from core.config import LLMSettings
from persona.llm import LLMClient, LLMError
from persona.model_process import ModelProcess
from tests.fakes.openai_api import FakeOpenAI


@pytest.fixture
async def process() -> AsyncIterator[ModelProcess]:
    proc = ModelProcess(start_timeout_s=120, stop_timeout_s=5)
    try:
        yield proc
    finally:
        await proc.close()


def _client(fake: FakeOpenAI, process: ModelProcess, **overrides: object) -> LLMClient:
    settings = LLMSettings(model="openai/fake-model", api_base=fake.base_url, timeout_s=3.0, max_retries=0)
    return LLMClient(dataclasses.replace(settings, **overrides), calls=process)  # type: ignore[arg-type]


def _arrivals(fake: FakeOpenAI) -> asyncio.Event:
    """Set when the fake model receives its next request (the call is then in flight in the child)."""
    arrived = asyncio.Event()

    def note(_request: object) -> None:
        arrived.set()  # and None: the scripted queue answers as usual

    fake.route = note
    return arrived


async def test_replies_tool_calls_and_failures_cross_the_process_boundary(
        fake_llm: FakeOpenAI, process: ModelProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KITH_TEST_MODEL_KEY", "sk-from-the-environment")
    await process.start()
    assert process.pid is not None and process.pid != os.getpid()
    llm = _client(fake_llm, process, api_key_env="KITH_TEST_MODEL_KEY")

    text = "zero\u200bwidth, RTL \u05e9\u05dc\u05d5\u05dd, emoji \U0001f9f6, a line\nbreak"
    fake_llm.reply(f"back: {text}")
    reply = await llm.complete([{"role": "user", "content": text}])
    assert reply.text == f"back: {text}"
    assert fake_llm.requests[-1]["messages"][-1]["content"] == text
    assert reply.usage["total_tokens"] == 15
    # The key came from the variable the config names, read by the child; the wire carries only its name.
    assert fake_llm.authorizations[-1] == "Bearer sk-from-the-environment"

    fake_llm.tool_call("recall", {"query": "sister's name"})
    reply = await llm.complete([{"role": "user", "content": "what's my sister called?"}],
                               tools=[{"type": "function", "function": {"name": "recall", "parameters": {}}}])
    assert [(c.name, c.parsed_arguments()) for c in reply.tool_calls] == [("recall", {"query": "sister's name"})]

    fake_llm.fail(500)
    with pytest.raises(LLMError) as unavailable:
        await llm.complete([{"role": "user", "content": "hello?"}])
    assert (unavailable.value.kind, unavailable.value.retryable) == ("unavailable", True)

    retrying = _client(fake_llm, process, max_retries=2)
    asked = len(fake_llm.requests)
    fake_llm.fail(401)
    with pytest.raises(LLMError) as refused:
        await retrying.complete([{"role": "user", "content": "hello?"}])
    assert refused.value.kind == "auth"
    assert len(fake_llm.requests) == asked + 1  # a refused key is not retried

    fake_llm.malformed()
    with pytest.raises(LLMError):
        await llm.complete([{"role": "user", "content": "hello?"}])
    fake_llm.reply("still here")
    assert (await llm.complete([{"role": "user", "content": "hello?"}])).text == "still here"


async def test_a_slow_model_times_out_and_a_cancelled_call_leaves_the_process_serving(
        fake_llm: FakeOpenAI, process: ModelProcess) -> None:
    llm = _client(fake_llm, process, timeout_s=1.0)
    await process.start()
    fake_llm.hang(5)
    with pytest.raises(LLMError) as slow:
        await llm.complete([{"role": "user", "content": "are you there?"}])
    assert slow.value.kind == "timeout"

    fake_llm.hang(5)
    arrived = _arrivals(fake_llm)
    waiting = asyncio.create_task(llm.complete([{"role": "user", "content": "never mind"}]))
    await arrived.wait()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    fake_llm.reply("here now")
    assert (await llm.complete([{"role": "user", "content": "and now?"}])).text == "here now"


async def test_a_killed_process_fails_its_call_and_the_next_call_starts_a_new_one(
        fake_llm: FakeOpenAI, process: ModelProcess) -> None:
    llm = _client(fake_llm, process)
    await process.start()
    first = process.pid
    assert first is not None
    fake_llm.hang(2)
    arrived = _arrivals(fake_llm)
    waiting = asyncio.create_task(llm.complete([{"role": "user", "content": "hello?"}]))
    await arrived.wait()
    os.kill(first, signal.SIGKILL)
    with pytest.raises(LLMError) as gone:
        await waiting
    assert (gone.value.kind, gone.value.retryable) == ("unavailable", True)

    fake_llm.reply("back again")
    assert (await llm.complete([{"role": "user", "content": "hello?"}])).text == "back again"
    assert process.pid not in (None, first)


async def test_closing_ends_the_child(fake_llm: FakeOpenAI) -> None:
    process = ModelProcess(start_timeout_s=120, stop_timeout_s=5)
    await process.start()
    pid = process.pid
    assert pid is not None
    await process.close()
    assert process.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(LLMError) as closed:
        await _client(fake_llm, process).complete([{"role": "user", "content": "hello?"}])
    assert closed.value.kind == "unavailable"
