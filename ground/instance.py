"""One writer per data directory: the lock every command that keeps data takes, and who holds it.

Two bots on one database would both answer what a crash left in the inbox, both run the heartbeat's
jobs from the shared job store, and both take up the same outbox lanes; two embedded Chroma clients on
one directory corrupt each other's view of it (Chroma supports one process per directory). So one
process at a time owns the data directory:

* ``bot.py run`` and ``chat`` hold the lock while they run. A second bot refuses to start; a bot
  that finds an operator command holding it waits for that command, saying so in one line.
* An operator command (``memory``, ``people``, ``pairing``, ``consolidate``, ``heartbeat``, ``decay``
  and doctor's store checks) never opens the stores beside a bot: it sends its request to the running
  bot over the control socket (:mod:`kith.control`). With no bot running it takes the lock itself
  for its duration, and a command that finds another command holding it waits its turn.

The lock is the operating system's (``flock`` on POSIX, through filelock), on a file beside the
database, so it goes with its process however that ends (``kill -9`` included). Beside it the holder
writes who it is (:data:`HOLDER_FILE`: role and pid), so a process that finds it taken can tell a
bot (connect to it, or refuse to be a second one) from a command (wait for it).

It guards one machine: with ``database_url`` on a shared PostgreSQL, bots on two machines still see
two different locks.

Every command that keeps data checks first that its data directory can be created and written
(``usable_data_dir``), so a read-only or misplaced one is one line naming the path, not a traceback
from whichever library touched it first.
"""

from __future__ import annotations

import asyncio
import enum
import errno
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from ground.tunables import LOCK_HOLDER_GRACE_S, LOCK_POLL_S

LOCK_FILE = "kith.lock"
HOLDER_FILE = "kith.lock.holder"  # {"role": "bot" | "command", "pid": N}, written by the lock's holder


class Role(enum.StrEnum):
    BOT = "bot"
    COMMAND = "command"


@dataclass(frozen=True, slots=True)
class Holder:
    role: Role
    pid: int

    def describe(self) -> str:
        return f"a kith bot (pid {self.pid})" if self.role is Role.BOT else f"an operator command (pid {self.pid})"


class AlreadyRunning(Exception):
    """Another kith holds this data directory."""


class DataDirUnusable(Exception):
    """The data directory cannot be created, or kith cannot write in it."""


class HalfMigrated(Exception):
    """The database is the target of an unfinished ``bot.py migrate`` (:mod:`ground.migration`): kith must not run
    on it. Declared here, with the other reasons a command cannot use its store, so the command line can name it
    without loading the database's libraries."""


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


def already_running(data_dir: Path, holder: Holder | None) -> AlreadyRunning:
    who = f" ({holder.describe()})" if holder is not None else ""
    return AlreadyRunning(f"another kith is already running on {data_dir}{who}; "
                          "stop it first, or give this one its own [storage] data_dir")


class DataDirLock:
    """The data directory's lock, taken without waiting; the waiting policies live with their callers."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._lock = FileLock(data_dir / LOCK_FILE, timeout=0)
        self._held = False

    def try_acquire(self, role: Role) -> bool:
        """Take the lock if it is free, and say who holds it now; False if another process holds it."""
        try:
            self._lock.acquire()
        except Timeout:
            return False
        self._held = True
        try:
            _write_holder(self.data_dir / HOLDER_FILE, Holder(role, os.getpid()))
        except BaseException:
            self.release()
            raise
        return True

    def holder(self) -> Holder | None:
        """Who holds the lock, as its holder wrote it; None while that is not written (yet) or unreadable."""
        return read_holder(self.data_dir)

    def release(self) -> None:
        if not self._held:
            return
        self._held = False
        # Cleared before the lock goes, so a process that finds the lock taken never reads the last holder's
        # role for the next one's.
        (self.data_dir / HOLDER_FILE).unlink(missing_ok=True)
        self._lock.release()

    @property
    def held(self) -> bool:
        return self._held


def read_holder(data_dir: Path) -> Holder | None:
    try:
        data = json.loads((data_dir / HOLDER_FILE).read_text(encoding="utf-8"))
        return Holder(Role(data["role"]), int(data["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_holder(path: Path, holder: Holder) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(json.dumps({"role": holder.role.value, "pid": holder.pid}), encoding="utf-8")
    os.replace(temporary, path)  # a reader sees the old holder or the new one, never half of either


async def take_for_bot(lock: DataDirLock, say: Callable[[str], None]) -> None:
    """Take the lock for a bot: ``AlreadyRunning`` if another bot holds it; while a command does, wait for it.

    ``say`` gets one line, once, when the bot has to wait.
    """
    unknown_since: float | None = None
    said = False
    while not lock.try_acquire(Role.BOT):
        holder = lock.holder()
        if holder is None:  # its holder is writing who it is, or is an older kith that never says
            unknown_since = unknown_since if unknown_since is not None else time.monotonic()
            if time.monotonic() - unknown_since >= LOCK_HOLDER_GRACE_S:
                raise already_running(lock.data_dir, None)
        elif holder.role is Role.BOT:
            raise already_running(lock.data_dir, holder)
        else:
            unknown_since = None
            if not said:
                said = True
                say(f"waiting for {holder.describe()} to finish with {lock.data_dir}")
        await asyncio.sleep(LOCK_POLL_S)
