"""The page's server object without serving: its address, its sign-in links, and whose writers' lock it waits on."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

from ground.config import WebSettings
from kith.control.serve import ControlChannels
from kith.web.server import WebServer, writers_lock


def server(**web: Any) -> WebServer:
    page = WebServer(cast(Any, None), WebSettings(**web), asyncio.Lock())
    page.port = 8765
    return page


def test_the_address_names_the_scheme_host_and_port() -> None:
    assert server().address == "http://127.0.0.1:8765/"
    assert server(host="::1").address == "http://[::1]:8765/"
    assert server(host="10.0.0.2", tls_cert="c.pem", tls_key="k.pem").address == "https://10.0.0.2:8765/"


def test_each_link_carries_a_new_token_that_signs_in_once() -> None:
    page = server()
    first, second = page.login_url(), page.login_url()
    assert first != second and first.startswith("http://127.0.0.1:8765/login?token=")
    token = first.split("token=", 1)[1]
    assert page.door.redeem(token, time.monotonic()) is not None  # the server's door keeps monotonic time
    assert page.door.redeem(token, time.monotonic()) is None


def test_the_page_waits_behind_the_control_channels_writers() -> None:
    lock = asyncio.Lock()
    # The one lock the bot's socket and its database rows share.
    assert writers_lock(ControlChannels(None, None, lock)) is lock
    assert isinstance(writers_lock(None), asyncio.Lock)  # no control channel: the page's writes wait for each other
