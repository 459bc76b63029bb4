"""One active bot per database: on PostgreSQL, bots on any number of machines share one database, one of them active
and the rest standbys that take over when it is gone.

The active bot holds a session advisory lock on a connection of its own. PostgreSQL lets go of it the moment that
session ends: at once when the process dies (its socket closes with it, ``kill -9`` included), and within
:data:`~ground.tunables.ACTIVE_KEEPALIVE_S` when its machine vanishes (TCP keepalives on the connection make the
server notice a peer that no longer answers). A standby asks for the lock every
:data:`~ground.tunables.ACTIVE_POLL_S`, saying once that it waits; only the holder goes on to connect to the
platforms and run the heartbeat, and it takes the inbox and outbox up exactly as a restart does.

The holder checks its own session every :data:`~ground.tunables.ACTIVE_CHECK_S`: a session lost (the network between
it and the database cut) may have handed the lock to a standby, so the bot stops (:attr:`ActiveLock.lost`) rather
than run beside the new active one; whatever supervises it starts it again, as a standby.

SQLite needs none of this: its database is a file of one machine, guarded by the data directory's lock
(:mod:`ground.instance`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import threading
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from ground.tunables import ACTIVE_CHECK_S, ACTIVE_CONNECT_TIMEOUT_S, ACTIVE_KEEPALIVE_S, ACTIVE_POLL_S

log = logging.getLogger("kith.active")

# The advisory lock's key: the same for every kith on a database (a 64-bit number from a fixed name).
LOCK_KEY = int.from_bytes(hashlib.blake2b(b"kith: the active bot", digest_size=8).digest(), "big", signed=True)


def needs_active_lock(url: str) -> bool:
    """Whether bots on other machines may share this database (a server database, not an SQLite file)."""
    return sa.engine.make_url(url).get_backend_name() == "postgresql"


def libpq_conninfo(url: str) -> str:
    """A SQLAlchemy PostgreSQL URL (``postgresql+psycopg://…``) as the libpq URI psycopg connects with."""
    return sa.engine.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class ActiveLock:
    """The active bot's session advisory lock on ``url``'s database."""

    def __init__(self, url: str, *, poll_s: float = ACTIVE_POLL_S, check_s: float = ACTIVE_CHECK_S) -> None:
        self.url = url
        self.poll_s = poll_s
        self.check_s = check_s
        self.lost = asyncio.Event()  # set when the holder's session was lost: the bot must stop
        self._conn: Any = None
        self._watch: asyncio.Task[None] | None = None
        self._io = threading.Lock()  # one statement at a time on the lock's connection

    async def take(self, say: Callable[[str], None]) -> None:
        """Hold the lock, waiting as a standby while another bot does (``say`` gets one line, once)."""
        said = False
        while True:
            try:
                if await asyncio.to_thread(self._try):
                    break
            except Exception as exc:  # the database is unreachable: a standby keeps trying, saying why once
                self._close()
                if not said:
                    said = True
                    say(f"cannot reach the database to learn which kith is active ({type(exc).__name__}); "
                        "trying again")
                await asyncio.sleep(self.poll_s)
                continue
            if not said:
                said = True
                say("another kith is active on this database; waiting as its standby (this one takes over when it "
                    "stops)")
            await asyncio.sleep(self.poll_s)
        if said:
            say("this kith is now the active one")
        log.info("active lock held")
        self._watch = asyncio.get_running_loop().create_task(self._watching(), name="active-lock")

    def _try(self) -> bool:
        import psycopg  # the PostgreSQL driver, only where the database is PostgreSQL

        with self._io:
            if self._conn is None or self._conn.closed:
                keepalive = max(1, int(ACTIVE_KEEPALIVE_S / 3))
                self._conn = psycopg.connect(libpq_conninfo(self.url), autocommit=True,
                                             connect_timeout=int(ACTIVE_CONNECT_TIMEOUT_S), keepalives=1,
                                             keepalives_idle=keepalive, keepalives_interval=keepalive,
                                             keepalives_count=2, application_name="kith-active-lock")
            row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_KEY,)).fetchone()
            return bool(row and row[0])

    def _still_held(self) -> bool:
        with self._io:
            # A bigint advisory key is kept as two 32-bit halves (classid high, objid low, objsubid 1).
            unsigned = LOCK_KEY & 0xFFFFFFFFFFFFFFFF
            row = self._conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted "
                "AND classid::bigint = %s AND objid::bigint = %s AND objsubid = 1",
                (unsigned >> 32, unsigned & 0xFFFFFFFF)).fetchone()
            return bool(row and row[0])

    async def _watching(self) -> None:
        while True:
            await asyncio.sleep(self.check_s)
            try:
                held = await asyncio.to_thread(self._still_held)
            except Exception as exc:
                log.error("active lock lost: its database session failed (%s); stopping so that only one kith "
                          "is active", type(exc).__name__)
                held = False
            else:
                if not held:
                    log.error("active lock lost: the database no longer holds it for this kith; stopping")
            if not held:
                self.lost.set()
                return

    async def release(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        with self._io:
            conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()  # the session ends: PostgreSQL lets go of the lock
