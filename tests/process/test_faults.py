"""The fault suite, short: the real ``bot.py run`` SIGKILLed a few times under load, platform and model faults,
a full disk and odd updates, against the loopback fakes; every message answered once or honestly, none lost,
no crash, no double the bot did not log as inside the at-least-once window. The long run is ``bench.faults``."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random

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
    # A proxy's HTML error page is a handled failure, logged by kith in one line: no traceback, no page.
    assert not [n for n in tally.notes if n.startswith("tracebacks")], tally.notes


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


def _kills_with_messages_in_flight(kills: int, gap_s: tuple[float, float], seed: int) -> f.Scenario:
    """A crash loop under load whose kills each land right after one more message went out to the bot: the
    platform sent it to a process that dies before journaling it, and only Discord's catch-up at the next
    session, or Slack's sending again what was not acknowledged, can bring it back.

    Every chat is answered once first, as a channel kith never took a message in from cannot be caught up.
    """

    async def run(world: f.World) -> str:
        rng = random.Random(seed)
        for chat in world.chat_ids:
            world.send(chat)
        await f.until(lambda: world.count("").once == len(world.chat_ids), 60, "the first messages were not answered")
        world.start_load(seed)
        for _ in range(kills):
            await asyncio.sleep(rng.uniform(*gap_s))
            world.send()
            await asyncio.sleep(0)  # the fake writes it out; the bot has had no time to journal it
            await world.kill_bot()
            await world.start_bot()
        return f"crash loop ({kills} kills, each with a message in flight)"

    return run


async def test_discord_a_few_sigkills_with_messages_in_flight_lose_nothing_as_each_new_session_catches_up() -> None:
    tally = await f.run_one("discord", _kills_with_messages_in_flight(4, (1.5, 3.0), SEED), OPTIONS)
    _assert_held(tally)


async def test_slack_a_few_sigkills_with_events_unacknowledged_lose_nothing_as_slack_sends_them_again() -> None:
    tally = await f.run_one("slack", _kills_with_messages_in_flight(4, (1.5, 3.0), SEED), OPTIONS)
    _assert_held(tally)


def _refusals(world: f.World) -> int:
    """Sends the fake platform has refused so far, as scripted by ``fail_sends``."""
    api = world.platform.api  # type: ignore[attr-defined]
    if world.platform.name == "discord":
        return sum(1 for c in api.calls if c.scripted and c.name == "create_message")
    return sum(1 for c in api.calls if c.failed and c.method == "chat.postMessage")


def _refused_sends(statuses: tuple[int, ...], times: int = 3) -> f.Scenario:
    async def run(world: f.World) -> str:
        world.start_load(SEED)
        await asyncio.sleep(1.5)
        for status in statuses:
            world.platform.fail_sends(status, times)
            await asyncio.sleep(2.0)
        await f.until(lambda: _refusals(world) == times * len(statuses), 60, "not every scripted refusal was met")
        return "sends refused: " + ", ".join(f"{status} x{times}" for status in statuses)

    return run


# discord.py sleeps out a 429 and tries a 500 again itself (up to five times), so kith never sees those; a 503
# it hands over at once, and kith's outbox must try it again.
@pytest.mark.parametrize(("platform", "statuses"), [("discord", (429, 500, 503)), ("slack", (429, 500))],
                         ids=["discord", "slack"])
async def test_sends_refused_with_429_and_5xx_lose_and_double_nothing(platform: str, statuses: tuple[int, ...]) -> None:
    tally = await f.run_one(platform, _refused_sends(statuses), OPTIONS)
    _assert_held(tally)
    assert tally.doubled == 0  # a refused send posted nothing, so nothing may arrive twice
