"""Photos on Telegram, end to end (issue #35): shown to a model that sees, with the caption, for that turn only;
named as unseen to one that does not; never remembered; never kept. The real python-telegram-bot against the fake
Bot API (getFile and its file server), litellm against the fake OpenAI-compatible model."""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest

from ground.config import MediaSettings, MemorySettings
from kith.settings import AppSettings
from people import history
from persona.labels import PHOTO_EARLIER, PHOTO_SHOWN, PHOTO_UNSEEN
from tests.fakes.openai_api import FakeOpenAI, Scripted
from tests.fakes.telegram_api import FakeTelegramApi
from tests.support.telegram_app import start_telegram_app, telegram_settings

ANA = 6_601
BIKE = b"\xff\xd8\xff\xe0 a JPEG of a red bike"
CAPTURE_SYSTEM = "The transcript and the stored memories"


def _settings(make_settings: Callable[..., AppSettings], fake_llm: FakeOpenAI, tg: FakeTelegramApi,
              vision: bool | str, **changes: Any) -> AppSettings:
    base = dataclasses.replace(make_settings(fake_llm), **changes)
    return telegram_settings(base, tg, policy={"dm": "open"}, media=MediaSettings(vision=vision))


async def _answered(tg: FakeTelegramApi, n: int) -> list[str]:
    await tg.wait_until(lambda: len(tg.texts_to(ANA)) >= n)
    return tg.texts_to(ANA)


def _images(content: Any) -> list[str]:
    return [p["image_url"]["url"] for p in content if p.get("type") == "image_url"] if isinstance(content, list) else []


def _text(content: Any) -> str:
    return content if isinstance(content, str) else " ".join(p["text"] for p in content if p.get("type") == "text")


async def test_a_model_that_sees_is_shown_the_photo_with_its_caption_for_that_turn_only(
        fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings], monkeypatch: pytest.MonkeyPatch) -> None:
    async with FakeTelegramApi() as tg:
        app = await start_telegram_app(_settings(make_settings, fake_llm, tg, vision=True), monkeypatch)
        try:
            fake_llm.reply("What a red! Is it new?")
            tg.push_photo(ANA, ANA, BIKE, caption="look at my new bike")
            assert (await _answered(tg, 1))[0] == "What a red! Is it new?"
            shown = fake_llm.requests[-1]["messages"][-1]["content"]
            assert _images(shown) == ["data:image/jpeg;base64," + base64.b64encode(BIKE).decode()]
            assert _text(shown) == f"{PHOTO_SHOWN} look at my new bike"
            # Recorded as the person's words only: the caption, marked as having come with a photo.
            [row] = [r for r in await app.db.run(history.recent, f"telegram:{ANA}", 5) if r.role == "user"]
            assert (row.text, row.medium) == ("look at my new bike", "photo")

            fake_llm.reply("Ride safe!")
            tg.push_text(ANA, ANA, "going for a ride now")
            await _answered(tg, 2)
            later = fake_llm.requests[-1]["messages"]
            assert not any(_images(m["content"]) for m in later)  # the photo was for its own turn only
            assert f"{PHOTO_EARLIER} look at my new bike" in [_text(m["content"]) for m in later]
        finally:
            await app.close()


async def test_a_model_that_does_not_see_answers_the_caption_and_is_told_a_photo_came(
        fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings], monkeypatch: pytest.MonkeyPatch) -> None:
    async with FakeTelegramApi() as tg:
        # "auto": litellm does not know the fake model, so it is taken not to see.
        app = await start_telegram_app(_settings(make_settings, fake_llm, tg, vision="auto"), monkeypatch)
        try:
            fake_llm.reply("Sounds fun. I can't see photos, though: what colour is it?")
            tg.push_photo(ANA, ANA, BIKE, caption="look at my new bike")
            await _answered(tg, 1)
            said = fake_llm.requests[-1]["messages"][-1]["content"]
            assert said == f"{PHOTO_UNSEEN} look at my new bike"
            assert tg.downloads == []  # not fetched: nothing would look at it

            tg.push_photo(ANA, ANA, BIKE)  # a photo alone, unseen: the honest line, no model call
            asked = len(fake_llm.requests)
            assert "I can only read text so far, so that photo didn't reach me" in (await _answered(tg, 2))[1]
            assert len(fake_llm.requests) == asked
        finally:
            await app.close()


async def test_what_a_photo_shows_is_never_remembered_only_the_caption_is_the_persons_words(
        fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings], monkeypatch: pytest.MonkeyPatch) -> None:
    async with FakeTelegramApi() as tg:
        settings = _settings(make_settings, fake_llm, tg, vision=True,
                             memory=MemorySettings(embedder="none", capture=True))
        app = await start_telegram_app(settings, monkeypatch)
        extractions: list[dict[str, Any]] = []

        def route(request: dict[str, Any]) -> Scripted | None:
            if request["messages"][0]["content"].startswith(CAPTURE_SYSTEM):
                extractions.append(request)
                return Scripted(text=json.dumps({"memories": []}))
            return Scripted(text="Lovely.")

        fake_llm.route = route
        try:
            tg.push_photo(ANA, ANA, BIKE, caption="my bike")
            await _answered(tg, 1)
            await app.background.drain()
            assert extractions, "capture never ran"
            for request in extractions:  # capture reads the words: no image, and nothing of one, reaches it
                assert not any(_images(m["content"]) for m in request["messages"])
                assert "base64" not in json.dumps(request)
        finally:
            await app.close()


async def test_auto_asks_litellm_and_a_model_it_knows_sees_is_shown_the_photo(
        fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings], monkeypatch: pytest.MonkeyPatch) -> None:
    async with FakeTelegramApi() as tg:
        seeing = dataclasses.replace(make_settings(fake_llm).llm, model="openai/gpt-4o")
        app = await start_telegram_app(_settings(make_settings, fake_llm, tg, vision="auto", llm=seeing),
                                       monkeypatch)
        try:
            tg.push_photo(ANA, ANA, BIKE, caption="which bell should I buy?")
            await _answered(tg, 1)
            assert len(_images(fake_llm.requests[-1]["messages"][-1]["content"])) == 1
        finally:
            await app.close()
