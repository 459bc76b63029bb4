"""An operator command's side of the shared database: whether a bot is active on it, and a command sent to that bot
as a row (:mod:`kith.control.request_rows`), its answer relayed as it comes.

Plain psycopg and SQL, no SQLAlchemy: like the socket's client, a command sent to a running bot stays light. The
database's advisory lock says whether a bot is active (:mod:`ground.active_bot`): a command that can take it is the
one writer itself for as long as it runs (:class:`DatabaseLock`), and a bot started meanwhile waits as a standby.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ground.active_bot import LOCK_KEY, libpq_conninfo
from ground.tunables import ACTIVE_CONNECT_TIMEOUT_S, CONTROL_CONNECT_WAIT_S, CONTROL_REMOTE_WAIT_S
from kith.control.client import relay
from kith.control.parts import Console
from kith.control.request_rows import FRAMES_CHANNEL, REQUESTS_CHANNEL, WAITING


def _connect(url: str) -> Any:
    import psycopg  # the postgres extra: only a command on a PostgreSQL database gets here

    return psycopg.connect(libpq_conninfo(url), autocommit=True, connect_timeout=int(ACTIVE_CONNECT_TIMEOUT_S))


class DatabaseLock:
    """The active bot's advisory lock, taken by a command that runs its body itself (no bot is active anywhere):
    held on a connection of its own until :meth:`release`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Any = None

    def try_take(self) -> bool:
        conn = _connect(self.url)
        try:
            taken = bool(conn.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_KEY,)).fetchone()[0])
        except BaseException:
            conn.close()
            raise
        if not taken:
            conn.close()
            return False
        self._conn = conn
        return True

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()  # the session ends, and its lock with it


def bot_is_active(conn: Any) -> bool:
    """Whether some session holds the active bot's lock (a bot, or a command running as the one writer)."""
    row = conn.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
        "AND classid = ((%s::bigint >> 32) & 4294967295)::oid AND objid = (%s::bigint & 4294967295)::oid "
        "AND objsubid = 1", (LOCK_KEY, LOCK_KEY)).fetchone()
    return bool(row[0])


class DatabaseHost:
    """The active bot on another machine, reached through the database: each call is one request row."""

    def __init__(self, url: str, *, take_wait_s: float = CONTROL_CONNECT_WAIT_S,
                 check_s: float = CONTROL_REMOTE_WAIT_S) -> None:
        self.url = url
        self.take_wait_s = take_wait_s
        self.check_s = check_s
        self._conn = _connect(url)
        self._conn.execute(f"LISTEN {FRAMES_CHANNEL}")

    def call(self, name: str, args: dict[str, Any], console: Console) -> int:
        conn = self._conn
        row = conn.execute(
            "INSERT INTO control_requests (command, args, state, created_at) VALUES (%s, %s, %s, now()) "
            "RETURNING id", (name, json.dumps(args, ensure_ascii=False), WAITING)).fetchone()
        request_id = int(row[0])
        conn.execute("SELECT pg_notify(%s, %s)", (REQUESTS_CHANNEL, str(request_id)))
        try:
            return self._relay(request_id, console)
        finally:
            conn.execute("DELETE FROM control_frames WHERE request_id = %s", (request_id,))
            conn.execute("DELETE FROM control_requests WHERE id = %s", (request_id,))

    def _relay(self, request_id: int, console: Console) -> int:
        conn = self._conn
        seen = 0
        asked = time.monotonic()
        while True:
            frames = conn.execute("SELECT seq, frame FROM control_frames WHERE request_id = %s AND seq > %s "
                                  "ORDER BY seq", (request_id, seen)).fetchall()
            for seq, text in frames:
                seen = seq
                code = relay(json.loads(text), console)
                if code is not None:
                    return code
            if not frames:
                state = conn.execute("SELECT state FROM control_requests WHERE id = %s", (request_id,)).fetchone()
                if state is not None and state[0] == WAITING and time.monotonic() - asked > self.take_wait_s:
                    taken_back = conn.execute("DELETE FROM control_requests WHERE id = %s AND state = %s",
                                              (request_id, WAITING)).rowcount
                    if taken_back:
                        console.err.write(f"kith: no active bot took the command in {self.take_wait_s:.0f} s (it may "
                                          "be starting, or another operator command holds the database); run it "
                                          "again\n")
                        return 1
                if state is None or not bot_is_active(conn):
                    console.err.write("kith: the bot stopped before the command finished; run it again\n")
                    return 1
                for _note in conn.notifies(timeout=self.check_s, stop_after=1):
                    pass

    def close(self) -> None:
        self._conn.close()


__all__ = ["DatabaseHost", "DatabaseLock", "bot_is_active"]
