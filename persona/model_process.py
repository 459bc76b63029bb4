"""The parent's side of the model process (``persona.model_worker``): start it, send it calls, read
its answers, and start it again if it dies.

A call whose process dies fails as ``unavailable`` (retryable): the client's own retries then
reach a fresh process. A call that outlives its time is cancelled in the child as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from persona.llm import LLMError, LLMReply
from persona.model_worker import WIRE_LINE_LIMIT, encode, reply_from_wire

log = logging.getLogger("kith.model_process")

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class ModelProcess:
    """A child process making litellm calls; ``complete`` is ``LLMClient``'s ``calls``."""

    def __init__(self, *, start_timeout_s: float, stop_timeout_s: float) -> None:
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[int] | None = None
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._starting = asyncio.Lock()
        self._closed = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.returncode is None else None

    async def start(self) -> None:
        """Start the child unless it runs; return once it has loaded litellm."""
        async with self._starting:
            if self._closed:
                raise LLMError("unavailable", "model process closed", retryable=False)
            if self._proc is None or self._proc.returncode is not None:
                await self._spawn()
            assert self._ready is not None
            ready = self._ready
        try:
            async with asyncio.timeout(self.start_timeout_s):
                await asyncio.shield(ready)
        except TimeoutError:
            log.error("model process not ready after %.0f s", self.start_timeout_s)
            raise LLMError("unavailable", "model process did not start", retryable=False) from None

    async def _spawn(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
        started = time.perf_counter()
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "persona.model_worker", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, env=env, limit=WIRE_LINE_LIMIT)
        self._ready = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read(self._proc, self._ready, started), name="model-process")

    async def _read(self, proc: asyncio.subprocess.Process, ready: asyncio.Future[int], started: float) -> None:
        assert proc.stdout is not None
        try:
            while line := await proc.stdout.readline():
                try:
                    answer = json.loads(line)
                except ValueError:
                    log.error("model process: unreadable answer of %d bytes", len(line))
                    continue
                if "ready" in answer:
                    log.info("model process ready pid=%s ms=%.0f", answer["ready"],
                             (time.perf_counter() - started) * 1000)
                    if not ready.done():
                        ready.set_result(int(answer["ready"]))
                    continue
                waiter = self._pending.pop(answer.get("id"), None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(answer)
        except (OSError, ValueError) as exc:  # ValueError: a line past the limit
            log.error("model process: pipe failed error=%s", type(exc).__name__)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()  # its answers can no longer be told apart
        finally:
            code = await self._reap(proc)
            if not self._closed:
                log.error("model process exited pid=%s code=%s pending=%d", proc.pid, code, len(self._pending))
            gone = LLMError("unavailable", "model process exited")
            if not ready.done():
                if self._closed:
                    ready.cancel()
                else:
                    ready.set_exception(LLMError("unavailable", "model process failed to start", retryable=False))
            for waiter in self._pending.values():
                if not waiter.done():
                    waiter.set_exception(gone)
            self._pending.clear()

    async def _reap(self, proc: asyncio.subprocess.Process) -> int | None:
        """The exit code of a child whose pipe ended; one that lingers past the stop timeout is killed."""
        try:
            async with asyncio.timeout(self.stop_timeout_s):
                return await proc.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            return await proc.wait()

    async def complete(self, kwargs: dict[str, Any], api_key_env: str, timeout_s: float) -> LLMReply:
        await self.start()
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        call_id = next(self._ids)
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = waiter
        if self._reader is None or self._reader.done():  # died between start() and here
            self._pending.pop(call_id, None)
            raise LLMError("unavailable", "model process exited")
        try:
            proc.stdin.write(encode({"id": call_id, "kwargs": kwargs, "api_key_env": api_key_env,
                                     "timeout_s": timeout_s}))
            # The child bounds the call by timeout_s + 1; this only guards against a child that hangs.
            async with asyncio.timeout(timeout_s + 2):
                await proc.stdin.drain()
                answer = await waiter
        except (ConnectionError, BrokenPipeError):
            raise LLMError("unavailable", "model process exited") from None
        except BaseException:  # timed out or cancelled here: the child need not finish it
            self._pending.pop(call_id, None)
            if proc.returncode is None and not proc.stdin.is_closing():
                proc.stdin.write(encode({"cancel": call_id}))
            raise
        if "error" in answer:
            error = answer["error"]
            raise LLMError(str(error.get("kind", "error")), str(error.get("type", "")),
                           retryable=bool(error.get("retryable", False)))
        return reply_from_wire(answer["reply"])

    async def close(self) -> None:
        self._closed = True
        proc, reader = self._proc, self._reader
        if proc is None:
            return
        if proc.returncode is None and proc.stdin is not None:
            proc.stdin.close()  # EOF: the child cancels what it still has and exits
            await self._reap(proc)
        if reader is not None:
            await asyncio.gather(reader, return_exceptions=True)
