"""One bot per data directory: a second ``bot.py run`` or ``chat`` on the same data refuses to start.

Two bots on one database would both answer what a crash left in the inbox, both run the heartbeat's
jobs from the shared job store, and both take up the same outbox lanes. The lock is the operating
system's (``flock`` on POSIX), on a file beside the database, so it goes with its process however
that ends (``kill -9`` included) and needs no clean-up. The one-shot operator commands (``memory``,
``heartbeat --now``, ``consolidate``) do not take it: they are meant to run beside the bot.

It guards one machine: with ``database_url`` on a shared PostgreSQL, bots on two machines still see
two different locks.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = "kith.lock"


class AlreadyRunning(Exception):
    """Another kith holds this data directory."""


@contextmanager
def sole_bot(data_dir: Path) -> Iterator[None]:
    """Hold the data directory's lock for the block; ``AlreadyRunning`` at once if another process holds it."""
    from filelock import FileLock, Timeout

    data_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(data_dir / LOCK_FILE, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise AlreadyRunning(f"another kith is already running on {data_dir} (it holds {LOCK_FILE}); "
                             "stop it first, or give this one its own [storage] data_dir") from None
    try:
        yield
    finally:
        lock.release()
