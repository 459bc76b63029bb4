"""kith end to end on Telegram: the real python-telegram-bot, the loopback fake Bot API, the fake LLM,
the shared policy and delivery core, and the owner's pairing command."""

# ruff: noqa: F811

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from html.parser import HTMLParser

import pytest

from delivery import outbox
from delivery.worker import DeliveryWorker
from ground.config import Settings
from ground.db import Database
from ground.types import ChatKind, OutboundMessage
from kith.app.lifecycle import App
from kith.operator.policy_cli import run_pairing
from llm.client import import_litellm
from policy.store import load
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.telegram_app import start_telegram_app, telegram_settings
from tests.support.waiting import until

BACKENDS = ("sqlite", "postgres")  # the relational store under test: both (tests/conftest.py)

import_litellm()  # seconds, once: a first reply must not race the test's timeouts

ANA = 501
BEN = 502
GROUP = -100_777


def _settings(make_settings, fake_llm, tg: FakeTelegramApi, **policy) -> Settings:
    return telegram_settings(make_settings(fake_llm), tg, policy={"allow_groups": [str(GROUP)], **policy})


async def _start(settings: Settings, monkeypatch) -> App:
    return await start_telegram_app(settings, monkeypatch)


async def _start_and_expect_one_reply(settings: Settings, monkeypatch, telegram_api, fake_llm, text: str,
                                      timeout: float = 15.0) -> None:
    """Start kith again: exactly one reply, ``text``, goes out, from exactly one model call in all."""
    app = await _start(settings, monkeypatch)
    try:
        await telegram_api.wait_for_sent(1, timeout=timeout)
        await asyncio.sleep(1.0)  # time for anything doubled to show up
        assert [m.visible_text for m in telegram_api.sent] == [text]
        assert len(fake_llm.requests) == 1  # nothing taken up twice, and no update replayed into another answer
    finally:
        await app.close()


async def _approve(app: App, account: str) -> None:
    access, _ = app.db.run_sync(load)
    code = next(p.code for p in access.pending if p.account == account)
    args = argparse.Namespace(pairing_action="approve", code=code, owner=False)
    assert await asyncio.to_thread(run_pairing, app.db, args) == 0


async def test_pairing_then_conversation(telegram_api, fake_llm, make_settings, monkeypatch) -> None:
    app = await _start(_settings(make_settings, fake_llm, telegram_api), monkeypatch)
    try:
        telegram_api.push_text(ANA, ANA, "hello kith")
        sent = await telegram_api.wait_for_sent(1)
        access, _ = app.db.run_sync(load)
        code = access.pending[0].code
        assert code in sent[0].visible_text and sent[0].chat_id == ANA
        assert fake_llm.requests == []  # an unpaired stranger never reaches the model

        await _approve(app, f"telegram:{ANA}")
        fake_llm.reply("Hi Ana! Nice to finally talk.", delay_s=0.8)  # a model that thinks: typing shows
        telegram_api.push_text(ANA, ANA, "it's me again")
        sent = await telegram_api.wait_for_sent(2, timeout=15)
        assert sent[1].visible_text == "Hi Ana! Nice to finally talk."
        assert any(a.chat_id == ANA and a.action == "typing" for a in telegram_api.actions)
        registered = [c["command"] for c in telegram_api.commands]
        assert {"help", "memory", "unpin", "goals", "link"} <= set(registered)

        telegram_api.push_text(ANA, ANA, "/help")
        sent = await telegram_api.wait_for_sent(3)
        assert [line.split(":")[0] for line in sent[2].visible_text.splitlines()[2:]] == [f"/{c}" for c in registered]
        assert len(fake_llm.requests) == 1  # answered without the model
    finally:
        await app.close()


async def test_group_answers_only_when_mentioned(telegram_api, fake_llm, make_settings, monkeypatch) -> None:
    app = await _start(_settings(make_settings, fake_llm, telegram_api), monkeypatch)
    try:
        telegram_api.push_text(GROUP, BEN, "anyone seen my keys?", "supergroup", chat_title="flat")
        fake_llm.reply("Did you check the fridge?")
        asked = telegram_api.push_text(GROUP, BEN, "@kith_test_bot where could they be?", "supergroup",
                                       chat_title="flat")
        sent = await telegram_api.wait_for_sent(1)
        await asyncio.sleep(0.3)
        assert len(telegram_api.sent) == 1 and len(fake_llm.requests) == 1
        assert sent[0].chat_id == GROUP and sent[0].visible_text == "Did you check the fridge?"
        assert sent[0].reply_to_message_id == asked["message"]["message_id"]  # in groups it quotes the question
    finally:
        await app.close()


class _Balance(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.ok = True

    def handle_starttag(self, tag, attrs) -> None:
        self.stack.append(tag)

    def handle_endtag(self, tag) -> None:
        self.ok = self.ok and bool(self.stack) and self.stack.pop() == tag


async def test_long_reply_with_code_arrives_whole_in_valid_chunks(telegram_api, fake_llm, make_settings,
                                                                 monkeypatch) -> None:
    app = await _start(_settings(make_settings, fake_llm, telegram_api, dm="open"), monkeypatch)
    try:
        code = "\n".join(f"    print('line {i}', x < {i} and y > {i})" for i in range(120))
        prose = " ".join(f"Sentence {i} of the long answer & more." for i in range(160))
        reply = f"{prose}\n\n```python\ndef main():\n{code}\n```\n\n**Done** — {prose}"
        assert len(reply) > 10_000
        fake_llm.reply(reply)
        telegram_api.push_text(ANA, ANA, "explain it all")
        await telegram_api.wait_until(lambda: app.db.run_sync(outbox.by_status, outbox.OutboxStatus.SENT))
        chunks = [m for m in telegram_api.sent if m.chat_id == ANA]
        assert len(chunks) >= 3
        for m in chunks:
            checker = _Balance()
            checker.feed(m.text)
            assert checker.ok and not checker.stack and m.parse_mode == "HTML"
        visible = "".join(m.visible_text for m in chunks)
        for i in (0, 59, 119):
            assert f"print('line {i}', x < {i} and y > {i})" in visible
        assert visible.index("line 0") < visible.index("line 119") < visible.rindex("Sentence 159")
        inside_code = [m for m in chunks if "line 60" in m.visible_text]
        assert inside_code and all("<pre>" in m.text for m in inside_code)
    finally:
        await app.close()


async def test_flood_limit_delays_but_never_loses_or_doubles(telegram_api, fake_llm, make_settings,
                                                             monkeypatch) -> None:
    app = await _start(_settings(make_settings, fake_llm, telegram_api, dm="open"), monkeypatch)
    try:
        telegram_api.fail_next("sendMessage", status=429, retry_after=1)
        fake_llm.reply("worth the wait")
        telegram_api.push_text(ANA, ANA, "hi")
        sent = await telegram_api.wait_for_sent(1, timeout=10)
        await asyncio.sleep(0.2)
        assert [m.visible_text for m in telegram_api.sent] == ["worth the wait"]
        assert sent[0].chat_id == ANA
        refused, accepted = [c for c in telegram_api.calls if c.method == "sendMessage"]
        assert (refused.failed_status, accepted.failed_status) == (429, None)
        assert accepted.at - refused.at >= 1.0  # Telegram's retry_after, not the 0.05 s backoff, set the wait
    finally:
        await app.close()


async def test_reply_produced_before_a_crash_is_delivered_once_after_restart(
        telegram_api, fake_llm, make_settings, monkeypatch) -> None:
    settings = _settings(make_settings, fake_llm, telegram_api, dm="open")
    settings = dataclasses.replace(settings, delivery=dataclasses.replace(settings.delivery, backoff_base_s=2.0,
                                                                          backoff_max_s=30.0))
    app = await _start(settings, monkeypatch)
    fake_llm.reply("this reply must survive", delay_s=1.0)
    telegram_api.push_text(ANA, ANA, "tell me something")
    await telegram_api.wait_until(lambda: len(fake_llm.requests) == 1)
    await telegram_api.go_away()  # Telegram unreachable while the model thinks: the reply waits in the outbox
    # Polled: with Telegram away no request reaches the fake to wake a wait_until.
    await until(lambda: bool(app.db.run_sync(outbox.by_status, outbox.OutboxStatus.PENDING)), 20,
                what="the reply to reach the outbox", every=0.05)
    await app.close()  # the process goes down with the reply produced but undelivered
    assert telegram_api.sent == []
    await telegram_api.come_back()
    await _start_and_expect_one_reply(settings, monkeypatch, telegram_api, fake_llm, "this reply must survive",
                                      timeout=20)


async def test_messages_refused_by_the_rate_limit_are_not_answered_after_a_restart(
        telegram_api, fake_llm, make_settings, monkeypatch) -> None:
    settings = _settings(make_settings, fake_llm, telegram_api, dm="open", rate_limit_burst=1,
                         rate_limit_per_minute=1.0)
    app = await _start(settings, monkeypatch)
    try:
        fake_llm.reply("one at a time")
        for text in ("first", "second", "third"):
            telegram_api.push_text(ANA, ANA, text)
        sent = await telegram_api.wait_for_sent(2)
    finally:
        await app.close()
    assert sorted(m.visible_text == "one at a time" for m in sent) == [False, True]  # the answer and one notice
    app = await _start(settings, monkeypatch)  # a restart answers what was left unanswered: nothing here
    try:
        await asyncio.sleep(1.0)
        assert len(telegram_api.sent) == 2 and len(fake_llm.requests) == 1
    finally:
        await app.close()


async def test_an_update_taken_in_but_not_yet_past_policy_when_the_process_stops_is_answered_after_restart(
        telegram_api, fake_llm, make_settings, monkeypatch) -> None:
    settings = _settings(make_settings, fake_llm, telegram_api, dm="open")
    app = await _start(settings, monkeypatch)
    reached = asyncio.Event()

    async def never_decides(arrival):  # the process goes down before the policy has decided
        reached.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(app.router.intake, "steps", (never_decides,))
    telegram_api.push_text(ANA, ANA, "did you get this?")
    await asyncio.wait_for(reached.wait(), 15)  # journaled, and Telegram's offset is past it
    await app.close()
    assert telegram_api.sent == [] and fake_llm.requests == []
    fake_llm.reply("I did.")
    await _start_and_expect_one_reply(settings, monkeypatch, telegram_api, fake_llm, "I did.")


async def test_messages_sent_while_kith_was_down_are_answered_once_however_slow_the_start(
        telegram_api, fake_llm, make_settings, monkeypatch) -> None:
    settings = _settings(make_settings, fake_llm, telegram_api, dm="open")
    app = await _start(settings, monkeypatch)
    await app.close()
    telegram_api.push_text(ANA, ANA, "are you up?")  # Telegram holds it while kith is down
    real_start = DeliveryWorker.start

    async def slow_start(worker):  # e.g. another channel waiting for its gateway: Telegram takes messages in
        await asyncio.sleep(1.5)
        return await real_start(worker)

    monkeypatch.setattr(DeliveryWorker, "start", slow_start)
    fake_llm.reply("I am.")
    await _start_and_expect_one_reply(settings, monkeypatch, telegram_api, fake_llm, "I am.")


async def test_redelivered_update_is_answered_once(telegram_api, fake_llm, make_settings, monkeypatch) -> None:
    app = await _start(_settings(make_settings, fake_llm, telegram_api, dm="open"), monkeypatch)
    try:
        update = telegram_api.push_text(ANA, ANA, "only once please")
        telegram_api.push_update(update)  # the same update_id again
        await telegram_api.wait_for_sent(1)
        await asyncio.sleep(0.5)
        assert len(telegram_api.sent) == 1 and len(fake_llm.requests) == 1
        assert telegram_api.actions == []  # an instant reply needs no typing indicator
    finally:
        await app.close()


@pytest.mark.parametrize("weird", [
    {"message": {"message_id": 9, "date": 1, "chat": {"id": ANA, "type": "private"}, "sticker": {}}},
    {"edited_message": {"message_id": 1, "date": 1, "edit_date": 2, "text": "edited",
                        "chat": {"id": ANA, "type": "private"}, "from": {"id": ANA, "is_bot": False,
                                                                         "first_name": "A"}}},
    {"message": {"message_id": 10, "date": 1, "chat": {"id": GROUP, "type": "supergroup", "title": "t"},
                 "new_chat_members": [{"id": 77, "is_bot": False, "first_name": "N"}],
                 "from": {"id": BEN, "is_bot": False, "first_name": "B"}}},
    {"message": {"text": "no ids at all"}},
    {"something_new": {"x": 1}},
])
async def test_malformed_and_unexpected_updates_lose_nothing(telegram_api, fake_llm, make_settings, monkeypatch,
                                                             weird) -> None:
    app = await _start(_settings(make_settings, fake_llm, telegram_api, dm="open"), monkeypatch)
    try:
        telegram_api.push_update(weird)
        fake_llm.reply("still here")
        telegram_api.push_text(ANA, ANA, "you ok?")
        sent = await telegram_api.wait_for_sent(1)
        await asyncio.sleep(0.2)
        assert [m.visible_text for m in sent] == ["still here"]
    finally:
        await app.close()


async def test_a_reply_queued_by_another_process_is_sent_by_the_running_bot(
        telegram_api, fake_llm, make_settings, monkeypatch) -> None:
    settings = _settings(make_settings, fake_llm, telegram_api, dm="open")
    settings = dataclasses.replace(settings, delivery=dataclasses.replace(settings.delivery, outbox_sweep_s=0.2))
    telegram_api.add_chat(ANA, "private")
    app = await _start(settings, monkeypatch)
    other = Database(settings.storage.resolved_database_url())  # as `bot.py heartbeat --now` opens it
    try:
        other.run_sync(outbox.enqueue, OutboundMessage(platform="telegram", chat_id=str(ANA), text="How did it go?",
                                                       chat_kind=ChatKind.DM, recipient_id=str(ANA)),
                       source="heartbeat", now=app.clock())
        (sent,) = await telegram_api.wait_for_sent(1)
        assert (sent.chat_id, sent.visible_text) == (ANA, "How did it go?")
        await asyncio.sleep(0.5)  # later sweeps find nothing more to send
        assert len(telegram_api.sent) == 1 and fake_llm.requests == []
    finally:
        other.close()
        await app.close()


async def test_a_guessed_link_code_gets_no_one_past_the_policy(telegram_api, fake_llm, make_settings,
                                                               monkeypatch) -> None:
    app = await _start(_settings(make_settings, fake_llm, telegram_api), monkeypatch)  # DMs need pairing
    try:
        telegram_api.push_text(BEN, BEN, "/link ABCDEFGH")  # a stranger guessing
        (answer,) = await telegram_api.wait_for_sent(1)
        code = app.db.run_sync(load)[0].pending[0].code
        assert code in answer.visible_text and "link code" not in answer.visible_text  # pairing, nothing else
        telegram_api.push_text(ANA, ANA, "hi")
        await telegram_api.wait_for_sent(2)
        await _approve(app, f"telegram:{ANA}")
        telegram_api.push_text(ANA, ANA, "/link ABCDEFGH")  # someone let in mistypes a code: told so
        assert "unknown or has expired" in (await telegram_api.wait_for_sent(3))[2].visible_text
    finally:
        await app.close()
    telegram_api.sent.clear()
    app = await _start(_settings(make_settings, fake_llm, telegram_api, dm="disabled"), monkeypatch)
    try:
        for i in range(3):
            telegram_api.push_text(BEN, BEN, f"/link ABCDEFG{i}")
        telegram_api.push_text(BEN, BEN, "hello?")
        await telegram_api.wait_until(lambda: telegram_api.pending_updates == [])  # all four taken in
        await asyncio.sleep(0.5)  # time to answer them, had the policy let one through
        assert telegram_api.sent == [] and fake_llm.requests == []  # DMs disabled: not a word, however asked
    finally:
        await app.close()


async def test_a_flood_in_a_group_gets_one_notice_quoting_its_sender(telegram_api, fake_llm, make_settings,
                                                                     monkeypatch) -> None:
    app = await _start(_settings(make_settings, fake_llm, telegram_api, rate_limit_burst=2), monkeypatch)
    try:
        asked = [telegram_api.push_text(GROUP, BEN, f"@kith_test_bot question {i}", "supergroup", chat_title="flat")
                 for i in range(6)]
        await telegram_api.wait_for_sent(2)
        await asyncio.sleep(0.5)
        notices = [m for m in telegram_api.sent if "faster than I can keep up" in m.visible_text]
        # Two let through (one turn: they came within the debounce window), four refused, one notice.
        assert len(telegram_api.sent) == 2 and len(notices) == 1 and len(fake_llm.requests) == 1
        assert notices[0].chat_id == GROUP
        assert notices[0].reply_to_message_id == asked[2]["message"]["message_id"]  # the first one refused
    finally:
        await app.close()
