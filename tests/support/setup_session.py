"""``bot.py`` in a subprocess that a test talks to as a person would: over pipes or a pseudo-terminal, waiting for
what it says and answering it, in a newcomer's environment."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

SECRET_VARS = ("KITH_CONFIG", "XDG_CONFIG_HOME", "OLLAMA_HOST", "OPENAI_API_KEY", "LLM_API_KEY", "ANTHROPIC_API_KEY",
               "OPENROUTER_API_KEY", "TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN",
               "SLACK_SIGNING_SECRET")
WAIT_S = 60.0


@pytest.fixture(autouse=True)
def environment_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a config puts its .env into this process's environment: unset here, and as they were afterwards
    (a token left behind would start Telegram in a later test's `run`). Autouse in each module that imports it."""
    for name in SECRET_VARS:
        monkeypatch.setenv(name, "")  # remembers the value to restore ...
        monkeypatch.delenv(name)  # ... and the test starts without it


def newcomer_env(home: Path, **extra: str) -> dict[str, str]:
    """A newcomer's environment: a fresh home, no kith variable, no key."""
    env = {k: v for k, v in os.environ.items() if k not in SECRET_VARS}
    env.update(HOME=str(home), **extra)
    return env


class Session:
    """A running ``bot.py``: waits for what it says, answers it. Over pipes, or over a pseudo-terminal (where
    the process sees a person at a terminal, and what it echoes is what the person would see)."""

    def __init__(self, proc: asyncio.subprocess.Process, master: int | None = None) -> None:
        self.proc = proc
        self.master = master
        self.seen = ""
        self.closed = False  # all output read
        self._pos = 0
        self._changed = asyncio.Event()
        if master is not None:
            asyncio.get_running_loop().add_reader(master, self._from_pty)
        else:
            assert proc.stdout is not None
            self._reader = asyncio.create_task(self._from_pipe(proc.stdout))

    @classmethod
    async def start(cls, *args: str, env: dict[str, str], tty: bool = False) -> Session:
        command = (sys.executable, str(ROOT / "bot.py"), *args)
        if not tty:
            proc = await asyncio.create_subprocess_exec(
                *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT, cwd=str(ROOT), env=env, start_new_session=True)
            return cls(proc)
        master, slave = pty.openpty()
        # A session of its own: no controlling terminal, so nothing can reach the terminal pytest runs in.
        proc = await asyncio.create_subprocess_exec(*command, stdin=slave, stdout=slave, stderr=slave,
                                                    cwd=str(ROOT), env=env, start_new_session=True)
        os.close(slave)
        return cls(proc, master)

    def _from_pty(self) -> None:
        assert self.master is not None
        try:
            data = os.read(self.master, 65536)
        except OSError:  # the last process holding the terminal has gone
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self.master)
            self.closed = True
        self.seen += data.decode(errors="replace").replace("\r\n", "\n")
        self._changed.set()

    async def _from_pipe(self, stream: asyncio.StreamReader) -> None:
        while data := await stream.read(65536):
            self.seen += data.decode(errors="replace")
            self._changed.set()
        self.closed = True
        self._changed.set()

    async def expect(self, text: str) -> str:
        """Wait until ``text`` appears after what was last expected; everything up to it."""
        async with asyncio.timeout(WAIT_S):
            while (at := self.seen.find(text, self._pos)) < 0 and not self.closed:
                self._changed.clear()
                await self._changed.wait()
        assert at >= 0, f"{text!r} never came; the session said:\n{self.seen}"
        chunk, self._pos = self.seen[self._pos:at + len(text)], at + len(text)
        return chunk

    async def answer(self, prompt: str, line: str) -> str:
        chunk = await self.expect(prompt)
        if self.master is not None:
            os.write(self.master, f"{line}\n".encode())
        else:
            assert self.proc.stdin is not None
            self.proc.stdin.write(f"{line}\n".encode())
            await self.proc.stdin.drain()
        return chunk

    async def end(self) -> int:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        code = await asyncio.wait_for(self.proc.wait(), WAIT_S)
        if self.master is None:
            await self._reader
        else:
            await asyncio.sleep(0.1)  # the last output still in the terminal
            with contextlib.suppress(ValueError, OSError):
                asyncio.get_running_loop().remove_reader(self.master)
                self._from_pty()
            os.close(self.master)
        return code

    async def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
