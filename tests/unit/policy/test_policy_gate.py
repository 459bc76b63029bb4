"""The policy gate over the real relational store, and the owner's pairing command run in this process (``bot.py
pairing`` itself is tests/process/test_pairing_command.py)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses

from ground.types import ChatKind, OutboundMessage
from kith.app.wiring import open_database
from kith.operator.policy_cli import run_pairing
from people import directory
from policy import store
from policy.gate import PolicyGate
from policy.rules import Verdict
from policy.settings import PolicySettings
from tests.support.clock import FakeClock
from tests.support.messages import inbound

BACKENDS = ("sqlite", "postgres")  # the relational store under test: both (tests/conftest.py)


def _tg(text: str, sender: str = "42", **kw) -> object:
    return inbound(text, platform="telegram", chat_id=sender, sender_id=sender, **kw)


async def test_pairing_code_then_cli_approval_then_allowed(make_settings, capsys) -> None:
    settings = make_settings()
    db = open_database(settings)
    clock = FakeClock()
    gate = PolicyGate(db, PolicySettings(), clock=clock)
    try:
        first = await gate.check_inbound(_tg("hi"))
        assert first.verdict is Verdict.PAIRING_CODE and first.code and first.code in first.notice
        again = await gate.check_inbound(_tg("hello??"))
        assert again.verdict is Verdict.DROP  # same code, not re-sent within minutes, nothing else said
        # the code survives in the store (a restart does not forget who is waiting)
        access, _ = db.run_sync(store.load)
        assert [p.code for p in access.pending] == [first.code]

        code = await asyncio.to_thread(run_pairing, db, argparse.Namespace(pairing_action="list"), clock())
        assert code == 0 and first.code in capsys.readouterr().out
        args = argparse.Namespace(pairing_action="approve", code=first.code.lower(), owner=True)
        assert await asyncio.to_thread(run_pairing, db, args, clock()) == 0
        assert "approved telegram:42 as owner" in capsys.readouterr().out

        allowed = await gate.check_inbound(_tg("now?"))
        assert allowed.verdict is Verdict.ALLOW
        assert await gate.may_send(OutboundMessage(platform="telegram", chat_id="42", text="hi"))
        assert not await gate.may_send(OutboundMessage(platform="telegram", chat_id="77", text="hi"))
        assert await gate.may_send(OutboundMessage(platform="telegram", chat_id="77", text="code", notice=True))

        args = argparse.Namespace(pairing_action="revoke", account="telegram:42")
        assert await asyncio.to_thread(run_pairing, db, args, clock()) == 0
        assert (await gate.check_inbound(_tg("still there?"))).verdict is Verdict.PAIRING_CODE
    finally:
        db.close()


async def test_expired_code_is_refused_by_the_cli(make_settings, capsys) -> None:
    db = open_database(make_settings())
    clock = FakeClock()
    gate = PolicyGate(db, PolicySettings(), clock=clock)
    try:
        code = (await gate.check_inbound(_tg("hi"))).code
        clock.advance(hours=1, seconds=1)
        args = argparse.Namespace(pairing_action="approve", code=code, owner=False)
        assert run_pairing(db, args, clock()) == 1
        assert "expired" in capsys.readouterr().out
    finally:
        db.close()


async def test_group_needs_allowlist_and_mention(make_settings) -> None:
    db = open_database(make_settings())
    gate = PolicyGate(db, PolicySettings.from_mapping({"telegram": {"allow_groups": ["-100"]}}),
                      configured={"telegram"}, clock=FakeClock())
    try:
        quiet = _tg("talking among ourselves", chat_kind=ChatKind.GROUP, mentioned=False)
        quiet = dataclasses.replace(quiet, chat_id="-100")
        assert (await gate.check_inbound(quiet)).verdict is Verdict.DROP
        called = dataclasses.replace(quiet, mentioned=True)
        assert (await gate.check_inbound(called)).verdict is Verdict.ALLOW
        elsewhere = dataclasses.replace(called, chat_id="-200")
        assert (await gate.check_inbound(elsewhere)).verdict is Verdict.DROP
    finally:
        db.close()


async def test_console_is_open_by_default(make_settings) -> None:
    db = open_database(make_settings())
    try:
        gate = PolicyGate(db, PolicySettings(), clock=FakeClock())
        assert (await gate.check_inbound(inbound("hi"))).verdict is Verdict.ALLOW
    finally:
        db.close()


async def test_rate_limit_sends_one_notice_per_streak(make_settings) -> None:
    db = open_database(make_settings())
    now = [0.0]
    gate = PolicyGate(db, PolicySettings(), clock=FakeClock(), monotonic=lambda: now[0])
    try:
        verdicts = [(await gate.check_inbound(inbound(f"m{i}"))).verdict for i in range(12)]
        assert verdicts.count(Verdict.NOTICE) == 1
        assert verdicts[:8] == [Verdict.ALLOW] * 8
        assert set(verdicts[9:]) == {Verdict.DROP}
    finally:
        db.close()


async def test_each_platform_has_the_rate_limit_its_config_gives(make_settings) -> None:
    db = open_database(make_settings())
    now = [0.0]
    table = {"telegram": {"dm": "open", "rate_limit_burst": 3, "rate_limit_per_minute": 60},
             "console": {"dm": "open"}}
    gate = PolicyGate(db, PolicySettings.from_mapping(table), configured=set(table), clock=FakeClock(),
                      monotonic=lambda: now[0])
    try:
        telegram = [(await gate.check_inbound(_tg(f"m{i}"))).verdict for i in range(5)]
        assert telegram == [Verdict.ALLOW] * 3 + [Verdict.NOTICE, Verdict.DROP]
        now[0] += 1.0  # one a second at 60 a minute
        assert (await gate.check_inbound(_tg("later"))).verdict is Verdict.ALLOW
        assert (await gate.check_inbound(_tg("again"))).verdict is Verdict.DROP  # the same flood: told once
        now[0] += 3.0  # Telegram's whole burst of 3 is back: a pause, so a new streak
        telegram = [(await gate.check_inbound(_tg(f"n{i}"))).verdict for i in range(4)]
        assert telegram == [Verdict.ALLOW] * 3 + [Verdict.NOTICE]
        # The terminal keeps the default burst of 8, whatever Telegram's says.
        console = [(await gate.check_inbound(inbound(f"c{i}"))).verdict for i in range(9)]
        assert console == [Verdict.ALLOW] * 8 + [Verdict.NOTICE]
    finally:
        db.close()


async def test_a_revoke_from_the_pairing_command_stops_sends_at_once(make_settings) -> None:
    settings = make_settings()
    db = open_database(settings)
    clock = FakeClock()
    gate = PolicyGate(db, PolicySettings(), clock=clock)
    operator = open_database(settings)  # `bot.py pairing` is a process of its own
    try:
        code = (await gate.check_inbound(_tg("hi"))).code
        assert run_pairing(operator, argparse.Namespace(pairing_action="approve", code=code, owner=False),
                           clock()) == 0
        assert (await gate.check_inbound(_tg("hello again"))).verdict is Verdict.ALLOW
        # Ana's phone (telegram:77) is linked to the same person and has written once: let in through her.
        ana = db.run_sync(directory.resolve, "telegram:42", "Ana", clock())
        db.run_sync(directory.resolve, "telegram:77", "Ana", clock())
        db.run_sync(directory.link, "telegram:77", ana, clock())
        assert (await gate.check_inbound(_tg("from my phone", sender="77"))).verdict is Verdict.ALLOW
        checkin = OutboundMessage(platform="telegram", chat_id="42", text="how did it go?", recipient_id="42",
                                  chat_kind=ChatKind.DM)
        to_phone = dataclasses.replace(checkin, chat_id="77", recipient_id="77")
        assert await gate.may_send(checkin) and await gate.may_send(to_phone)

        assert run_pairing(operator, argparse.Namespace(pairing_action="revoke", account="telegram:42"),
                           clock()) == 0
        await asyncio.sleep(0.5)  # the promise (README): a revoke reaches sends within half a second
        # No message from Ana in between: the heartbeat's check-in must not go out to either account.
        assert not await gate.may_send(checkin)
        assert not await gate.may_send(to_phone)
    finally:
        operator.close()
        db.close()
