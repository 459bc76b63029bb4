"""One bot per data directory: a second ``bot.py run`` or ``chat`` on the same data refuses to start.

Two bots on one database would both answer what a crash left in the inbox, both run the heartbeat's
jobs from the shared job store, and both take up the same outbox lanes. The lock is the operating
system's (``flock`` on POSIX), on a file beside the database, so it goes with its process however
that ends (``kill -9`` included) and needs no clean-up. The one-shot operator commands (``memory``,
``heartbeat --now``, ``consolidate``) do not take it: they are meant to run beside the bot.

It guards one machine: with ``database_url`` on a shared PostgreSQL, bots on two machines still see
two different locks.

Every command that keeps data checks first that its data directory can be created and written
(``usable_data_dir``), so a read-only or misplaced one is one line naming the path, not a traceback
from whichever library touched it first.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = "kith.lock"


class AlreadyRunning(Exception):
    """Another kith holds this data directory."""


class DataDirUnusable(Exception):
    """The data directory cannot be created, or kith cannot write in it."""


def usable_data_dir(data_dir: Path) -> Path:
    """``data_dir``, created if need be; ``DataDirUnusable`` naming it if it cannot be created or written in."""
    hint = "set [storage] data_dir to a directory kith can write in"
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise DataDirUnusable(f"the data directory {data_dir} is not a directory; {hint}") from None
    except OSError as exc:
        raise DataDirUnusable(f"cannot create the data directory {data_dir}: {_reason(exc)}; {hint}") from None
    # Permission bits alone do not say it (a read-only mount, root, ACLs): write a file and remove it.
    probe = data_dir / f".kith-write-probe-{os.getpid()}"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        probe.unlink()
    except FileExistsError:
        probe.unlink(missing_ok=True)  # a probe left by a process of the same pid that died: writable
    except OSError as exc:
        raise DataDirUnusable(f"cannot write in the data directory {data_dir}: {_reason(exc)}; {hint}") from None
    return data_dir


def _reason(exc: OSError) -> str:
    return exc.strerror or errno.errorcode.get(exc.errno or 0, type(exc).__name__)


@contextmanager
def sole_bot(data_dir: Path) -> Iterator[None]:
    """Hold the data directory's lock for the block; ``AlreadyRunning`` at once if another process holds it."""
    from filelock import FileLock, Timeout

    usable_data_dir(data_dir)
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
