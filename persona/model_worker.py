"""The model process: litellm in a child process of its own, answering requests over its pipes.

litellm spends 3 to 4 ms of CPU on every call (request building, its own logging and cost
bookkeeping). In the bot's process that time holds the interpreter lock the chat adapters, the
database thread and delivery need; here it runs on another core. ``persona.model_process`` is the
parent's side.

The wire is one JSON object per line. Requests: ``{"id", "kwargs", "api_key_env", "timeout_s"}``
and ``{"cancel": id}``. Answers: ``{"ready": pid}`` once litellm is loaded, then
``{"id", "reply": {...}}`` or ``{"id", "error": {"kind", "retryable", "type"}}``. The API key
never crosses the pipe: the child reads the variable the config names, as the parent would.

    python -m persona.model_worker   (started by the parent; end it by closing its stdin)
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import signal
import sys
from typing import Any

from persona.llm import LLMReply, ToolCall, call_litellm, classify, import_litellm, with_api_key

# A prompt is bounded by the budgets (tens of kilobytes); this only stops a runaway line.
WIRE_LINE_LIMIT = 64 * 1024 * 1024

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


class Worker:
    def __init__(self, litellm: Any, write: Any) -> None:
        self._litellm = litellm
        self._write = write  # bytes -> None
        self._tasks: dict[int, asyncio.Task[None]] = {}

    def take(self, request: dict[str, Any]) -> None:
        if "cancel" in request:
            task = self._tasks.get(request["cancel"])
            if task is not None:
                task.cancel()
            return
        call_id = request["id"]
        self._tasks[call_id] = asyncio.create_task(self._answer(call_id, request))

    async def _answer(self, call_id: int, request: dict[str, Any]) -> None:
        try:
            kwargs = with_api_key(dict(request["kwargs"]), request.get("api_key_env") or "")
            reply = await call_litellm(self._litellm, kwargs, float(request["timeout_s"]))
            self._write(encode({"id": call_id, "reply": reply_to_wire(reply)}))
        except asyncio.CancelledError:
            pass  # the parent gave up on this call; it expects no answer
        except Exception as exc:  # every failure goes back classified; the parent decides on retries
            kind, retryable = classify(exc)
            self._write(encode({"id": call_id, "error": {"kind": kind, "retryable": retryable,
                                                         "type": type(exc).__name__}}))
        finally:
            self._tasks.pop(call_id, None)

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def serve(wire_out: int) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=WIRE_LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out = os.fdopen(wire_out, "wb", buffering=0)
    transport, _ = await loop.connect_write_pipe(asyncio.Protocol, out)
    litellm = import_litellm()
    gc.collect()
    gc.freeze()  # litellm's modules live as long as the process: keep the collector off them
    worker = Worker(litellm, transport.write)
    transport.write(encode({"ready": os.getpid()}))
    try:
        while line := await reader.readline():  # EOF: the parent closed the pipe or is gone
            try:
                request = json.loads(line)
            except ValueError:
                log.error("model process: unreadable request of %d bytes dropped", len(line))
                continue
            worker.take(request)
    finally:
        await worker.stop()
        transport.close()


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # The terminal's Ctrl-C reaches the whole process group; the parent decides when this process ends
    # (by closing its stdin), after the calls under way have answered.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The wire gets stdout's pipe to itself: whatever a library prints goes to stderr instead.
    wire_out = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    from core import loop

    loop.run(serve(wire_out))


if __name__ == "__main__":
    main()
