"""The parent's side of the model process (``llm.worker``): start it, send it calls, read
its answers, and start another if it dies.

A call whose process dies under it is sent again to the next process, which it waits for: the
model did not fail, kith's own process did, so neither the client's retries (an operator may
allow none) nor the honest reply are spent on it. A call that outlives its time is cancelled in
the child as well; a child that misses its own deadline by that much is hung and is replaced.

A child that dies while it loads (killed, say) is started again at once, and the calls waiting
for it keep waiting, as long as the start itself may take: loading is kith's own work, not the
model's, so ``[llm] timeout_s`` bounds the model call, not the wait for a process to make it in
(a busy machine has taken 7 s to load one). Only a child that cannot start several times in a
row, or within the start timeout, makes calls fail at once, for a while, so the honest reply is
for a model process that really cannot run, never for one moment's bad luck.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ground.tunables import (
    MODEL_PROCESS_CALL_RESENDS,
    MODEL_PROCESS_HUNG_MARGIN_S,
    MODEL_PROCESS_LINE_LIMIT,
    MODEL_PROCESS_QUERY_TIMEOUT_S,
    MODEL_PROCESS_RESPAWN_PAUSE_S,
    MODEL_PROCESS_START_ATTEMPTS,
)
from llm.client import LLMError, LLMReply, TextSink
from llm.worker import encode, reply_from_wire

log = logging.getLogger("kith.model_process")

PROJECT_ROOT = Path(__file__).resolve().parent.parent
WORKER_COMMAND = (sys.executable, "-m", "llm.worker")


@dataclass
class _Child:
    """One child process and what only it can answer: its calls belong to it, not to its successor."""

    proc: asyncio.subprocess.Process
    ready: asyncio.Future[int]
    pending: dict[int, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    reader: asyncio.Task[None] | None = None
    streams: dict[int, Callable[[str], None]] = field(default_factory=dict)  # call id -> its deltas' listener

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None and self.reader is not None and not self.reader.done()


class _ChildExited(LLMError):
    """The process a call was sent to ended before it answered: the call may go to the next one."""

    def __init__(self) -> None:
        super().__init__("unavailable", "model process exited")


def _settle(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)
    future.exception()  # retrieved: whoever awaits it sees it; nobody else need be told


class ModelProcess:
    """A child process making litellm calls; ``complete`` is ``LLMClient``'s ``calls``.

    ``command`` starts the child (tests give one that cannot start); ``start_attempts`` children in a
    row that die before they are ready make a failed start, after which calls fail at once for
    ``restart_backoff_s``.
    """

    def __init__(self, *, start_timeout_s: float, stop_timeout_s: float, restart_backoff_s: float,
                 start_attempts: int = MODEL_PROCESS_START_ATTEMPTS,
                 respawn_pause_s: float = MODEL_PROCESS_RESPAWN_PAUSE_S,
                 command: Sequence[str] = WORKER_COMMAND) -> None:
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.restart_backoff_s = restart_backoff_s
        self.start_attempts = start_attempts
        self.respawn_pause_s = respawn_pause_s
        self.command = tuple(command)
        self.spawned = 0  # children started so far, for tests and logs
        self._child: _Child | None = None
        self._ids = itertools.count(1)
        self._starting: asyncio.Task[_Child] | None = None  # the one start under way, which every call awaits
        self._closed = asyncio.Event()
        self._failed_start_at: float | None = None  # monotonic time of the latest failed start

    @property
    def pid(self) -> int | None:
        child = self._child
        return child.proc.pid if child is not None and child.alive else None

    async def start(self, timeout_s: float | None = None) -> None:
        """Return once a child is ready, starting one if none runs; wait at most ``timeout_s`` for it.

        ``LLMError`` if the child cannot start (non-retryable: the next tries are the start's own),
        if it is not ready within ``timeout_s`` or if the process is closed.
        """
        child = self._child
        if child is not None and child.alive and child.ready.done() and not self._closed.is_set():
            return
        starting = self._start_task()
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.shield(starting)
        except TimeoutError:
            # The start goes on for the calls after this one; this call has spent its time waiting.
            raise LLMError("timeout", "model process still starting", retryable=False) from None
        if self._closed.is_set():  # closed while it loaded: it is ending, not started
            raise LLMError("unavailable", "model process closed", retryable=False)

    def begin(self) -> None:
        """Spawn a child now, without waiting for it: it loads while the caller goes on. A start that cannot be
        made is left for the first call, which tries again and fails honestly."""
        with contextlib.suppress(LLMError):
            self._start_task()

    def _start_task(self) -> asyncio.Task[_Child]:
        if self._closed.is_set():
            raise LLMError("unavailable", "model process closed", retryable=False)
        starting = self._starting
        if starting is not None and not starting.done():
            return starting
        failed = self._failed_start_at
        if failed is not None and time.monotonic() - failed < self.restart_backoff_s:
            # A child that cannot start fails every call at once for a while, not after a respawn each.
            raise LLMError("unavailable", "model process failed to start", retryable=False)
        self._starting = starting = asyncio.create_task(self._start_child(), name="model-process-start")
        starting.add_done_callback(_retrieve)
        return starting

    async def _start_child(self) -> _Child:
        """Spawn children until one is ready; a failed start after ``start_attempts`` deaths in a row."""
        deaths = 0
        while True:
            self._child = child = await self._spawn()
            if self._closed.is_set():  # closed while it spawned: close() saw no child to end
                await self._end(child)
                raise LLMError("unavailable", "model process closed", retryable=False)
            try:
                async with asyncio.timeout(self.start_timeout_s):
                    await asyncio.shield(child.ready)
                self._failed_start_at = None
                return child
            except TimeoutError:
                log.error("model process not ready after %.0f s; killed pid=%s", self.start_timeout_s,
                          child.proc.pid)
                with contextlib.suppress(ProcessLookupError):
                    child.proc.kill()
                self._failed_start_at = time.monotonic()
                raise LLMError("unavailable", "model process did not start", retryable=False) from None
            except LLMError:
                if self._closed.is_set():
                    raise
                deaths += 1
                if deaths >= self.start_attempts:
                    log.error("model process failed to start attempts=%d; calls fail at once for %.0f s",
                              deaths, self.restart_backoff_s)
                    self._failed_start_at = time.monotonic()
                    raise
                log.warning("model process died while starting pid=%s attempt=%d; starting another",
                            child.proc.pid, deaths)
            # A pause, so that a child that dies at once is not respawned in a tight loop; a close ends it.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.respawn_pause_s):
                    await self._closed.wait()
            if self._closed.is_set():
                raise LLMError("unavailable", "model process closed", retryable=False)

    async def _spawn(self) -> _Child:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
        started = time.perf_counter()
        # A session of its own: Ctrl-C at a terminal goes to the whole foreground group, and one landing
        # while the child still imports (before it ignores signals) would kill it with a traceback. The
        # parent ends it (close() closes its stdin), and the end of that pipe ends it if the parent dies.
        proc = await asyncio.create_subprocess_exec(
            *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env,
            limit=MODEL_PROCESS_LINE_LIMIT, start_new_session=True)
        self.spawned += 1
        child = _Child(proc, asyncio.get_running_loop().create_future())
        child.reader = asyncio.create_task(self._read(child, started), name="model-process")
        return child

    async def _read(self, child: _Child, started: float) -> None:
        proc = child.proc
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
                    if not child.ready.done():
                        child.ready.set_result(int(answer["ready"]))
                    continue
                if "delta" in answer:
                    listener = child.streams.get(answer.get("id"))
                    if listener is not None:
                        listener(str(answer["delta"]))
                    continue
                waiter = child.pending.pop(answer.get("id"), None)  # None: a call given up on meanwhile
                if waiter is not None and not waiter.done():
                    waiter.set_result(answer)
        except (OSError, ValueError) as exc:  # ValueError: a line past the limit
            log.error("model process: pipe failed error=%s", type(exc).__name__)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()  # its answers can no longer be told apart
        finally:
            code = await self._reap(proc)
            if not self._closed.is_set():
                log.error("model process exited pid=%s code=%s pending=%d", proc.pid, code, len(child.pending))
            _settle(child.ready, LLMError("unavailable", "model process failed to start", retryable=False))
            for waiter in child.pending.values():
                _settle(waiter, _ChildExited())
            child.pending.clear()

    async def _reap(self, proc: asyncio.subprocess.Process) -> int | None:
        """The exit code of a child whose pipe ended; one that lingers past the stop timeout is killed."""
        try:
            async with asyncio.timeout(self.stop_timeout_s):
                return await proc.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            return await proc.wait()

    async def complete(self, kwargs: dict[str, Any], api_key_env: str, timeout_s: float,
                       on_text: TextSink | None = None) -> LLMReply:
        return await self._call("complete", kwargs, api_key_env, timeout_s, on_text)

    async def transcribe(self, kwargs: dict[str, Any], api_key_env: str, timeout_s: float) -> LLMReply:
        """A transcription (:func:`llm.client.call_transcription`): the audio crosses the pipe as base64."""
        return await self._call("transcribe", kwargs, api_key_env, timeout_s, None)

    async def sees_images(self, model: str) -> bool:
        """litellm's word, asked in this process (:func:`llm.client.model_sees_images`)."""
        reply = await self._call("sees_images", {"model": model}, "", MODEL_PROCESS_QUERY_TIMEOUT_S, None)
        return reply.text == "yes"

    async def _call(self, call: str, kwargs: dict[str, Any], api_key_env: str, timeout_s: float,
                    on_text: TextSink | None) -> LLMReply:
        resent = 0
        while True:
            try:
                return await self._send(await self._ready_child(), call, kwargs, api_key_env, timeout_s, on_text)
            except _ChildExited:
                if self._closed.is_set() or resent >= MODEL_PROCESS_CALL_RESENDS:
                    raise
                resent += 1
                log.warning("model call lost with its process; sending it to the next one resend=%d", resent)

    async def _ready_child(self) -> _Child:
        child = self._child
        if child is None or not child.alive or not child.ready.done() or self._closed.is_set():
            await self.start()  # the wait only when there is no ready child: not per call
            child = self._child
            if child is None or not child.alive:  # died between start() and here
                raise _ChildExited()
        return child

    async def _send(self, child: _Child, call: str, kwargs: dict[str, Any], api_key_env: str, timeout_s: float,
                    on_text: TextSink | None = None) -> LLMReply:
        stdin = child.proc.stdin
        assert stdin is not None
        call_id = next(self._ids)
        line = encode({"id": call_id, "call": call, "kwargs": kwargs, "api_key_env": api_key_env,
                       "timeout_s": timeout_s})
        if len(line) > MODEL_PROCESS_LINE_LIMIT:  # the child could not read it; the same request never could
            raise LLMError("bad_request", "request too large for the model process", retryable=False)
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        child.pending[call_id] = waiter
        if on_text is not None:
            # The text grows here from the deltas; a call sent again to the next process starts from nothing.
            grown = ""

            def heard(delta: str) -> None:
                nonlocal grown
                grown += delta
                on_text(grown)

            child.streams[call_id] = heard
        try:
            stdin.write(line)
            async with asyncio.timeout(timeout_s + MODEL_PROCESS_HUNG_MARGIN_S):
                await stdin.drain()
                answer = await waiter
        except ConnectionError:
            raise _ChildExited() from None
        except TimeoutError:
            # The child missed its own deadline by a second: hung. Its calls fail over to a new one.
            log.error("model process hung; killed pid=%s pending=%d", child.proc.pid, len(child.pending))
            with contextlib.suppress(ProcessLookupError):
                child.proc.kill()
            raise
        except asyncio.CancelledError:  # the caller gave up: so may the child
            if child.alive and not stdin.is_closing():
                stdin.write(encode({"cancel": call_id}))
            raise
        finally:
            child.pending.pop(call_id, None)
            child.streams.pop(call_id, None)
            if waiter.done() and not waiter.cancelled():
                waiter.exception()  # an exit noticed while we were leaving anyway: nothing to report twice
        if "error" in answer:
            error = answer["error"]
            raise LLMError(str(error.get("kind", "error")), str(error.get("type", "")),
                           retryable=bool(error.get("retryable", False)))
        return reply_from_wire(answer["reply"])

    async def close(self) -> None:
        """End the child; the caller has stopped everything that could still make a call."""
        self._closed.set()
        child = self._child
        if child is not None and not child.ready.done():
            with contextlib.suppress(ProcessLookupError):
                child.proc.kill()  # still loading: it has no call to finish, and loading takes seconds
        starting = self._starting
        if starting is not None:
            await asyncio.gather(starting, return_exceptions=True)  # it sees the close and ends at once
        if self._child is not None:
            await self._end(self._child)

    async def _end(self, child: _Child) -> None:
        proc = child.proc
        if proc.returncode is None and proc.stdin is not None:
            proc.stdin.close()  # EOF: the child ends; anything it still had is cancelled
            await self._reap(proc)
        if child.reader is not None:
            await asyncio.gather(child.reader, return_exceptions=True)


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()  # whoever awaits the start sees its failure; a start nobody awaits need not be logged
