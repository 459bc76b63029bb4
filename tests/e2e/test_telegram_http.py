"""The aiohttp transport under python-telegram-bot: what PTB's callers see when the Bot API misbehaves."""

# The imported ``telegram_api`` fixture arrives by argument name, which ruff reads as a redefinition.
# ruff: noqa: F811

from __future__ import annotations

import asyncio
import base64

import pytest
from telegram import Bot
from telegram.error import NetworkError, RetryAfter, TimedOut

from channels.telegram.transport import AiohttpRequest, AnswerLost, env_proxy
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.ports import free_port


def _bot(base_url: str, timeout_s: float = 5.0) -> Bot:
    request = AiohttpRequest(read_timeout=timeout_s, write_timeout=timeout_s, connect_timeout=timeout_s,
                             pool_timeout=timeout_s)
    return Bot(FAKE_BOT_TOKEN, base_url=base_url, request=request, get_updates_request=request)


async def test_messages_commands_and_files_go_through_with_telegrams_answers(
        telegram_api: FakeTelegramApi) -> None:
    telegram_api.add_chat(42)
    async with _bot(telegram_api.base_url) as bot:
        sent = await bot.send_message(42, "<b>bold</b> & plain", parse_mode="HTML")
        odd = await bot.send_message(42, "a+b=c&d; naïve 🙂 %20 \u200b")
        await bot.send_document(42, b"line one\nline two\n", filename="notes.txt", caption="yours")
        telegram_api.fail_next("sendMessage", status=429, retry_after=3)
        with pytest.raises(RetryAfter) as limited:
            await bot.send_message(42, "too fast")

    assert sent.text == "bold & plain"  # the fake parsed the form-encoded parse_mode and text
    assert odd.text == "a+b=c&d; naïve 🙂 %20 \u200b"  # url-encoding's own characters and odd Unicode survive
    assert {c.content_type for c in telegram_api.calls if c.method == "sendMessage"} == {
        "application/x-www-form-urlencoded"}
    (document,) = telegram_api.documents
    assert (document.filename, document.content, document.caption) == ("notes.txt", b"line one\nline two\n",
                                                                        "yours")
    assert limited.value.retry_after == 3


async def test_a_bot_api_that_never_answers_times_out() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)
        await asyncio.sleep(30)  # accepts the request, never answers

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        bot = _bot(f"http://127.0.0.1:{port}/bot", timeout_s=0.3)
        await bot.request.initialize()
        with pytest.raises(TimedOut) as late:
            await bot.send_message(42, "hello?")
        assert isinstance(late.value, AnswerLost)  # the request went out: it may have been carried out
        await bot.request.shutdown()
    finally:
        server.close()
        await server.wait_closed()


async def test_an_unreachable_bot_api_is_a_network_error() -> None:
    port = free_port()  # nobody listens there
    request = AiohttpRequest()
    await request.initialize()
    try:
        with pytest.raises(NetworkError) as failed:
            await request.post(f"http://127.0.0.1:{port}/bot{FAKE_BOT_TOKEN}/getMe")
    finally:
        await request.shutdown()
    assert not isinstance(failed.value, TimedOut | AnswerLost)  # nothing reached Telegram


async def test_the_proxy_from_the_environment_is_used(telegram_api: FakeTelegramApi,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # A host that does not resolve: only the proxy (the fake, which answers absolute-form requests) gets there.
    monkeypatch.setenv("HTTP_PROXY", telegram_api.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with _bot("http://api.telegram.invalid/bot") as bot:
        me = await bot.get_me()
    assert me.username == "kith_test_bot"


async def test_no_proxy_hosts_skip_the_proxy(telegram_api: FakeTelegramApi, monkeypatch: pytest.MonkeyPatch) -> None:
    dead_proxy = f"http://127.0.0.1:{free_port()}"  # nobody listens there: going through it would fail
    monkeypatch.setenv("HTTP_PROXY", dead_proxy)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.delenv("no_proxy", raising=False)
    async with _bot(telegram_api.base_url) as bot:
        me = await bot.get_me()
    assert me.username == "kith_test_bot"


def test_proxy_credentials_travel_in_a_header_not_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://ops:p%40ss@proxy.internal:3128")
    monkeypatch.delenv("https_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    proxy, headers = env_proxy("https", "api.telegram.org")
    assert proxy == "http://proxy.internal:3128"
    assert headers == {"Proxy-Authorization": "Basic " + base64.b64encode(b"ops:p@ss").decode()}
    assert env_proxy("ftp", "api.telegram.org") == (None, None)  # no proxy named for that scheme
    monkeypatch.setenv("HTTPS_PROXY", "http://ops:pw@[fd00::1]:3128")
    assert env_proxy("https", "api.telegram.org")[0] == "http://[fd00::1]:3128"
