"""A send whose request went out but whose answer never came is "maybe delivered", on Discord and Slack alike."""

from __future__ import annotations

from collections.abc import Callable

import aiohttp
import pytest
from aiohttp.client_reqrep import ConnectionKey

from channels.discord import translate as discord_translate
from channels.slack import channel as slack
from ground.types import SendError

_KEY = ConnectionKey("127.0.0.1", 1, False, False, None, None, None)

SENT_BUT_UNANSWERED = [
    aiohttp.SocketTimeoutError("Timeout on reading data from socket"),
    aiohttp.ServerDisconnectedError(),
    aiohttp.ClientPayloadError("Response payload is not completed"),
    TimeoutError(),
]
NEVER_SENT = [
    aiohttp.ClientConnectorError(_KEY, ConnectionRefusedError(111, "Connection refused")),
    aiohttp.ConnectionTimeoutError("Connection timeout to host"),
]


@pytest.mark.parametrize("send_error_for", [discord_translate.send_error_for, slack.send_error_for])
def test_only_a_request_that_went_out_may_have_been_delivered(send_error_for: Callable[[BaseException], SendError]
                                                               ) -> None:
    for exc in SENT_BUT_UNANSWERED:
        error = send_error_for(exc)
        assert error.maybe_delivered and not error.permanent, exc
    for exc in NEVER_SENT:
        error = send_error_for(exc)
        assert not error.maybe_delivered and not error.permanent, exc
