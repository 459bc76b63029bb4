"""Stopping the bot as a person does: Ctrl-C in its terminal, SIGTERM from a service manager.

Each test runs ``bot.py`` as a real process on a pseudo-terminal (standard input a terminal, as when
a person types), against the loopback fake model. Ctrl-C is typed into the terminal, so the terminal
sends SIGINT to its foreground process group, as it would to a person's shell job.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import signal
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from filelock import FileLock, Timeout

from ground.instance import LOCK_FILE
from tests.fakes.openai_api import FakeOpenAI
from tests.support.config_file import write_config
from tests.support.paths import ROOT
from tests.support.waiting import until

WAIT_S = 60.0  # generous: the machine may be busy; nothing here is a timing claim

# The model process is found among the bot's children through /proc (Linux).
pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc to find the model process")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _held(lock_path: Path) -> bool:
    """Whether another process holds the data directory's lock."""
    lock = FileLock(lock_path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        return True
    lock.release()
    return False


def _model_processes(pid: int) -> list[int]:
    """The bot's children running the model process."""
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
        except OSError:  # the thread ended meanwhile
            continue
        for child in map(int, children):
            try:
                if b"llm.worker" in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.append(child)
            except OSError:
                pass
    return found


class TerminalBot:
    """``bot.py ARGS`` with a pseudo-terminal as its controlling terminal, standard input and output."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        master, slave = pty.openpty()
        self.master = master
        self.stderr_path = tmp_path / "stderr.txt"
        self.output = bytearray()
        with self.stderr_path.open("wb") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, str(ROOT / "bot.py"), *args], stdin=slave, stdout=slave, stderr=stderr,
                cwd=ROOT, start_new_session=True,
                preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))  # the terminal becomes its own
        os.close(slave)
        asyncio.get_running_loop().add_reader(master, self._read)

    def _read(self) -> None:
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: every process holding the terminal has ended
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self.master)
        self.output += data

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    async def shows(self, text: str) -> None:
        await until(lambda: text.encode() in self.output, WAIT_S, what=repr(text), every=0.01)

    async def model_process(self) -> int:
        await until(lambda: len(_model_processes(self.proc.pid)) == 1, WAIT_S, what="the model process", every=0.01)
        return _model_processes(self.proc.pid)[0]

    async def exit_code(self) -> int:
        await until(lambda: self.proc.poll() is not None, WAIT_S, what="the bot to exit", every=0.01)
        return self.proc.returncode

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        asyncio.get_running_loop().remove_reader(self.master)
        os.close(self.master)


async def _lock_comes_free_after(pid: int, lock_path: Path, bot: TerminalBot) -> None:
    """Wait for the data directory's lock to come free; the model process must be gone by then."""
    lock = FileLock(lock_path, timeout=0)

    def free() -> bool:
        try:
            lock.acquire()
        except Timeout:
            return False
        lock.release()
        return True

    await until(free, WAIT_S, what="the data directory's lock", every=0.01)
    assert not _alive(pid), "the lock was released while the model process still ran"
    await bot.exit_code()


async def _answers_again(cfg: Path) -> str:
    """A second bot on the same data directory: its answer to one piped line."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "bot.py"), "--config", str(cfg), "chat", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT)
    out, err = await asyncio.wait_for(proc.communicate(b"still there?\n"), WAIT_S)
    assert proc.returncode == 0, err.decode()
    return out.decode().strip()


async def test_ctrl_c_in_the_terminal_chat_ends_it_at_once_model_process_first_lock_last(
        fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "kith.toml", fake_llm, tmp_path / "data")
    bot = TerminalBot(tmp_path, "--config", str(cfg), "chat")
    try:
        await bot.shows("you> ")
        bot.type("hello there\n")
        await bot.shows("echo: hello there")  # the model process answered: it is loaded and serving
        model = await bot.model_process()
        await bot.shows("you> ")
        bot.type("\x03")  # Ctrl-C, with no Enter after it
        bot.type("\x03")  # and again, as an impatient person does
        await _lock_comes_free_after(model, tmp_path / "data" / LOCK_FILE, bot)
        assert await bot.exit_code() == 0
        assert "Traceback" not in bot.stderr and "Event loop is closed" not in bot.stderr, bot.stderr
        assert not _alive(model)
    finally:
        bot.close()
    assert await _answers_again(cfg) == "echo: still there?"


async def test_sigterm_to_run_in_terminal_mode_closes_it_gracefully_with_its_model_process(
        fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "kith.toml", fake_llm, tmp_path / "data")
    bot = TerminalBot(tmp_path, "--config", str(cfg), "run")
    try:
        await bot.shows("you> ")
        model = await bot.model_process()  # it may still be loading: then it is ended as it loads
        bot.proc.send_signal(signal.SIGTERM)  # to the bot alone, as `kill PID` does
        await _lock_comes_free_after(model, tmp_path / "data" / LOCK_FILE, bot)
        assert await bot.exit_code() == 0  # a requested stop, completed: not death by the signal (-15)
        assert "Traceback" not in bot.stderr, bot.stderr
        assert not _alive(model)
    finally:
        bot.close()
    assert await _answers_again(cfg) == "echo: still there?"


async def test_a_model_process_killed_while_it_loads_does_not_cost_the_first_reply(
        fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "kith.toml", fake_llm, tmp_path / "data")
    bot = TerminalBot(tmp_path, "--config", str(cfg), "chat")
    try:
        model = await bot.model_process()
        os.kill(model, signal.SIGKILL)  # as it loads litellm (seconds); a new one takes its place
        await bot.shows("you> ")
        bot.type("are you there?\n")
        await bot.shows("echo: are you there?")
        assert b"can't reach my model" not in bot.output
        assert await bot.model_process() != model
        bot.type("\x04")  # Ctrl-D: the end of input
        assert await bot.exit_code() == 0
    finally:
        bot.close()


async def test_ctrl_c_while_the_model_process_still_starts_ends_both_without_a_traceback(
        fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "kith.toml", fake_llm, tmp_path / "data")
    lock_path = tmp_path / "data" / LOCK_FILE
    # The model process is spawned first, before the bot imports the rest of its start and takes the lock: a
    # Ctrl-C at once lands before the lock is even taken, and still ends both.
    bot = TerminalBot(tmp_path, "--config", str(cfg), "chat")
    try:
        model = await bot.model_process()
        bot.type("\x03")  # the child is still importing: a SIGINT reaching it would be its traceback
        assert await bot.exit_code() == 0
        assert not _alive(model), "the bot ended before its model process"
        assert "Traceback" not in bot.stderr and "KeyboardInterrupt" not in bot.stderr, bot.stderr
    finally:
        bot.close()
    # Once the bot holds the lock, the lock is let go only after the model process has ended.
    bot = TerminalBot(tmp_path, "--config", str(cfg), "chat")
    try:
        model = await bot.model_process()
        await until(lambda: _held(lock_path), WAIT_S, what="the bot to take the lock", every=0.01)
        bot.type("\x03")  # in well under a second: the child still imports (it takes seconds)
        await _lock_comes_free_after(model, lock_path, bot)
        assert await bot.exit_code() == 0
        assert "Traceback" not in bot.stderr and "KeyboardInterrupt" not in bot.stderr, bot.stderr
    finally:
        bot.close()
