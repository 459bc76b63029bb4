"""The terminal chat at a real terminal (a pty): replies are rendered, not shown as raw Markdown."""

from __future__ import annotations

import asyncio
import os
import pty
import sys
import time
from pathlib import Path

from tests.fakes.openai_api import FakeOpenAI
from tests.support.config_file import write_config
from tests.support.paths import ROOT


def _read_until(fd: int, needle: bytes, timeout_s: float) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout_s
    while needle not in seen and time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the child closed the terminal
            break
        seen += chunk
    return seen


async def test_a_reply_at_a_terminal_is_rendered_markdown(fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "kith.toml", fake_llm, tmp_path / "data")
    fake_llm.reply("Run `ls -l` first, then **rest**.")
    controller, terminal = pty.openpty()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "bot.py"), "--config", str(cfg), "chat", cwd=ROOT, stdin=terminal,
        stdout=terminal, stderr=asyncio.subprocess.DEVNULL, env={**os.environ, "COLUMNS": "80", "TERM": "xterm"})
    os.close(terminal)
    try:
        prompt = await asyncio.to_thread(_read_until, controller, b"you> ", 60)
        assert b"you> " in prompt
        os.write(controller, b"how do I see my files?\n")
        shown = await asyncio.to_thread(_read_until, controller, b"rest", 60)
    finally:
        os.write(controller, b"\x04")  # Ctrl-D: the end of input ends the chat
        try:
            await asyncio.wait_for(proc.wait(), 30)
        finally:
            if proc.returncode is None:
                proc.kill()
            os.close(controller)
    assert b"ls -l" in shown and b"rest" in shown
    assert b"`ls -l`" not in shown and b"**rest**" not in shown  # the Markdown is rendered ...
    assert b"\x1b[" in shown  # ... with the terminal's own styles
