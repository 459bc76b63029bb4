"""The model process: litellm in a child process of its own, answering requests over its pipes.

litellm spends 3 to 4 ms of CPU on every call (request building, its own logging and cost
bookkeeping). In the bot's process that time holds the interpreter lock the chat adapters, the
database thread and delivery need; here it runs on another core. ``llm.process`` is the
parent's side.

The wire is one JSON object per line. Requests: ``{"id", "kwargs", "api_key_env", "timeout_s"}``
and ``{"cancel": id}``. Answers: ``{"ready": pid}`` once litellm is loaded, then
``{"id", "reply": {...}}`` or ``{"id", "error": {"kind", "retryable", "type"}}``; a streamed call
(``"stream": true`` in its kwargs) also sends ``{"id", "delta": "..."}`` before its reply, the text that came since
the last one, at most every ``MODEL_PROCESS_DELTA_INTERVAL_S`` (the first at once). The API key
never crosses the pipe: the child reads the variable the config names, as the parent would.

    python -m llm.worker   (started by the parent; end it by closing its stdin)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import gc
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, BinaryIO

from ground import loop
from ground.tunables import MODEL_PROCESS_DELTA_INTERVAL_S, MODEL_PROCESS_LINE_LIMIT
from llm.client import (
    LLMReply,
    TextSink,
    ToolCall,
    call_litellm,
    call_transcription,
    classify,
    import_litellm,
    model_sees_images,
    with_api_key,
)

log = logging.getLogger("kith.model_worker")


def reply_to_wire(reply: LLMReply) -> dict[str, Any]:
    return {"text": reply.text, "model": reply.model, "elapsed_ms": reply.elapsed_ms, "usage": reply.usage,
            "tool_calls": [[c.id, c.name, c.arguments] for c in reply.tool_calls]}


def reply_from_wire(data: dict[str, Any]) -> LLMReply:
    calls = tuple(ToolCall(str(i), str(n), str(a)) for i, n, a in data.get("tool_calls") or ())
    usage = {str(k): int(v) for k, v in (data.get("usage") or {}).items()}
    return LLMReply(str(data["text"]), calls, str(data.get("model", "")), float(data.get("elapsed_ms", 0.0)),
                    usage)


def encode(message: dict[str, Any]) -> bytes:
    # ASCII escapes keep any text (lone surrogates included) intact across the pipe.
    return json.dumps(message, separators=(",", ":")).encode("ascii") + b"\n"


class InlinePreparation(concurrent.futures.ThreadPoolExecutor):
    """The worker loop's default executor: litellm's request preparation runs inline, anything else in threads.

    ``acompletion`` hands its synchronous half (provider lookup, parameter mapping, request building:
    CPU only for the HTTP providers) to the default executor. In this process, which does nothing
    but model calls, a thread hop per call only adds GIL hand-offs: running it inline took 10-18% less
    CPU per call and 20-25% more calls per second at 50 at once. Anything else (DNS lookups) still goes
    to threads, and a litellm that submits its work in another shape simply gets threads too.
    """

    def __init__(self, completion: Any) -> None:
        super().__init__(thread_name_prefix="model-worker")
        self._completion = completion
        self.inline = 0  # calls run inline, for tests

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        if args or kwargs or not _prepares(fn, self._completion):
            return super().submit(fn, *args, **kwargs)
        self.inline += 1
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(fn())
        except BaseException as exc:  # handed to the awaiting call, as a thread's would be
            future.set_exception(exc)
        return future


def _prepares(fn: Any, completion: Any) -> bool:
    """Whether ``fn`` is acompletion's ``partial(context.run, partial(completion, ...))``."""
    inner = fn.args[0] if isinstance(fn, functools.partial) and fn.args else None
    return isinstance(inner, functools.partial) and inner.func is completion


class Worker:
    def __init__(self, litellm: Any, write: Callable[[bytes], None]) -> None:
        self._litellm = litellm
        self._write = write
        self._tasks: dict[int, asyncio.Task[None]] = {}

    def take(self, request: dict[str, Any]) -> None:
        if "cancel" in request:
            task = self._tasks.get(request["cancel"])
            if task is not None:
                task.cancel()
            return
        call_id = int(request["id"])
        task = asyncio.create_task(self._answer(call_id, request))
        self._tasks[call_id] = task
        # Not in _answer's finally: a task cancelled before it first ran never reaches it.
        task.add_done_callback(lambda _done: self._tasks.pop(call_id, None))

    def _deltas(self, call_id: int) -> TextSink:
        """Sends the text a streamed call added, coalesced: the first piece at once (a preview's first words are
        what a person waits for), then at most one line per interval, so a fast stream costs few writes."""
        sent = 0
        last = 0.0

        def on_text(text: str) -> None:
            nonlocal sent, last
            now = time.monotonic()
            if sent and now - last < MODEL_PROCESS_DELTA_INTERVAL_S:
                return
            with contextlib.suppress(OSError):
                self._write(encode({"id": call_id, "delta": text[sent:]}))
            sent, last = len(text), now

        return on_text

    async def _answer(self, call_id: int, request: dict[str, Any]) -> None:
        try:
            kwargs = with_api_key(dict(request["kwargs"]), request.get("api_key_env") or "")
            if request.get("call") == "sees_images":
                sees = model_sees_images(self._litellm, str(kwargs.get("model", "")))
                reply = LLMReply("yes" if sees else "no")
            elif request.get("call") == "transcribe":
                reply = await call_transcription(self._litellm, kwargs, float(request["timeout_s"]))
            else:
                on_text = self._deltas(call_id) if kwargs.get("stream") else None
                reply = await call_litellm(self._litellm, kwargs, float(request["timeout_s"]), on_text)
            answer = {"id": call_id, "reply": reply_to_wire(reply)}
        except asyncio.CancelledError:
            return  # the parent gave up on this call; it expects no answer
        except Exception as exc:  # every failure goes back classified; the parent decides on retries
            kind, retryable = classify(exc)
            answer = {"id": call_id, "error": {"kind": kind, "retryable": retryable, "type": type(exc).__name__}}
        try:
            self._write(encode(answer))
        except OSError:
            pass  # the parent is gone; the end of its pipe ends this process too

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def read_requests(source: BinaryIO, deliver: Callable[[bytes | None], None],
                  limit: int = MODEL_PROCESS_LINE_LIMIT) -> None:
    """Hand each line of ``source`` to ``deliver``, then None at its end (a thread's job: it blocks).

    A line past ``limit`` bytes is skipped whole, never split into pieces that might parse.
    """
    while True:
        line = source.readline(limit + 1)
        if not line:
            deliver(None)
            return
        if len(line) > limit and not line.endswith(b"\n"):
            skipped = len(line)
            while (more := source.readline(limit + 1)) and not more.endswith(b"\n"):
                skipped += len(more)
            log.error("model process: request of more than %d bytes dropped", skipped + len(more))
            continue
        deliver(line)


async def serve(requests: BinaryIO, answers: BinaryIO) -> None:
    """Read requests from ``requests`` until it ends; write answers to ``answers``.

    Plain threads and blocking writes rather than the loop's pipe transports: those need Unix pipes
    (not Windows' console handles), and an answer is a few kilobytes the parent is always reading.
    """
    loop = asyncio.get_running_loop()
    # The collector is off while litellm loads: its million-odd objects, none of them garbage, set off a
    # collection every few hundred allocations, a second of the load's CPU measured here (bench.start).
    gc.disable()
    litellm = import_litellm()
    loop.set_default_executor(InlinePreparation(litellm.completion))
    # litellm's modules live as long as the process: keep the collector off them. No collection first: the load
    # leaves about two thousand objects of garbage (no resident memory to speak of), and collecting them over a
    # million live ones took an eighth of a second before "ready".
    gc.freeze()
    gc.enable()

    def write(data: bytes) -> None:
        answers.write(data)
        answers.flush()

    worker = Worker(litellm, write)
    lines: asyncio.Queue[bytes | None] = asyncio.Queue()
    threading.Thread(target=read_requests, args=(requests, functools.partial(loop.call_soon_threadsafe,
                                                                            lines.put_nowait)),
                     name="model-worker-stdin", daemon=True).start()
    write(encode({"ready": os.getpid()}))
    # After "ready", beside the calls: a first call arriving meanwhile waits no longer than it would have anyway.
    warming = asyncio.create_task(warm_up(litellm), name="model-worker-warm-up")
    try:
        while (line := await lines.get()) is not None:  # None: the parent closed the pipe or is gone
            try:
                worker.take(json.loads(line))
            except (ValueError, KeyError, TypeError):
                log.error("model process: unreadable request of %d bytes dropped", len(line))
    finally:
        warming.cancel()
        await worker.stop()


async def warm_up(litellm: Any) -> None:
    """One streamed call answered by litellm itself (``mock_response``: nothing is sent anywhere), so that the
    modules and tables litellm loads on its first call are loaded before a person's first reply needs them:
    that first call took 0.3 s more than the next ones, measured here."""
    messages = [{"role": "user", "content": "warm-up"}]
    try:
        stream = await litellm.acompletion(model="openai/kith-warm-up", messages=messages, stream=True,
                                           mock_response="ok")
        async for _chunk in stream:
            break  # its end would count the prompt's tokens (a mock sends no usage), loading a tokenizer
    except Exception as exc:  # a litellm without it, or changed: the first call simply loads them itself
        log.info("model process warm-up skipped error=%s", type(exc).__name__)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # A service manager's SIGTERM reaches every process of the service (and Ctrl-C the whole group, for
    # a parent that did not give this one a session of its own). The parent decides when this process
    # ends, by closing its stdin once nothing can make a call any more.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # The wire gets stdout's pipe to itself: whatever a library prints goes to stderr instead.
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        loop.run(serve(sys.stdin.buffer, answers))
    except BrokenPipeError:
        # The parent died (killed while this process was loading): nobody is left to answer, nothing is lost
        # here, and exiting at once skips the flush at exit that would only fail again.
        os._exit(0)


if __name__ == "__main__":
    main()
