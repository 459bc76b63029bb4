"""The fault suite, short: the real ``bot.py run`` SIGKILLed a few times under load, platform and model faults,
a full disk and odd updates, against the loopback fakes; every message answered once or honestly, none lost,
no crash, no double the bot did not log as inside the at-least-once window. The long run is ``bench.faults``."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses

import pytest

from tests.support import faults as f

SEED = 19
OPTIONS = f.RunOptions(chats=6, rate=4.0, answer_deadline_s=90.0, settle_s=2.0)


def _assert_held(tally: f.Tally) -> None:
    assert tally.tried > 0
    assert tally.crashed == 0, tally.notes
    assert tally.lost == 0, f"lost {tally.lost_tokens} ({tally.notes})"
    assert tally.doubled <= tally.doubled_in_window, f"doubled {tally.doubled_tokens} ({tally.notes})"
    assert tally.once + tally.honest + tally.doubled == tally.tried


async def test_a_few_sigkills_of_the_bot_and_its_model_process_under_load_lose_nothing() -> None:
    tally = await f.run_one("telegram", f.crash_loop(4, (1.5, 3.0), SEED), OPTIONS)
    _assert_held(tally)


def _platform_and_model_faults() -> f.Scenario:
    async def run(world: f.World) -> str:
        world.start_load(SEED)
        await asyncio.sleep(1.5)
        world.platform.fail_sends(429, 3)
        await asyncio.sleep(2.0)
        world.platform.fail_sends(500, 3)
        await asyncio.sleep(2.0)
        world.platform.proxy.cut = True  # sends the platform took, whose answers never arrive
        await asyncio.sleep(0.5)
        world.platform.proxy.cut = False
        await asyncio.sleep(1.5)
        world.model_fault = lambda _request: f.Scripted(status=500)
        await asyncio.sleep(2.0)
        world.model_fault = None
        await asyncio.sleep(2.0)
        return "429, 500, dropped connections, model 500"

    return run


async def test_platform_429_500_dropped_connections_and_model_500s_lose_nothing() -> None:
    tally = await f.run_one("telegram", _platform_and_model_faults(), OPTIONS)
    _assert_held(tally)


async def test_odd_and_malformed_telegram_updates_are_answered_or_ignored_and_intake_goes_on() -> None:
    tally = await f.run_one("telegram", f.odd_updates(), OPTIONS)
    _assert_held(tally)
    assert tally.honest == 0  # the model was up: each odd message gets its real answer


async def test_a_full_disk_while_replies_are_committed_loses_and_doubles_nothing() -> None:
    with contextlib.ExitStack() as stack:
        try:
            data_dir = stack.enter_context(f.small_tmpfs())
        except OSError as exc:
            pytest.skip(f"no small tmpfs to fill: {exc}")
        tally = await f.run_one("telegram", f.disk_full(5.0), dataclasses.replace(OPTIONS, data_dir=data_dir))
    _assert_held(tally)
    assert tally.doubled == 0
