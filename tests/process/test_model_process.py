"""The model process: litellm calls made from a child process, as ``bot.py run`` makes them.

Each test starts a real child (``python -m llm.worker``) that talks to the loopback fake
OpenAI server through litellm; the parent sees replies and classified failures as before.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import logging
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ground.config import LLMSettings, StorageSettings
from ground.tunables import MODEL_PROCESS_CALL_RESENDS
from kith.app.model_start import new_model_process, start_early
from kith.app.wiring import build_app
from kith.settings import AppSettings
from llm.client import LLMClient, LLMError, call_litellm, import_litellm, with_api_key
from llm.process import WORKER_COMMAND, ModelProcess
from llm.worker import InlinePreparation, read_requests
from tests.fakes.openai_api import FakeOpenAI, Scripted
from tests.support.paths import ROOT
from tests.support.waiting import until

SLOW_LOAD_S = 2.0  # the child's extra load time in one test: twice that test's model timeout
CATCH_EVERY_S = 0.005  # short: a child must be caught while it still loads


@pytest.fixture
async def process() -> AsyncIterator[ModelProcess]:
    proc = ModelProcess(start_timeout_s=120, stop_timeout_s=5, restart_backoff_s=10)
    try:
        yield proc
    finally:
        await proc.close()


def _client(fake: FakeOpenAI, process: ModelProcess, **overrides: object) -> LLMClient:
    settings = LLMSettings(model="openai/fake-model", api_base=fake.base_url, timeout_s=3.0, max_retries=0)
    return LLMClient(dataclasses.replace(settings, **overrides), calls=process)  # type: ignore[arg-type]


def _record_wire(process: ModelProcess, monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every byte the parent writes to the child from now on."""
    stdin = process._child.proc.stdin  # type: ignore[union-attr]
    written: list[bytes] = []
    send = stdin.write

    def write(data: bytes) -> None:
        written.append(bytes(data))
        send(data)

    monkeypatch.setattr(stdin, "write", write)
    return written



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
    wire = _record_wire(process, monkeypatch)
    llm = _client(fake_llm, process, api_key_env="KITH_TEST_MODEL_KEY")

    text = "zero\u200bwidth, RTL \u05e9\u05dc\u05d5\u05dd, emoji \U0001f9f6, a line\nbreak"
    fake_llm.reply(f"back: {text}")
    reply = await llm.complete([{"role": "user", "content": text}])
    assert reply.text == f"back: {text}"
    assert fake_llm.requests[-1]["messages"][-1]["content"] == text
    assert reply.usage["total_tokens"] == 15
    # The key came from the variable the config names, read by the child; the wire carries only its name.
    assert fake_llm.authorizations[-1] == "Bearer sk-from-the-environment"
    assert b"KITH_TEST_MODEL_KEY" in b"".join(wire) and b"sk-from-the-environment" not in b"".join(wire)

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
    assert (refused.value.kind, refused.value.retryable) == ("auth", False)
    assert len(fake_llm.requests) == asked + 1  # a refused key is not retried

    fake_llm.malformed()
    with pytest.raises(LLMError):
        await llm.complete([{"role": "user", "content": "hello?"}])
    fake_llm.reply("still here")
    assert (await llm.complete([{"role": "user", "content": "hello?"}])).text == "still here"


async def test_a_streamed_reply_grows_across_the_process_boundary_and_ends_whole(
        fake_llm: FakeOpenAI, process: ModelProcess) -> None:
    await process.start()
    llm = _client(fake_llm, process)
    text = "Here is a reply that **grows** while it is written, emoji \U0001f9f6 and all."
    fake_llm.queue.append(Scripted(text=text, chunk_chars=5, chunk_delay_s=0.08))
    heard: list[str] = []
    reply = await llm.complete([{"role": "user", "content": "tell me"}], on_text=heard.append)
    assert reply.text == text
    assert fake_llm.requests[-1]["stream"] is True
    # The provider's own count came at the end (asked for), so litellm did not count the prompt itself.
    assert fake_llm.requests[-1]["stream_options"] == {"include_usage": True}
    assert reply.usage["total_tokens"] == 15
    assert len(heard) >= 3  # it grew in steps, as the model wrote it, before the reply came whole
    assert all(text.startswith(h) for h in heard) and heard == sorted(heard, key=len)

    # A streamed answer that is a tool call (its arguments in pieces, as OpenAI streams them) is rebuilt whole,
    # as an unstreamed one; two calls in one answer stay two.
    fake_llm.queue.append(Scripted(text="Let me look.", chunk_chars=3, tool_calls=[
        {"id": "call_1", "type": "function", "function": {"name": "recall", "arguments": '{"query": "my sister"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "who", "arguments": '{"name": "Ola K."}'}}]))
    reply = await llm.complete([{"role": "user", "content": "who?"}], on_text=heard.append,
                               tools=[{"type": "function", "function": {"name": "recall", "parameters": {}}}])
    assert reply.text == "Let me look."
    assert [(c.id, c.name, c.parsed_arguments()) for c in reply.tool_calls] == [
        ("call_1", "recall", {"query": "my sister"}), ("call_2", "who", {"name": "Ola K."})]


async def test_a_stream_cut_short_is_a_failed_call_not_a_short_reply(
        fake_llm: FakeOpenAI, process: ModelProcess) -> None:
    await process.start()
    llm = _client(fake_llm, process)
    fake_llm.queue.append(Scripted(text="This reply never finishes because the line drops", chunk_chars=4,
                                   cut_after_chunks=3))
    heard: list[str] = []
    with pytest.raises(LLMError):
        await llm.complete([{"role": "user", "content": "tell me"}], on_text=heard.append)


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


async def test_a_call_whose_process_is_killed_under_it_is_answered_by_the_next_one(
        fake_llm: FakeOpenAI, process: ModelProcess) -> None:
    # No retries, as an operator may configure: the model never failed, kith's own process did, so the
    # person gets the model's answer, not "I can't reach my model".
    llm = _client(fake_llm, process, max_retries=0)
    await process.start()
    first = process.pid
    assert first is not None
    fake_llm.hang(2)
    arrived = _arrivals(fake_llm)
    waiting = asyncio.create_task(llm.complete([{"role": "user", "content": "hello?"}]))
    await arrived.wait()
    os.kill(first, signal.SIGKILL)
    assert (await waiting).text == "echo: hello?"
    assert process.pid not in (None, first) and process.spawned == 2
    assert [r["messages"][-1]["content"] for r in fake_llm.requests] == ["hello?", "hello?"]  # sent again, once


async def test_a_call_that_every_process_dies_under_fails_after_a_few_instead_of_respawning_forever(
        fake_llm: FakeOpenAI) -> None:
    # A child that is ready at once and dies on the first request it reads, as a call that crashes it would.
    fatal = (sys.executable, "-c", "import json, os, sys; print(json.dumps({'ready': os.getpid()}), flush=True); "
             "sys.stdin.readline(); os._exit(9)")
    process = ModelProcess(start_timeout_s=120, stop_timeout_s=5, restart_backoff_s=10, command=fatal)
    llm = _client(fake_llm, process, max_retries=0)
    try:
        with pytest.raises(LLMError) as gone:
            await asyncio.wait_for(llm.complete([{"role": "user", "content": "hello?"}]), 30)
        assert (gone.value.kind, gone.value.retryable) == ("unavailable", True)
        assert process.spawned == 1 + MODEL_PROCESS_CALL_RESENDS
    finally:
        await process.close()


async def test_a_call_waits_for_a_process_slower_to_load_than_the_model_timeout(fake_llm: FakeOpenAI) -> None:
    # A busy machine has taken 7 s to load the child; the model's own timeout is for the model, and a
    # healthy model must not be reported unreachable because kith's process was still loading.
    slow = (sys.executable, "-c", f"import runpy, time; time.sleep({SLOW_LOAD_S}); "
            "runpy.run_module('llm.worker', run_name='__main__', alter_sys=True)")
    process = ModelProcess(start_timeout_s=120, stop_timeout_s=5, restart_backoff_s=10, command=slow)
    llm = _client(fake_llm, process, timeout_s=1.0, max_retries=0)
    try:
        assert (await llm.complete([{"role": "user", "content": "still there?"}])).text == "echo: still there?"
        assert process.spawned == 1
    finally:
        await process.close()


async def test_closing_ends_the_child(fake_llm: FakeOpenAI) -> None:
    process = ModelProcess(start_timeout_s=120, stop_timeout_s=5, restart_backoff_s=10)
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


async def test_litellms_preparation_runs_inline_and_anything_else_in_a_thread(fake_llm: FakeOpenAI) -> None:
    litellm = import_litellm()
    executor = InlinePreparation(litellm.completion)
    loop = asyncio.get_running_loop()
    loop.set_default_executor(executor)
    fake_llm.reply("prepared inline")
    reply = await call_litellm(litellm, with_api_key({"model": "openai/fake-model", "api_base": fake_llm.base_url,
                                                      "messages": [{"role": "user", "content": "hi"}]}, ""), 3.0)
    assert reply.text == "prepared inline"
    # The pinned litellm hands acompletion's synchronous half over in the shape the worker recognises.
    assert executor.inline == 1
    elsewhere = await loop.run_in_executor(None, lambda: threading.current_thread().name)
    assert elsewhere.startswith("model-worker")
    assert executor.inline == 1


async def test_concurrent_calls_are_answered_as_each_finishes(fake_llm: FakeOpenAI, process: ModelProcess) -> None:
    def by_content(request: dict[str, object]) -> Scripted:
        text = str(request["messages"][-1]["content"])  # type: ignore[index]
        return Scripted(text=f"re: {text}", delay_s=1.0 if text == "slow" else 0.0)

    fake_llm.route = by_content
    llm = _client(fake_llm, process)
    await process.start()
    slow = asyncio.create_task(llm.complete([{"role": "user", "content": "slow"}]))
    fast = asyncio.create_task(llm.complete([{"role": "user", "content": "fast"}]))
    done, _ = await asyncio.wait({slow, fast}, return_when=asyncio.FIRST_COMPLETED)
    assert done == {fast}
    assert (fast.result().text, (await slow).text) == ("re: fast", "re: slow")


async def test_closing_while_it_starts_leaves_no_child(fake_llm: FakeOpenAI) -> None:
    process = ModelProcess(start_timeout_s=120, stop_timeout_s=5, restart_backoff_s=10)
    starting = asyncio.create_task(process.start())
    await until(lambda: process.pid is not None, 60, every=CATCH_EVERY_S)  # spawned: the child is still loading litellm
    pid = process.pid
    assert pid is not None
    await process.close()
    with pytest.raises(LLMError):
        await starting
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_a_child_killed_while_it_loads_is_replaced_and_the_waiting_calls_are_answered(
        fake_llm: FakeOpenAI, process: ModelProcess, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kith.model_process")
    llm = _client(fake_llm, process, timeout_s=60.0)
    waiting = [asyncio.create_task(llm.complete([{"role": "user", "content": f"hello {i}"}])) for i in range(3)]
    killed = []
    for _ in range(2):  # two in a row: one fewer than the attempts that make a failed start
        await until(lambda: process.pid is not None and process.pid not in killed, 60, every=CATCH_EVERY_S)
        pid = process.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
    answers = await asyncio.gather(*waiting)
    assert sorted(a.text for a in answers) == ["echo: hello 0", "echo: hello 1", "echo: hello 2"]
    assert process.spawned == 3 and process.pid not in killed
    assert sum("died while starting" in r.getMessage() for r in caplog.records) == 2  # both died loading


async def test_a_child_that_never_starts_gets_the_honest_failure_at_once(fake_llm: FakeOpenAI) -> None:
    process = ModelProcess(start_timeout_s=120, stop_timeout_s=5, restart_backoff_s=60,
                           command=(sys.executable, "-c", "raise SystemExit(3)"))
    llm = _client(fake_llm, process, timeout_s=60.0, max_retries=2)
    try:
        with pytest.raises(LLMError) as failed:
            await llm.complete([{"role": "user", "content": "hello?"}])
        # Unavailable, not a timeout: the call did not wait out its 60 s; the client did not retry either.
        assert (failed.value.kind, failed.value.retryable) == ("unavailable", False)
        assert process.spawned == 3
        with pytest.raises(LLMError) as again:
            await llm.complete([{"role": "user", "content": "anyone?"}])
        assert again.value.kind == "unavailable"
        assert process.spawned == 3 and fake_llm.requests == []  # within the backoff: no new child at all
    finally:
        await process.close()


async def test_a_request_too_large_for_the_wire_is_refused_and_the_process_serves_on(
        fake_llm: FakeOpenAI, process: ModelProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("llm.process.MODEL_PROCESS_LINE_LIMIT", 10_000)
    llm = _client(fake_llm, process, max_retries=2)
    with pytest.raises(LLMError) as refused:
        await llm.complete([{"role": "user", "content": "x" * 20_000}])
    assert (refused.value.kind, fake_llm.requests) == ("bad_request", [])  # not retried, never sent
    fake_llm.reply("small is fine")
    assert (await llm.complete([{"role": "user", "content": "hi"}])).text == "small is fine"


def test_the_child_skips_a_line_past_the_limit_whole() -> None:
    source = io.BytesIO(b'{"id": 1}\n' + b"y" * 50 + b'{"id": 2}\n' + b'{"id": 3}\n')
    delivered: list[bytes | None] = []
    read_requests(source, delivered.append, limit=20)
    assert delivered == [b'{"id": 1}\n', b'{"id": 3}\n', None]  # nothing of the long line parses on its own


async def test_a_process_whose_parent_died_while_it_loaded_exits_quietly() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the parent is gone: nobody will read the answers, starting with "ready"
    try:
        child = await asyncio.create_subprocess_exec(*WORKER_COMMAND, cwd=str(ROOT), stdin=asyncio.subprocess.PIPE,
                                                     stdout=write_end, stderr=asyncio.subprocess.PIPE)
    finally:
        os.close(write_end)
    _out, err = await asyncio.wait_for(child.communicate(), 60)
    assert child.returncode == 0 and b"Traceback" not in err, err.decode(errors="replace")[-2000:]


async def test_a_model_process_started_early_is_ended_when_the_bot_cannot_be_built(tmp_path: Path) -> None:
    """bot.py starts the model process before it opens anything; a start that then fails leaves no child."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory", encoding="utf-8")
    settings = AppSettings(storage=StorageSettings(data_dir=str(blocker / "data")))
    model_process = new_model_process(settings)
    assert model_process is not None
    start_early(model_process)
    await asyncio.sleep(0.2)  # spawned, still loading litellm
    pid = model_process.pid
    assert pid is not None
    with pytest.raises(OSError):
        await build_app(settings, model_process=model_process)
    assert model_process.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_a_voice_note_is_transcribed_in_the_model_process_and_a_failing_one_is_retried(
        fake_llm: FakeOpenAI, process: ModelProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KITH_TEST_WHISPER_KEY", "sk-whisper")
    await process.start()
    wire = _record_wire(process, monkeypatch)
    llm = _client(fake_llm, process, max_retries=1)
    audio = "my sister Ola moved to Gdańsk \U0001f9f6".encode()
    words = await llm.transcribe(audio, "voice.ogg", model="openai/whisper-1", api_base=fake_llm.base_url,
                                 api_key_env="KITH_TEST_WHISPER_KEY", timeout_s=10)
    assert words == "transcript of voice.ogg: my sister Ola moved to Gdańsk \U0001f9f6"
    assert fake_llm.transcription_requests[-1] == ("whisper-1", "voice.ogg", audio)  # the bytes, whole
    assert b"sk-whisper" not in b"".join(wire)  # the key's name crosses the pipe, never the key

    fake_llm.transcripts.extend([503, "second time lucky"])
    assert await llm.transcribe(audio, "v.ogg", model="openai/whisper-1", api_base=fake_llm.base_url,
                                api_key_env="", timeout_s=10) == "second time lucky"
    fake_llm.transcripts.extend([503, 503])
    with pytest.raises(LLMError) as failed:
        await llm.transcribe(audio, "v.ogg", model="openai/whisper-1", api_base=fake_llm.base_url,
                             api_key_env="", timeout_s=10)
    assert failed.value.retryable  # the turn that asked is tried again later, never dropped
    assert len(fake_llm.transcription_requests) == 5  # kith's one retry each time, no provider SDK's retries beside


async def test_whether_a_model_sees_images_is_litellms_word_asked_in_the_model_process(
        fake_llm: FakeOpenAI, process: ModelProcess) -> None:
    assert await process.sees_images("openai/gpt-4o") is True
    assert await process.sees_images("openai/fake-model") is False  # one litellm does not know: taken not to
    assert await process.sees_images("no-such-provider/whatever") is False
    llm = LLMClient(LLMSettings(model="openai/gpt-4o", api_base=fake_llm.base_url), calls=process)
    assert await llm.sees_images() is True
