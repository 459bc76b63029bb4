"""Files in the terminal chat (issue #35): ``/file <path> [caption]`` shares a file from this machine as a platform
message would carry it: a Markdown document kept and recalled later, a voice note transcribed, a missing path or an
unknown kind answered honestly. kith as built for ``bot.py chat``, litellm against the fake model."""

from __future__ import annotations

import asyncio
import dataclasses
import io
from collections.abc import Callable
from pathlib import Path

from channels.terminal import TerminalChannel
from ground.config import DeliverySettings, MediaSettings
from kith.app.wiring import build_app
from kith.settings import AppSettings
from persona.labels import DOCUMENTS_NOTICE
from tests.fakes.openai_api import FakeOpenAI


async def _chat(settings: AppSettings, lines: list[str], *, expect: int) -> str:
    """What the terminal printed after ``lines`` were typed and ``expect`` lines came back."""
    out = io.StringIO()
    app = await build_app(settings, warm_llm=False)
    terminal = TerminalChannel(stdin=io.StringIO("".join(f"{line}\n" for line in lines)), stdout=out, user="ana",
                               interactive=False)
    try:
        await app.start([terminal])
        for _ in range(400):
            if len(out.getvalue().splitlines()) >= expect:
                break
            await asyncio.sleep(0.025)
        await asyncio.sleep(0.05)
        return out.getvalue()
    finally:
        await app.close()


def _settings(make_settings: Callable[..., AppSettings], fake_llm: FakeOpenAI, **media: object) -> AppSettings:
    return dataclasses.replace(make_settings(fake_llm), delivery=DeliverySettings(debounce_ms=0),
                               media=MediaSettings(**media))  # type: ignore[arg-type]


async def test_a_document_shared_with_file_is_kept_and_recalled_in_a_later_question(
        tmp_path: Path, fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings]) -> None:
    recipes = tmp_path / "my recipes.md"
    recipes.write_text("## Pancakes\n\nTwo eggs, flour and a pinch of cardamom.\n", encoding="utf-8")
    fake_llm.reply("Cardamom!")
    printed = await _chat(_settings(make_settings, fake_llm),
                          [f'/file "{recipes}"', "what spice goes in my pancakes?"], expect=2)
    first, second = printed.splitlines()[:2]
    assert "“my recipes.md” (#1)" in first
    assert second == "Cardamom!"
    system = fake_llm.requests[-1]["messages"][0]["content"]
    assert DOCUMENTS_NOTICE in system and "cardamom" in system[system.index(DOCUMENTS_NOTICE):]


async def test_a_voice_file_is_transcribed_and_answered_like_typed_words(
        tmp_path: Path, fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings]) -> None:
    note = tmp_path / "note.ogg"
    note.write_bytes(b"OggS a short voice note")
    fake_llm.transcripts.append("remind me to water the tomatoes")
    fake_llm.reply("I will.")
    printed = await _chat(_settings(make_settings, fake_llm, transcription_model="openai/whisper-1",
                                    transcription_api_base=fake_llm.base_url), [f"/file {note}"], expect=1)
    assert printed.splitlines()[0] == "I will."
    assert fake_llm.requests[-1]["messages"][-1]["content"] == "remind me to water the tomatoes"


async def test_a_missing_path_or_a_file_kith_cannot_keep_is_answered_honestly(
        tmp_path: Path, fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings]) -> None:
    archive = tmp_path / "photos.zip"
    archive.write_bytes(b"PK\x03\x04")
    printed = await _chat(_settings(make_settings, fake_llm),
                          [f"/file {tmp_path / 'nowhere.md'}", "/file", f"/file {archive}"], expect=3)
    lines = printed.splitlines()
    assert lines[0] == f"No file at {tmp_path / 'nowhere.md'}."
    assert lines[1].startswith("Usage: /file <path>")
    assert "not “photos.zip”" in lines[2]
    assert fake_llm.requests == []
