"""The active bot's side of operator commands sent as rows of the shared database (:mod:`kith.control.request_rows`).

Only the active bot serves them (it starts this once it holds the database's advisory lock), so there is still one
writer: a command from any machine runs in the bot, through the same body and the same one-writer lock as a command
from its socket (:func:`kith.control.server.answer`). A connection of its own listens on
:data:`~kith.control.request_rows.REQUESTS_CHANNEL` and wakes the loop that takes waiting rows; the loop also looks
every :data:`~ground.tunables.CONTROL_REMOTE_POLL_S`, so a notification lost with a dropped connection delays a
command, never loses it. A command's frames are written back in batches (:data:`~ground.tunables.
CONTROL_REMOTE_FLUSH_S` apart), each batch one transaction that notifies the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.active_bot import libpq_conninfo
from ground.db import Database
from ground.tunables import (
    ACTIVE_CONNECT_TIMEOUT_S,
    CONTROL_REMOTE_FLUSH_S,
    CONTROL_REMOTE_KEEP_S,
    CONTROL_REMOTE_POLL_S,
    CONTROL_STOP_GRACE_S,
)
from kith.control.frames import BadRequest, Request, parse_request
from kith.control.request_rows import (
    DONE,
    FRAMES_CHANNEL,
    REQUESTS_CHANNEL,
    RUNNING,
    WAITING,
    control_frames,
    control_requests,
)
from kith.control.server import Handler, Writes, answer

log = logging.getLogger("kith.control")


def claim_waiting(conn: Connection) -> list[Any]:
    """Every waiting request, now running: this bot's to answer."""
    t = control_requests
    rows = list(conn.execute(sa.select(t.c.id, t.c.command, t.c.args).where(t.c.state == WAITING)
                             .order_by(t.c.id).with_for_update(skip_locked=True)))
    if rows:
        conn.execute(t.update().where(t.c.id.in_([r.id for r in rows])).values(state=RUNNING))
    return rows


def write_frames(conn: Connection, request_id: int, first_seq: int, frames: list[dict[str, Any]],
                 done: bool) -> None:
    conn.execute(control_frames.insert(), [{"request_id": request_id, "seq": first_seq + i,
                                            "frame": json.dumps(f, ensure_ascii=False)}
                                           for i, f in enumerate(frames)])
    if done:
        conn.execute(control_requests.update().where(control_requests.c.id == request_id)
                     .values(state=DONE, done_at=datetime.now(UTC)))
    conn.execute(sa.select(sa.func.pg_notify(FRAMES_CHANNEL, str(request_id))))


def sweep(conn: Connection, before: datetime) -> int:
    """Answered requests no client collected, and requests a bot stopped in the middle of: their rows go."""
    t = control_requests
    stale = list(conn.execute(sa.select(t.c.id).where(
        sa.or_(sa.and_(t.c.state == DONE, t.c.done_at < before),
               sa.and_(t.c.state != DONE, t.c.created_at < before - timedelta(hours=1))))).scalars())
    if stale:
        conn.execute(control_frames.delete().where(control_frames.c.request_id.in_(stale)))
        conn.execute(t.delete().where(t.c.id.in_(stale)))
    return len(stale)


def abandon_running(conn: Connection) -> int:
    """Requests a previous active bot was running when it stopped: they end with an honest line, as a command on
    a socket does when its bot stops."""
    t = control_requests
    ids = list(conn.execute(sa.select(t.c.id).where(t.c.state == RUNNING)).scalars())
    for request_id in ids:
        last = conn.execute(sa.select(sa.func.max(control_frames.c.seq))
                            .where(control_frames.c.request_id == request_id)).scalar()
        write_frames(conn, request_id, (last or 0) + 1,
                     [{"err": "kith: the bot stopped before the command finished; run it again\n"}, {"exit": 1}],
                     done=True)
    return len(ids)


class DatabaseControl:
    """Answers operator commands that other machines leave in the database, while this bot is the active one."""

    def __init__(self, db: Database, url: str, handler: Handler, writes: Writes, one_writer: asyncio.Lock, *,
                 poll_s: float = CONTROL_REMOTE_POLL_S, flush_s: float = CONTROL_REMOTE_FLUSH_S,
                 keep_s: float = CONTROL_REMOTE_KEEP_S) -> None:
        self.db = db
        self.url = url
        self.handler = handler
        self.writes = writes
        self.one_writer = one_writer
        self.poll_s = poll_s
        self.flush_s = flush_s
        self.keep_s = keep_s
        self._wake = asyncio.Event()
        self._stop = threading.Event()
        self._listener: threading.Thread | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        await self.db.run(abandon_running)
        loop = asyncio.get_running_loop()
        self._listener = threading.Thread(target=self._listen, args=(loop,), name="kith-control-listen", daemon=True)
        self._listener.start()
        self._loop_task = loop.create_task(self._serve(), name="control-rows")
        log.info("control rows served channel=%s", REQUESTS_CHANNEL)

    def _listen(self, loop: asyncio.AbstractEventLoop) -> None:
        import psycopg  # the postgres extra: only a bot on PostgreSQL gets here

        while not self._stop.is_set():
            try:
                with psycopg.connect(libpq_conninfo(self.url), autocommit=True,
                                     connect_timeout=int(ACTIVE_CONNECT_TIMEOUT_S)) as conn:
                    conn.execute(f"LISTEN {REQUESTS_CHANNEL}")
                    loop.call_soon_threadsafe(self._wake.set)  # anything written before the LISTEN
                    while not self._stop.is_set():
                        for _note in conn.notifies(timeout=self.poll_s, stop_after=1):
                            loop.call_soon_threadsafe(self._wake.set)
            except Exception as exc:  # the loop still polls; the listener tries again
                if self._stop.is_set():
                    return
                log.warning("control listener lost error=%s", type(exc).__name__)
                self._stop.wait(self.poll_s)

    async def _serve(self) -> None:
        last_sweep = 0.0
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_s)
            self._wake.clear()
            try:
                for row in await self.db.run(claim_waiting):
                    task = asyncio.get_running_loop().create_task(self._run(row), name="control-row")
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
                if time.monotonic() - last_sweep >= self.keep_s:
                    last_sweep = time.monotonic()
                    await self.db.run(sweep, datetime.now(UTC) - timedelta(seconds=self.keep_s))
            except Exception as exc:  # the database is briefly unreachable: the next look tries again
                log.warning("control rows not read error=%s", type(exc).__name__)

    async def _run(self, row: Any) -> None:
        started = time.perf_counter()
        pending: list[dict[str, Any]] = []
        seq = [1]
        done = asyncio.Event()

        async def flush(final: bool) -> None:
            batch = pending[:]
            del pending[: len(batch)]
            if batch or final:
                await self.db.run(write_frames, row.id, seq[0], batch, final)
                seq[0] += len(batch)

        async def flusher() -> None:
            while not done.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), self.flush_s)
                if not done.is_set():
                    await flush(False)

        writer = asyncio.get_running_loop().create_task(flusher())
        code = 2
        try:
            try:
                request = self._request(row)
            except BadRequest as exc:
                pending += [{"err": f"kith: bad control request: {exc}\n"}, {"exit": 2}]
            else:
                code = await answer(request, pending.append, self.handler, self.writes, self.one_writer)
        finally:
            done.set()
            await writer
            await flush(True)
            log.info("control command command=%s exit=%d ms=%.1f via=database", row.command, code,
                     (time.perf_counter() - started) * 1000)

    @staticmethod
    def _request(row: Any) -> Request:
        try:
            args = json.loads(row.args)
        except ValueError:
            raise BadRequest("the arguments are not JSON") from None
        return parse_request(json.dumps({"command": row.command, "args": args}).encode())

    async def close(self) -> None:
        self._stop.set()
        if self._loop_task is not None:
            self._loop_task.cancel()
            await asyncio.gather(self._loop_task, return_exceptions=True)
        if self._tasks:  # as on the socket: a command still running gets a grace, then is cancelled
            _done, pending = await asyncio.wait(set(self._tasks), timeout=CONTROL_STOP_GRACE_S)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self._listener is not None:
            await asyncio.to_thread(self._listener.join, self.poll_s + 1)


__all__ = ["DatabaseControl", "abandon_running", "claim_waiting", "sweep", "write_frames"]
