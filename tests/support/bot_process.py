"""``bot.py`` run as a person runs it, in a subprocess of the test."""

from __future__ import annotations

import asyncio
import os
import sys

from tests.support.paths import ROOT


async def run_bot(*args: str, stdin: str = "", env: dict[str, str] | None = None,
                  timeout: float = 60, prefix: tuple[str, ...] = ()) -> tuple[int, str, str]:
    """``bot.py *args`` in a subprocess, fed ``stdin``: its exit code, stdout and stderr (killed after ``timeout``)."""
    proc = await asyncio.create_subprocess_exec(
        *prefix, sys.executable, str(ROOT / "bot.py"), *args, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=str(ROOT),
        env={**os.environ, **(env or {})})
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout)
    except TimeoutError:
        proc.kill()  # never left running past its test
        await proc.wait()
        raise
    return proc.returncode or 0, out.decode(), err.decode()
