"""The memory room in headless Chromium against kith on the fake Telegram Bot API: sign in with the printed link,
read the overview and the people, approve a pairing request; and what the page refuses."""

# ruff: noqa: F811

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import io
import re
import shutil
import socket
import ssl
import subprocess
import tempfile

import httpx
import pytest
import sqlalchemy as sa

from delivery.outbox import outbox
from kith.app.lifecycle import App
from kith.app.run import platform_channels
from kith.app.wiring import build_app
from kith.control.dispatch import run_command
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.browser import WAIT_S, Browser, browser, chromium, page_bot, person, signed_in, web_settings  # noqa: F401
from tests.support.telegram_app import ask
from tests.support.waiting import until

STRANGER = 601


@pytest.mark.backends("sqlite", "postgres")  # the page's own reads of the database
async def test_the_printed_link_signs_in_once_and_opens_the_overview(telegram_api, fake_llm, make_settings,
                                                                      monkeypatch, browser, backend,
                                                                      capsys) -> None:
    base = make_settings(fake_llm)
    browser.shots = backend == "sqlite"
    # The health lines name the data directory: a neutral one, for the screenshot docs/web.md shows.
    with tempfile.TemporaryDirectory(prefix="kith-") as data:
        settings = dataclasses.replace(base, storage=dataclasses.replace(base.storage, data_dir=data))
        async with page_bot(web_settings(settings, telegram_api), monkeypatch) as app:
            # The operator's link: the one the start-up line printed.
            printed = re.search(r"the memory room: (\S+) ", capsys.readouterr().err)
            assert printed is not None
            await signs_in_once(app, browser, printed[1])


async def signs_in_once(app: App, browser: Browser, link: str) -> None:
    """The link works once and opens the overview, its token gone from the address bar; then never again."""
    assert app.web is not None
    browser.base = app.web.address.rstrip("/")
    await browser.go(link)
    assert await browser.url() == app.web.address  # the token left the address bar
    body = await browser.text()
    assert "Overview" in body and "Connected: telegram" in body and "database ok" in body
    assert "config ok" in body
    session = next(c for c in await browser.cookies() if c["name"] == "kith_session")
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    await browser.shoot("overview")
    await browser.forget_cookies()
    await browser.go(link)  # spent: the same link never signs in twice
    assert "used already or has expired" in await browser.text()
    await browser.go("/")
    assert "not signed in" in await browser.text()


@pytest.mark.backends("sqlite", "postgres")  # the page's own reads of the database
async def test_a_pairing_request_is_approved_with_its_button(telegram_api: FakeTelegramApi, fake_llm, make_settings,
                                                            monkeypatch, browser) -> None:
    async with page_bot(web_settings(make_settings(fake_llm), telegram_api), monkeypatch) as app:
        telegram_api.push_text(STRANGER, STRANGER, "hello?")
        await telegram_api.wait_until(lambda: any("pairing code" in t for t in telegram_api.texts_to(STRANGER)), WAIT_S)
        await signed_in(browser, app)
        await browser.go("/people")
        pending = await browser.text("#pending")
        assert f"telegram:{STRANGER}" in pending
        await browser.click("#pending form[action='/pairing/approve'] button")
        assert f"approved telegram:{STRANGER}" in await browser.text(".notice")
        assert "No one is waiting" in await browser.text("#pending")
        assert f"telegram:{STRANGER}" in await browser.text("#approved")
        # The bot's own gate sees it at once: the stranger is answered now.
        before = len(telegram_api.texts_to(STRANGER))
        telegram_api.push_text(STRANGER, STRANGER, "hello again")
        await telegram_api.wait_until(lambda: len(telegram_api.texts_to(STRANGER)) > before, WAIT_S)
        assert "pairing code" not in telegram_api.texts_to(STRANGER)[-1]
        await browser.click("header form[action='/logout'] button")
        assert "signed out" in await browser.text()
        await browser.go("/people")  # the session ended in the bot, whatever the browser kept
        assert "not signed in" in await browser.text()


@pytest.mark.parametrize("path", ["/", "/people", "/person/p_x"])
async def test_no_page_without_a_session(telegram_api, fake_llm, make_settings, monkeypatch, browser, path) -> None:
    async with page_bot(web_settings(make_settings(fake_llm), telegram_api), monkeypatch) as app:
        assert app.web is not None
        await browser.go(app.web.address.rstrip("/") + path)
        assert "not signed in" in await browser.text()


async def test_bot_py_web_url_prints_a_fresh_link_from_the_running_bot(telegram_api, fake_llm, make_settings,
                                                                       monkeypatch, browser) -> None:
    settings = web_settings(make_settings(fake_llm), telegram_api)
    async with page_bot(settings, monkeypatch) as app:
        assert app.web is not None
        out, err = io.StringIO(), io.StringIO()
        # The operator's own process, over the control channel (a thread: the bot answers on this loop).
        code = await asyncio.to_thread(run_command, settings, "web.url", argparse.Namespace(web_action="url"),
                                       out=out, err=err)
        assert code == 0, err.getvalue()
        link = out.getvalue().strip()
        assert link.startswith(app.web.address + "login?token=")
        await browser.go(link)
        assert "Overview" in await browser.text("h1")


def test_bot_py_web_url_with_no_bot_running_says_so(make_settings) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = run_command(make_settings(), "web.url", argparse.Namespace(web_action="url"), out=out, err=err)
    assert code == 1 and "no bot is running" in err.getvalue() and out.getvalue() == ""


async def test_a_pending_request_is_denied_and_an_approved_account_revoked(
        telegram_api: FakeTelegramApi, fake_llm, make_settings, monkeypatch, browser) -> None:
    async with page_bot(web_settings(make_settings(fake_llm), telegram_api), monkeypatch) as app:
        for user in (STRANGER, STRANGER + 1):
            telegram_api.push_text(user, user, "hello?")
        await telegram_api.wait_until(lambda: all(any("pairing code" in t for t in telegram_api.texts_to(u))
                                                  for u in (STRANGER, STRANGER + 1)), WAIT_S)
        await signed_in(browser, app)
        await browser.go("/people")
        await browser.click(f"#pending form:has(input[value='telegram:{STRANGER + 1}']) button.quiet")
        assert f"denied telegram:{STRANGER + 1}" in await browser.text(".notice")
        assert f"telegram:{STRANGER + 1}" not in await browser.text("#pending")
        await browser.click("#pending form[action='/pairing/approve'] button")
        assert f"telegram:{STRANGER}" in await browser.text("#approved")
        await browser.click(f"#approved form:has(input[value='telegram:{STRANGER}']) button")
        assert f"revoked telegram:{STRANGER}" in await browser.text(".notice")
        assert "None yet" in await browser.text("#approved")


async def test_with_tls_settings_the_page_is_https_and_its_cookie_secure(
        telegram_api, fake_llm, make_settings, monkeypatch, tmp_path, capsys) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl here to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    await asyncio.to_thread(subprocess.run, [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                                             "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                                             "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    settings = web_settings(make_settings(fake_llm), telegram_api)
    settings = dataclasses.replace(settings, web=dataclasses.replace(settings.web, tls_cert=str(cert),
                                                                     tls_key=str(key)))
    async with page_bot(settings, monkeypatch) as app:
        assert app.web is not None and app.web.address.startswith("https://127.0.0.1:")
        startup = capsys.readouterr().err
        assert f"the memory room: {app.web.address}login?token=" in startup and "WARNING" not in startup
        trusted = ssl.create_default_context(cafile=str(cert))
        async with httpx.AsyncClient(verify=trusted) as client:
            signed = await client.get(app.web.login_url())
            page = await client.get(app.web.address)
        assert signed.status_code == 303
        cookie = signed.headers["set-cookie"].lower()
        assert "secure" in cookie and "httponly" in cookie and "samesite=strict" in cookie
        assert page.status_code == 200 and "Overview" in page.text


async def test_an_address_in_use_is_one_line_and_the_bot_runs_on(telegram_api, fake_llm, make_settings, monkeypatch,
                                                                  capsys) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        settings = web_settings(make_settings(fake_llm), telegram_api, dm="open")
        settings = dataclasses.replace(settings, web=dataclasses.replace(settings.web,
                                                                         port=taken.getsockname()[1]))
        monkeypatch.setenv("TELEGRAM_BOT_TOKEN", FAKE_BOT_TOKEN)
        app = await build_app(settings, warm_llm=False)
        async with app.running(platform_channels(settings, app)) as started:
            assert started == ["telegram"] and app.web is None
            assert "the memory room cannot listen on 127.0.0.1" in capsys.readouterr().err
            fake_llm.reply("still here")
            assert await ask(telegram_api, STRANGER, "hello?") == "still here"
    finally:
        taken.close()


async def test_the_overview_names_a_failed_delivery_by_its_outbox_id(telegram_api: FakeTelegramApi, fake_llm,
                                                                     make_settings, monkeypatch, browser) -> None:
    async with page_bot(web_settings(make_settings(fake_llm), telegram_api), monkeypatch) as app:
        telegram_api.refuse("sendMessage", 400, "Bad Request: chat not found")
        telegram_api.push_text(STRANGER, STRANGER, "hello?")  # its pairing prompt cannot be sent

        def failed(conn: sa.Connection) -> list[sa.Row]:
            return conn.execute(sa.select(outbox.c.id, outbox.c.last_error)
                                .where(outbox.c.last_error.is_not(None))).all()

        await until(lambda: bool(app.db.run_sync(failed)), timeout=20)
        (entry_id, error), = app.db.run_sync(failed)
        await signed_in(browser, app)
        errors = await browser.text("main")
        assert str(entry_id) in errors and error in errors


async def test_the_pages_writes_wait_in_the_control_channels_line(telegram_api: FakeTelegramApi, fake_llm,
                                                                   make_settings, monkeypatch, browser,
                                                                   caplog) -> None:
    async with page_bot(web_settings(make_settings(fake_llm), telegram_api), monkeypatch) as app:
        assert app.web is not None
        assert "found no control channel writer lock" not in caplog.text  # it shares the control channel's
        telegram_api.push_text(STRANGER, STRANGER, "hello?")
        await telegram_api.wait_until(lambda: any("pairing code" in t for t in telegram_api.texts_to(STRANGER)),
                                      WAIT_S)
        await signed_in(browser, app)
        await browser.go("/people")
        async with app.web.one_writer:  # an operator command writing through the control channel, say
            click = asyncio.ensure_future(browser.click("#pending form[action='/pairing/approve'] button"))
            await asyncio.sleep(0.5)
            assert not click.done()  # the page's approve waits its turn
        await click
        assert f"approved telegram:{STRANGER}" in await browser.text(".notice")
