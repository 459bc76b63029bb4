"""The fake Discord's message edit (and delete), proven against discord.py's own HTTP client.

kith streams a Discord reply by editing one message as it grows; these are the routes it leans on, with
Discord's rate-limit headers and error codes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import discord
import discord.http
import pytest

from tests.fakes.discord_api import FAKE_DISCORD_TOKEN, FakeDiscord, discord_api  # noqa: F401  (a fixture)

ALICE = 200_000_000_000_000_001
AUTH = {"Authorization": f"Bot {FAKE_DISCORD_TOKEN}"}


@pytest.fixture
def fake(discord_api: FakeDiscord) -> FakeDiscord:  # noqa: F811  (the fixture, by argument name)
    discord_api.add_user(ALICE, "alice")
    return discord_api


@pytest.fixture
async def http(fake: FakeDiscord) -> AsyncIterator[discord.http.HTTPClient]:
    client = discord.http.HTTPClient(asyncio.get_running_loop())
    await client.static_login(FAKE_DISCORD_TOKEN)
    try:
        yield client
    finally:
        await client.close()


def _content(text: str) -> discord.http.MultipartParameters:
    return discord.http.handle_message_parameters(content=text)


async def test_one_message_edited_as_it_grows(fake: FakeDiscord, http: discord.http.HTTPClient) -> None:
    dm = fake.open_dm(ALICE)
    posted = await http.send_message(dm, params=_content("Hel"))
    message_id = int(posted["id"])
    for text in ("Hello", "Hello wor", "Hello world"):
        edited = await http.edit_message(dm, message_id, params=_content(text))
        assert edited["content"] == text and edited["id"] == posted["id"]
        assert edited["edited_timestamp"] is not None

    assert fake.edits_of(message_id) == ["Hel", "Hello", "Hello wor", "Hello world"]
    assert [e.content for e in fake.edits] == ["Hello", "Hello wor", "Hello world"]
    assert fake.seen_in(dm) == ["Hello world"]
    fetched = await http.logs_from(dm, 10)
    assert [m["content"] for m in fetched] == ["Hello world"]


async def test_edit_answers_carry_rate_limit_headers_and_a_scripted_429_is_waited_out(
        fake: FakeDiscord, http: discord.http.HTTPClient) -> None:
    dm = fake.open_dm(ALICE)
    posted = await http.send_message(dm, params=_content("a"))
    url = f"{fake.api_base}/channels/{dm}/messages/{posted['id']}"
    async with aiohttp.ClientSession() as session:
        async with session.patch(url, headers=AUTH, json={"content": "ab"}) as ok:
            assert ok.status == 200 and ok.headers["Content-Type"] == "application/json"
            assert {"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset-After",
                    "X-RateLimit-Bucket"} <= set(ok.headers)
        fake.fail_next("edit_message", 429, retry_after=0.25)
        async with session.patch(url, headers=AUTH, json={"content": "abc"}) as limited:
            body = await limited.json()
            assert (limited.status, body["retry_after"], body["global"]) == (429, 0.25, False)
            assert limited.headers["X-RateLimit-Remaining"] == "0" and limited.headers["Retry-After"] == "1"

    # discord.py sleeps retry_after and sends the edit again by itself.
    fake.fail_next("edit_message", 429, retry_after=0.1)
    await http.edit_message(dm, posted["id"], params=_content("abcd"))
    assert [c.status for c in fake.calls if c.name == "edit_message"] == [200, 429, 429, 200]
    assert fake.seen_in(dm) == ["abcd"]


async def test_edit_refusals_are_discords(fake: FakeDiscord, http: discord.http.HTTPClient) -> None:
    dm = fake.open_dm(ALICE)
    posted = await http.send_message(dm, params=_content("mine"))
    theirs = fake.post_unseen(dm, ALICE, "hers")
    with pytest.raises(discord.NotFound) as unknown:
        await http.edit_message(dm, 12345, params=_content("x"))
    assert (unknown.value.code, unknown.value.text) == (10008, "Unknown Message")
    with pytest.raises(discord.Forbidden) as not_mine:
        await http.edit_message(dm, theirs["id"], params=_content("x"))
    assert not_mine.value.code == 50005
    with pytest.raises(discord.HTTPException) as too_long:
        await http.edit_message(dm, posted["id"], params=_content("x" * 2_001))
    assert (too_long.value.status, too_long.value.code) == (400, 50035)
    with pytest.raises(discord.HTTPException) as empty:
        await http.edit_message(dm, posted["id"], params=_content(""))
    assert empty.value.code == 50006
    fake.fail_next("edit_message", 500)  # discord.py waits a second and tries again...
    fake.fail_next("edit_message", 503)  # ...but gives a 503 straight back
    with pytest.raises(discord.DiscordServerError):
        await http.edit_message(dm, posted["id"], params=_content("x"))
    assert fake.edits == [] and fake.seen_in(dm) == ["mine"]


async def test_delete_takes_a_message_off_the_screen(fake: FakeDiscord, http: discord.http.HTTPClient) -> None:
    dm = fake.open_dm(ALICE)
    first = await http.send_message(dm, params=_content("half a rep"))
    await http.send_message(dm, params=_content("the whole reply"))
    await http.delete_message(dm, first["id"])
    assert fake.seen_in(dm) == ["the whole reply"] and fake.deleted == [int(first["id"])]
    with pytest.raises(discord.NotFound):
        await http.delete_message(dm, first["id"])
