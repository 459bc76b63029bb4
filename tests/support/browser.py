"""The memory room in a real browser: kith on the fake Telegram Bot API with its page on, and headless Chromium
(the distribution's, with its matching chromedriver; ``.ci/run`` installs both) driven by Selenium.

The bot runs in the test's own event loop, so every browser call runs in a thread (:class:`Browser`): a call that
blocked the loop would wait forever for a page the loop serves. ``KITH_WEB_SCREENSHOTS=DIR`` saves each page the
tests shoot as ``DIR/web-<page>.png`` (``docs/`` keeps the ones docs/web.md shows).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ground.config import WebSettings
from kith.app.lifecycle import App
from kith.app.run import platform_channels
from kith.app.wiring import build_app
from kith.settings import AppSettings
from people import directory
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi
from tests.support.telegram_app import telegram_settings

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
WIDTH, HEIGHT = 1100, 1400
PHONE = 390  # a phone's width in CSS pixels
WAIT_S = 20.0  # a wait on the bot bounds only a failure's time: beside PostgreSQL, under load, 5 s was short
NAVIGATION_WAIT_S = 20.0  # a click's next page arrives in milliseconds; this bounds only a failure's time


def _found(names: tuple[str, ...]) -> str | None:
    return next((path for path in map(shutil.which, names) if path), None)


class Browser:
    """Headless Chromium, each call in a thread of its own so the bot's event loop keeps serving."""

    def __init__(self, driver: Any) -> None:
        self.driver = driver
        self.base = ""
        self.shots = True  # a test run on several backends shoots on one: the pictures are of the common case

    async def _do(self, fn: Any, *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)

    async def go(self, path: str) -> None:
        await self._do(self.driver.get, path if path.startswith("http") else self.base + path)

    async def text(self, css: str = "body") -> str:
        from selenium.webdriver.common.by import By

        return str(await self._do(lambda: self.driver.find_element(By.CSS_SELECTOR, css).text))

    async def count(self, css: str) -> int:
        from selenium.webdriver.common.by import By

        return len(await self._do(self.driver.find_elements, By.CSS_SELECTOR, css))

    async def click(self, css: str) -> None:
        """Click what ``css`` finds (a link or a form's button) and wait for the page it opens: every click here
        navigates, and a page read before the new one arrives would be the old one."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions
        from selenium.webdriver.support.wait import WebDriverWait

        def clicked() -> None:
            old = self.driver.find_element(By.TAG_NAME, "html")
            self.driver.find_element(By.CSS_SELECTOR, css).click()
            WebDriverWait(self.driver, NAVIGATION_WAIT_S).until(expected_conditions.staleness_of(old))

        await self._do(clicked)

    async def fill(self, css: str, value: str) -> None:
        from selenium.webdriver.common.by import By

        def typed() -> None:
            element = self.driver.find_element(By.CSS_SELECTOR, css)
            element.clear()
            element.send_keys(value)

        await self._do(typed)

    async def choose(self, css: str, option: str) -> None:
        """Pick ``option`` (its visible text) in the drop-down ``css`` finds."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.select import Select

        await self._do(lambda: Select(self.driver.find_element(By.CSS_SELECTOR, css)).select_by_visible_text(option))

    async def url(self) -> str:
        return str(await self._do(lambda: self.driver.current_url))

    async def cookies(self) -> list[dict[str, Any]]:
        return list(await self._do(self.driver.get_cookies))

    async def forget_cookies(self) -> None:
        await self._do(self.driver.delete_all_cookies)

    async def overflow(self, width: int) -> int:
        """How far this page runs past a window ``width`` CSS pixels wide (0: it fits)."""

        def measured() -> int:
            self.driver.set_window_size(width, HEIGHT)
            try:
                inner = self.driver.execute_script("return window.innerWidth")
                whole = self.driver.execute_script("return document.documentElement.scrollWidth")
                return max(0, int(whole) - int(inner))
            finally:
                self.driver.set_window_size(WIDTH, HEIGHT)

        return int(await self._do(measured))

    async def shoot(self, page: str, *, width: int = WIDTH) -> None:
        """Save this page as ``web-<page>.png`` under ``$KITH_WEB_SCREENSHOTS``, whole (when that is set)."""
        folder = os.environ.get("KITH_WEB_SCREENSHOTS")
        if not folder or not self.shots:
            return

        def shot() -> None:
            self.driver.set_window_size(width, 600)  # measured at its least, so the shot ends where the page does
            height = self.driver.execute_script("return document.documentElement.scrollHeight")
            frame = self.driver.execute_script("return window.outerHeight - window.innerHeight")
            self.driver.set_window_size(width, min(int(height) + int(frame), 4000))
            self.driver.save_screenshot(str(Path(folder) / f"web-{page}.png"))
            self.driver.set_window_size(WIDTH, HEIGHT)

        await self._do(shot)


def _chrome() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver = _found(CHROMIUM), _found(("chromedriver",))
    if binary is None or driver is None:
        why = "no Chromium and chromedriver here: .ci/run installs them (scripts/_chromium.sh)"
        if os.environ.get("CI"):  # there .ci/run installed them: their absence is a failure, never a quiet skip
            pytest.fail(why)
        pytest.skip(why)
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--window-size={WIDTH},{HEIGHT}", "--disable-extensions", "--no-first-run",
                 "--disable-background-networking", "--disable-sync", "--disable-component-update",
                 "--disable-default-apps", "--metrics-recording-only", "--no-default-browser-check"):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One headless Chromium for a test module (started once: it takes a second)."""
    driver = _chrome()
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
async def browser(chromium: Any) -> AsyncIterator[Browser]:
    """The module's Chromium with no cookies: every test signs in for itself."""
    browser = Browser(chromium)
    await browser.forget_cookies()
    yield browser
    await browser.forget_cookies()


def web_settings(base: AppSettings, tg: FakeTelegramApi, *, dm: str = "pairing") -> AppSettings:
    """``base`` on ``tg`` with DM policy ``dm``, and the page on at a free loopback port (bound by the bot itself)."""
    settings = telegram_settings(base, tg, policy={"dm": dm})
    return dataclasses.replace(settings, web=WebSettings(enabled=True, host="127.0.0.1", port=0))


@contextlib.asynccontextmanager
async def page_bot(settings: AppSettings, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[App]:
    """kith as ``bot.py run`` runs it (channels, control channel and page), on the fake Bot API; closed after."""
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", FAKE_BOT_TOKEN)
    app = await build_app(settings, warm_llm=False)
    async with app.running(platform_channels(settings, app)) as started:
        assert started == ["telegram"] and app.web is not None
        yield app


def person(app: App, account: str, name: str) -> str:
    """The person of ``account`` (made now, named ``name``, if kith did not know them)."""
    return str(app.db.run_sync(directory.resolve, account, name, datetime.now(UTC)))


async def signed_in(browser: Browser, app: App) -> None:
    """``browser`` signed in with a fresh link, as the operator pastes the one ``bot.py web url`` prints."""
    assert app.web is not None
    browser.base = app.web.address.rstrip("/")
    await browser.go(app.web.login_url())
