"""Every command's event loop: uvloop where installed, asyncio's own where it is not (Windows)."""

from __future__ import annotations

import asyncio
import sys

import pytest

from ground import loop


async def _loop_module() -> str:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop()).__module__


def test_commands_run_on_uvloop_when_it_is_installed() -> None:
    pytest.importorskip("uvloop")
    assert loop.run(_loop_module()).startswith("uvloop")


def test_without_uvloop_commands_run_on_asyncios_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as on a platform without a uvloop wheel
    assert loop.run(_loop_module()).startswith("asyncio")
