"""Files a Telegram message carries: arriving as Attachment handles and fetched through the channel's own Bot
(real python-telegram-bot against the loopback fake Bot API and its file server)."""

# Test functions receive the imported ``telegram_api`` fixture by argument name, which ruff reads
# as redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
import pytest

from channels.telegram.channel import TelegramChannel
from channels.telegram.settings import TelegramSettings
from delivery.inbound import Cursors, InboundJournal
from ground.db import Database
from ground.types import Attachment, AttachmentError, AttachmentKind, AttachmentSource, InboundMessage
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, GET_FILE_MAX_BYTES, FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.channels import Inbox, running

ALICE = 1001
GROUP = -100_555
MB = 1024 * 1024
VOICE_BYTES = b"OggS\x00\x02" + bytes(range(256)) * 40  # a few kB that are not all alike
PHOTO_BYTES = b"\xff\xd8\xff\xe0" + b"photo-" * 3000
PDF_BYTES = b"%PDF-1.7\n" + b"page " * 2000


@dataclass
class Stores:
    db: Database
    journal: InboundJournal
    cursors: Cursors


@pytest.fixture
def stores(db: Database, journal: InboundJournal) -> Stores:
    return Stores(db, journal, Cursors(db))


def _channel(api: FakeTelegramApi, stores: Stores) -> TelegramChannel:
    settings = replace(TelegramSettings(base_url=api.base_url, poll_timeout_s=1))
    return TelegramChannel(settings, FAKE_BOT_TOKEN, journal=stores.journal, cursors=stores.cursors,
                           poll_backoff_base_s=0.05, poll_backoff_max_s=0.2, stop_grace_s=1.0)


def _only(message: InboundMessage) -> Attachment:
    (attachment,) = message.attachments
    return attachment


async def _refused(channel: TelegramChannel, attachment: Attachment, max_bytes: int) -> AttachmentError:
    with pytest.raises(AttachmentError) as caught:
        await channel.fetch_attachment(attachment, max_bytes)
    return caught.value


def _file_calls(api: FakeTelegramApi) -> list[Any]:
    return [c for c in api.calls if c.method == "getFile"]


# --- arriving ------------------------------------------------------------------------------------
async def test_a_voice_note_is_unreadable_as_before_and_carries_its_file(
    telegram_api: FakeTelegramApi, stores: Stores
) -> None:
    api = telegram_api
    api.push_voice(ALICE, ALICE, VOICE_BYTES, duration=7)
    inbox = Inbox()
    async with running(_channel(api, stores), inbox) as channel:
        (message,) = await inbox.wait_for(1)
        voice = _only(message)
        data = await channel.fetch_attachment(voice, max_bytes=MB)

    assert isinstance(channel, AttachmentSource)
    assert (message.text, message.unreadable) == ("", "voice message")
    assert (voice.kind, voice.name, voice.mime, voice.size, voice.duration_s) == (
        AttachmentKind.VOICE, "voice.ogg", "audio/ogg", len(VOICE_BYTES), 7.0)
    assert data == VOICE_BYTES
    assert [c.params["file_id"] for c in _file_calls(api)] == [voice.ref]
    assert len(api.downloads) == 1 and api.downloads[0].startswith("voice/")


async def test_a_photo_is_an_image_of_its_largest_size(telegram_api: FakeTelegramApi, stores: Stores) -> None:
    api = telegram_api
    api.push_photo(ALICE, ALICE, PHOTO_BYTES)
    inbox = Inbox()
    async with running(_channel(api, stores), inbox) as channel:
        (message,) = await inbox.wait_for(1)
        photo = _only(message)
        data = await channel.fetch_attachment(photo, max_bytes=MB)

    assert (message.text, message.unreadable) == ("", "photo")
    assert (photo.kind, photo.name, photo.mime, photo.size, photo.duration_s) == (
        AttachmentKind.IMAGE, "photo.jpg", "image/jpeg", len(PHOTO_BYTES), None)
    assert data == PHOTO_BYTES  # the thumbnails the fake also holds have other bytes


async def test_a_document_an_image_sent_as_a_file_and_an_audio_file(
    telegram_api: FakeTelegramApi, stores: Stores
) -> None:
    api = telegram_api
    png = b"\x89PNG\r\n\x1a\n" + b"pixels" * 500
    song = b"ID3\x04" + b"music" * 900
    api.push_document(ALICE, ALICE, PDF_BYTES, file_name="minutes.pdf", mime_type="application/pdf")
    api.push_document(ALICE, ALICE, png, file_name="screenshot.png", mime_type="image/png")
    api.push_audio(ALICE, ALICE, song, duration=95, file_name="take 2.mp3")
    inbox = Inbox()
    async with running(_channel(api, stores), inbox) as channel:
        messages = await inbox.wait_for(3)
        document, image, audio = (_only(m) for m in messages)
        fetched = [await channel.fetch_attachment(a, max_bytes=MB) for a in (document, image, audio)]

    assert [m.unreadable for m in messages] == ["file", "file", "audio file"]
    assert (document.kind, document.name, document.mime, document.size) == (
        AttachmentKind.DOCUMENT, "minutes.pdf", "application/pdf", len(PDF_BYTES))
    assert (image.kind, image.name, image.mime) == (AttachmentKind.IMAGE, "screenshot.png", "image/png")
    assert (audio.kind, audio.name, audio.mime, audio.duration_s) == (
        AttachmentKind.VOICE, "take 2.mp3", "audio/mpeg", 95.0)
    assert fetched == [PDF_BYTES, png, song]


async def test_a_caption_stays_the_text_and_the_file_rides_along(
    telegram_api: FakeTelegramApi, stores: Stores
) -> None:
    api = telegram_api
    api.push_photo(GROUP, ALICE, PHOTO_BYTES, "what is this, @kith_test_bot?", "supergroup")
    inbox = Inbox()
    async with running(_channel(api, stores), inbox):
        (message,) = await inbox.wait_for(1)

    assert (message.text, message.unreadable, message.mentioned) == ("what is this, @kith_test_bot?", "", True)
    assert _only(message).kind is AttachmentKind.IMAGE


# --- refusing what is too large ----------------------------------------------------------------------
async def test_a_file_past_max_bytes_is_refused_before_anything_is_downloaded(
    telegram_api: FakeTelegramApi, stores: Stores
) -> None:
    api = telegram_api
    api.push_voice(ALICE, ALICE, VOICE_BYTES)
    inbox = Inbox()
    async with running(_channel(api, stores), inbox) as channel:
        voice = _only((await inbox.wait_for(1))[0])
        by_message = await _refused(channel, voice, max_bytes=len(VOICE_BYTES) - 1)
        calls_after_first = len(_file_calls(api))
        # A handle without a size (kept before sizes were known, or another client): getFile's size decides.
        by_get_file = await _refused(channel, replace(voice, size=None), max_bytes=len(VOICE_BYTES) - 1)

    assert by_message.too_large and by_get_file.too_large
    assert calls_after_first == 0  # the message's own size was enough to refuse it
    assert len(_file_calls(api)) == 1
    assert api.downloads == []


@pytest.mark.parametrize("chunked", [False, True], ids=["content_length", "chunked"])
async def test_a_download_growing_past_max_bytes_is_cut_off(
    telegram_api: FakeTelegramApi, stores: Stores, chunked: bool
) -> None:
    api = telegram_api
    api.chunked_files = chunked  # without a Content-Length only the bytes as they come tell
    big = bytes(range(256)) * 4096  # 1 MB
    api.push_document(ALICE, ALICE, big, declared_size=1000)  # Telegram's size says less than comes
    inbox = Inbox()
    async with running(_channel(api, stores), inbox) as channel:
        document = _only((await inbox.wait_for(1))[0])
        error = await _refused(channel, document, max_bytes=64 * 1024)
        # The connection cut was not left in the Bot's pool: the next fetch works.
        api.push_document(ALICE, ALICE, PDF_BYTES)
        fine = _only((await inbox.wait_for(2))[1])
        data = await channel.fetch_attachment(fine, max_bytes=MB)

    assert error.too_large
    assert len(api.downloads) == 2
    assert data == PDF_BYTES


async def test_a_file_past_telegrams_20_mb_is_too_large(telegram_api: FakeTelegramApi, stores: Stores) -> None:
    api = telegram_api
    api.push_voice(ALICE, ALICE, b"OggS", declared_size=GET_FILE_MAX_BYTES + 1)
    inbox = Inbox()
    async with running(_channel(api, stores), inbox) as channel:
        voice = _only((await inbox.wait_for(1))[0])
        error = await _refused(channel, voice, max_bytes=50 * MB)  # kith would take it; Telegram will not give it

    assert error.too_large
    assert [c.failed_status for c in _file_calls(api)] == [None]  # asked, and refused by getFile itself
    assert api.downloads == []


# --- failing ------------------------------------------------------------------------------------------
async def test_a_failed_getfile_or_download_is_an_error_worth_another_try(
    telegram_api: FakeTelegramApi, stores: Stores
) -> None:
    api = telegram_api
    api.push_voice(ALICE, ALICE, VOICE_BYTES)
    inbox = Inbox()
    async with running(_channel(api, stores), inbox) as channel:
        voice = _only((await inbox.wait_for(1))[0])
        api.fail_next("getFile", 502)
        gateway = await _refused(channel, voice, max_bytes=MB)
        api.fail_next_download(503)
        download = await _refused(channel, voice, max_bytes=MB)
        unknown = await _refused(channel, replace(voice, ref="AwACAgIAAxkBAAInothere"), max_bytes=MB)
        api.answer_next_oddly("getFile", ["not", "a", "file"])
        odd = await _refused(channel, voice, max_bytes=MB)
        api.answer_next_oddly("getFile", {"file_path": "voice/file_1.oga"})  # no file_id: PTB cannot make a File
        shapeless = await _refused(channel, voice, max_bytes=MB)
        data = await channel.fetch_attachment(voice, max_bytes=MB)  # tried again, it comes

    assert not any(e.too_large for e in (gateway, download, unknown, odd, shapeless))
    assert "getFile" in str(gateway) and "download" in str(download)
    assert data == VOICE_BYTES


async def test_fetch_before_start_is_an_error(telegram_api: FakeTelegramApi, stores: Stores) -> None:
    channel = _channel(telegram_api, stores)
    error = await _refused(channel, Attachment(AttachmentKind.VOICE, "AwAC"), max_bytes=MB)
    assert not error.too_large and telegram_api.calls == []


async def test_the_token_is_in_no_log_line_nor_error_of_a_fetch(
    telegram_api: FakeTelegramApi, stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    api = telegram_api
    secret = FAKE_BOT_TOKEN.split(":", 1)[1]
    api.push_voice(ALICE, ALICE, VOICE_BYTES)
    api.push_document(ALICE, ALICE, PDF_BYTES, declared_size=10)
    inbox = Inbox()
    errors: list[AttachmentError] = []
    async with running(_channel(api, stores), inbox) as channel:
        voice, grows = (_only(m) for m in await inbox.wait_for(2))
        caplog.clear()
        with caplog.at_level(logging.DEBUG):  # every logger, PTB's and aiohttp's included
            await channel.fetch_attachment(voice, max_bytes=MB)
            api.fail_next_download(502)
            errors.append(await _refused(channel, voice, max_bytes=MB))
            api.chunked_files = True
            errors.append(await _refused(channel, grows, max_bytes=100))  # cut off as it streams
            await api.go_away()  # Telegram unreachable: a connection error
            errors.append(await _refused(channel, voice, max_bytes=MB))
            await api.come_back()

    lines = [record.getMessage() for record in caplog.records]
    assert any("telegram attachment fetched" in line for line in lines)  # the fetch was logged, and seen here
    assert sum("telegram attachment not fetched" in line for line in lines) == 3
    assert [e.too_large for e in errors] == [False, True, False]
    assert not [line for line in lines if secret in line]
    for error in errors:
        # Raised without the PTB/aiohttp exception that may quote the file URL, so no traceback shows it.
        assert secret not in str(error) and error.__cause__ is None and error.__suppress_context__


# --- the fake's file server --------------------------------------------------------------------------
async def test_the_fake_file_server_refuses_a_wrong_token_and_an_unknown_path(telegram_api: FakeTelegramApi) -> None:
    api = telegram_api
    stored = api.add_file(b"hello", "documents", "txt")
    async with aiohttp.ClientSession() as session:
        async def get(url: str) -> tuple[int, bytes]:
            async with session.get(url) as response:
                return response.status, await response.read()

        good = await get(f"{api.base_file_url}{api.token}/{stored.file_path}")
        wrong_token = await get(f"{api.base_file_url}7000000001:not-the-token/{stored.file_path}")
        unknown = await get(f"{api.base_file_url}{api.token}/documents/file_999.txt")

    assert good == (200, b"hello")
    assert wrong_token[0] == 401 and unknown[0] == 404
    assert api.downloads == [stored.file_path, stored.file_path, "documents/file_999.txt"]
