"""The fake Discord itself, spoken to with plain aiohttp: the protocol details discord.py relies on."""

from __future__ import annotations

import json
import zlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from tests.fakes.discord_api import FAKE_DISCORD_TOKEN, FakeDiscord

ALICE = 200_000_000_000_000_001
AUTH = {"Authorization": f"Bot {FAKE_DISCORD_TOKEN}"}


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    server = FakeDiscord()
    server.add_user(ALICE, "alice")
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


class ZlibStream:
    """discord.py's reading of a zlib-stream: one inflater, a message ends with 00 00 ff ff."""

    def __init__(self) -> None:
        self._inflate = zlib.decompressobj()

    def decode(self, frame: bytes) -> dict[str, Any]:
        assert frame.endswith(b"\x00\x00\xff\xff")
        return json.loads(self._inflate.decompress(frame))


async def test_rest_answers_are_exactly_application_json_with_rate_limit_headers(fake: FakeDiscord) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{fake.api_base}/users/@me", headers=AUTH) as ok:
            assert ok.headers["Content-Type"] == "application/json"
            assert {"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset-After"} <= set(ok.headers)
            assert (await ok.json())["id"] == str(fake.bot_id)
        async with http.get(f"{fake.api_base}/users/@me", headers={"Authorization": "Bot wrong"}) as refused:
            assert refused.status == 401 and (await refused.json())["message"] == "401: Unauthorized"


async def test_message_limits_and_scripted_rate_limit(fake: FakeDiscord) -> None:
    dm = fake.open_dm(ALICE)
    url = f"{fake.api_base}/channels/{dm}/messages"
    fake.fail_next("create_message", 429, retry_after=0.25)
    async with aiohttp.ClientSession() as http:
        async with http.post(url, headers=AUTH, json={"content": "hi"}) as limited:
            body = await limited.json()
            assert (limited.status, body["retry_after"], body["global"]) == (429, 0.25, False)
            assert limited.headers["Via"] and limited.headers["X-RateLimit-Remaining"] == "0"
        async with http.post(url, headers=AUTH, json={"content": "x" * 2_001}) as too_long:
            body = await too_long.json()
            assert (too_long.status, body["code"]) == (400, 50035) and "content" in body["errors"]
        async with http.post(url, headers=AUTH, json={"content": "x" * 2_000}) as at_limit:
            assert at_limit.status == 200
        async with http.post(f"{fake.api_base}/channels/1/messages", headers=AUTH, json={"content": "?"}) as gone:
            assert (gone.status, (await gone.json())["code"]) == (404, 10003)

    assert [len(p.content) for p in fake.posted] == [2_000]


async def test_gateway_handshake_compressed_and_resume(fake: FakeDiscord) -> None:
    async with aiohttp.ClientSession() as http:
        ws = await http.ws_connect(f"{fake.gateway_url}?v=10&encoding=json&compress=zlib-stream")
        stream = ZlibStream()
        hello = stream.decode((await ws.receive()).data)
        assert hello["op"] == 10 and hello["d"]["heartbeat_interval"] > 0
        await ws.send_json({"op": 2, "d": {"token": FAKE_DISCORD_TOKEN, "intents": 1 << 15, "properties": {}}})
        ready = stream.decode((await ws.receive()).data)
        assert (ready["t"], ready["s"]) == ("READY", 1)
        await ws.send_json({"op": 1, "d": 1})
        assert stream.decode((await ws.receive()).data)["op"] == 11
        sent = fake.push_message(fake.open_dm(ALICE), ALICE, "while connected")
        assert stream.decode((await ws.receive()).data)["d"]["id"] == sent["id"]
        await ws.close()

        missed = fake.push_message(fake.open_dm(ALICE), ALICE, "while away")
        ws = await http.ws_connect(ready["d"]["resume_gateway_url"])  # uncompressed: plain text frames
        assert (await ws.receive_json())["op"] == 10
        await ws.send_json({"op": 6, "d": {"token": FAKE_DISCORD_TOKEN, "session_id": ready["d"]["session_id"],
                                           "seq": 2}})
        replayed = [await ws.receive_json(), await ws.receive_json()]
        assert [(f["t"], f["d"].get("id")) for f in replayed] == [("MESSAGE_CREATE", missed["id"]), ("RESUMED", None)]
        await ws.close()

        fake.invalidate_sessions()
        ws = await http.ws_connect(fake.resume_gateway_url)
        await ws.receive_json()
        await ws.send_json({"op": 6, "d": {"token": FAKE_DISCORD_TOKEN, "session_id": ready["d"]["session_id"],
                                           "seq": 4}})
        assert await ws.receive_json() == {"op": 9, "d": False, "s": None, "t": None}
        await ws.close()


@pytest.mark.parametrize(("token", "allowed", "close_code"), [("wrong", True, 4004), (FAKE_DISCORD_TOKEN, False, 4014)])
async def test_gateway_refusals_close_with_discords_codes(fake: FakeDiscord, token: str, allowed: bool,
                                                           close_code: int) -> None:
    fake.message_content_allowed = allowed
    async with aiohttp.ClientSession() as http:
        ws = await http.ws_connect(fake.gateway_url)
        await ws.receive_json()
        await ws.send_json({"op": 2, "d": {"token": token, "intents": 1 << 15, "properties": {}}})
        closing = await ws.receive()
        assert closing.type is aiohttp.WSMsgType.CLOSE and closing.data == close_code


async def test_channel_history_pages_as_discord_does(fake: FakeDiscord) -> None:
    dm = fake.open_dm(ALICE)
    ids = [int(fake.post_unseen(dm, ALICE, f"m{i}")["id"]) for i in range(5)]
    url = f"{fake.api_base}/channels/{dm}/messages"

    async def page(**query: int) -> list[str]:
        async with aiohttp.ClientSession() as http, http.get(url, headers=AUTH, params=query) as answer:
            assert answer.status == 200 and answer.headers["Content-Type"] == "application/json"
            body = await answer.json()
            assert all("guild_id" not in m and "member" not in m for m in body)  # gateway-only fields
            return [m["content"] for m in body]

    # "after" gives the oldest messages past it, "before" (or neither) the newest: newest first either way.
    assert await page(after=ids[0], limit=2) == ["m2", "m1"]
    assert await page(limit=2) == ["m4", "m3"]
    assert await page(before=ids[3], limit=2) == ["m2", "m1"]
    assert await page(after=ids[4]) == []
    async with aiohttp.ClientSession() as http, http.get(f"{fake.api_base}/channels/1/messages",
                                                         headers=AUTH) as gone:
        assert (gone.status, (await gone.json())["code"]) == (404, 10003)
