"""An operator command's own process: through the running bot, or holding the lock when none runs.

:func:`run_command` is what ``bot.py`` calls once it has parsed the command line. It finds the host:

* a bot listens on the data directory's control channel: the request goes there;
* no bot holds the data directory: this process takes its lock and runs the body itself;
* a bot holds the lock but does not listen yet (it is starting): wait for it, at most
  ``CONTROL_CONNECT_WAIT_S``, saying so once;
* another operator command holds the lock: wait for it to finish, saying so once.

On a PostgreSQL database that bots on several machines share, the active bot may be on another machine: when none
answers here, a bot active anywhere gets the command as a row of the database (:mod:`kith.control.remote_client`);
when none is active, this process runs the body itself holding the database's advisory lock as well as the data
directory's, so it is the one writer, and a bot started meanwhile waits as a standby until it is done.

Client-side steps stay here, whatever the host: ``memory forget`` asks in this terminal (with nothing
held open in the bot), and ``memory export --out FILE`` and ``graph draw --out FILE`` write FILE from this process.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from ground import loop
from ground.config import Settings
from ground.instance import DataDirLock, Role
from ground.tunables import CONTROL_CONNECT_WAIT_S, LOCK_POLL_S
from kith.control.client import BotGone, NoBot, call, connect
from kith.control.endpoint import ControlRefused, Transport, transport_for
from kith.control.frames import BadRequest, Request
from kith.control.operations import operation_of, request_args, run_operation
from kith.control.parts import Console
from kith.operator.graph_cli import save_drawing
from kith.operator.memory_cli import forget_in_terminal, save_export

if TYPE_CHECKING:
    from kith.control.local import LocalParts
    from kith.control.remote_client import DatabaseLock


class Unavailable(Exception):
    """Neither the bot holding the data directory nor the lock can be had; the message says why."""


class Host(Protocol):
    def call(self, name: str, args: dict[str, Any], console: Console) -> int: ...

    def close(self) -> None: ...


class BotHost:
    """The running bot: each call is one request on a connection of its own."""

    def __init__(self, data_dir: Path, transport: Transport, first: tuple[Any, str | None]) -> None:
        self.data_dir = data_dir
        self.transport = transport
        self._first: tuple[Any, str | None] | None = first

    def call(self, name: str, args: dict[str, Any], console: Console) -> int:
        connection, self._first = self._first, None
        try:
            sock, token = connection or connect(self.data_dir, self.transport)
            return call(sock, Request(name, args, token), console)
        except (NoBot, BotGone):
            console.err.write("kith: the bot stopped before the command finished; run it again\n")
            return 1

    def close(self) -> None:
        if self._first is not None:
            self._first[0].close()


class LocalHost:
    """No bot: this process holds the data directory's lock (and a shared database's advisory lock) and runs the
    bodies over parts it opens."""

    def __init__(self, settings: Settings, lock: DataDirLock, database_lock: DatabaseLock | None = None) -> None:
        self.settings = settings
        self.lock = lock
        self.database_lock = database_lock
        self._runner = asyncio.Runner(loop_factory=loop.loop_factory())
        self._parts: LocalParts | None = None

    def call(self, name: str, args: dict[str, Any], console: Console) -> int:
        return self._runner.run(self._call(name, args, console))

    async def _call(self, name: str, args: dict[str, Any], console: Console) -> int:
        from kith.control.local import LocalParts  # the heavy path: only when no bot runs

        if self._parts is None:
            self._parts = LocalParts(self.settings)
        try:
            return await run_operation(self._parts, name, args, console)
        except BadRequest as exc:
            console.err.write(f"kith: {exc}\n")
            return 2

    def close(self) -> None:
        try:
            if self._parts is not None:
                self._runner.run(self._parts.close())
        finally:
            self._runner.close()
            if self.database_lock is not None:
                self.database_lock.release()
            self.lock.release()  # last: nothing of this command is open any more


@contextmanager
def opened_host(settings: Settings, say: Callable[[str], None],
                connect_wait_s: float = CONTROL_CONNECT_WAIT_S) -> Iterator[Host]:
    """The host for a command on ``settings``' data directory (see the module's docstring), closed after."""
    host = find_host(settings, say, connect_wait_s)
    try:
        yield host
    finally:
        host.close()


def find_host(settings: Settings, say: Callable[[str], None], connect_wait_s: float) -> Host:
    data_dir = settings.storage.data_path()
    transport = transport_for(data_dir)
    lock = DataDirLock(data_dir)
    url = settings.storage.resolved_database_url()
    shared = url.startswith("postgresql")  # a database bots on other machines may share (as needs_active_lock)
    said: set[str] = set()
    bot_since: float | None = None
    while True:
        try:
            return BotHost(data_dir, transport, connect(data_dir, transport))
        except NoBot:
            pass
        except ControlRefused as exc:
            raise Unavailable(str(exc)) from None
        database_lock: DatabaseLock | None = None
        if shared:
            remote, database_lock = _on_shared_database(url)
            if remote is not None:
                return remote
        if lock.try_acquire(Role.COMMAND):
            return LocalHost(settings, lock, database_lock)
        if database_lock is not None:
            database_lock.release()  # someone on this machine holds the directory: let it go first
        holder = lock.holder()
        if holder is not None and holder.role is Role.COMMAND:
            bot_since = None
            line = f"waiting for {holder.describe()} to finish with {data_dir}"
        else:  # a bot that does not listen yet: starting (its holder line may not be written yet either)
            bot_since = bot_since if bot_since is not None else time.monotonic()
            if time.monotonic() - bot_since > connect_wait_s:
                who = holder.describe() if holder is not None else "another kith"
                raise Unavailable(f"{who} holds {data_dir} but does not answer on its control channel; "
                                  "try again once it has started, or stop it")
            line = (f"waiting for {holder.describe()} to finish starting on {data_dir}" if holder is not None
                    else "")
        if line and line not in said:
            said.add(line)
            say(line)
        time.sleep(LOCK_POLL_S)


def _on_shared_database(url: str) -> tuple[Host | None, DatabaseLock | None]:
    """On a shared database with no bot answering here: the active bot through the database, when one is active
    anywhere; else the database's advisory lock, taken for this command."""
    from kith.control.remote_client import DatabaseHost, DatabaseLock  # psycopg: only on PostgreSQL

    database_lock = DatabaseLock(url)
    try:
        if database_lock.try_take():
            return None, database_lock
        return DatabaseHost(url), None
    except Exception as exc:  # the database cannot be reached: nothing can run this command now
        raise Unavailable(f"cannot reach the database to find the active bot ({type(exc).__name__})") from None


def run_command(settings: Settings, name: str, args: argparse.Namespace, *, out: TextIO | None = None,
                err: TextIO | None = None, stdin: TextIO | None = None) -> int:
    """Run operator command ``name`` ("memory.forget", "consolidate"…) as parsed in ``args``; its exit code."""
    out, err, stdin = out or sys.stdout, err or sys.stderr, stdin or sys.stdin
    op = operation_of(name)

    def say(line: str) -> None:
        err.write(f"kith: {line}\n")
        err.flush()

    try:
        with opened_host(settings, say) as host:
            def run(console: Console, **changes: Any) -> int:
                return host.call(name, request_args(op, args, **changes), console)

            if name == "memory.forget" and not args.yes and stdin.isatty():
                def step(changes: dict[str, Any]) -> tuple[int, Any]:
                    data: list[Any] = []
                    code = run(Console(out, err, data.append), **changes)
                    return code, data[-1] if data else None

                return forget_in_terminal(step, out, stdin)
            if name == "memory.export" and args.out:
                buffer = io.StringIO()
                code = run(Console(buffer, err))
                return save_export(Path(args.out), buffer.getvalue(), err) if code == 0 else code
            if name == "graph.draw":
                buffer = io.StringIO()
                code = run(Console(buffer, err))
                return save_drawing(Path(args.out), buffer.getvalue(), err) if code == 0 else code
            return run(Console(out, err))
    except Unavailable as exc:
        say(str(exc))
        return 1


def call_for_data(settings: Settings, name: str, say: Callable[[str], None]) -> tuple[int, Any]:
    """Run ``name`` (no arguments) on the data directory's host; its exit code and the data it sent."""
    data: list[Any] = []
    sink = io.StringIO()
    try:
        with opened_host(settings, say) as host:
            code = host.call(name, {}, Console(sink, sink, data.append))
    except Unavailable as exc:
        say(str(exc))
        return 1, None
    return code, data[-1] if data else None
