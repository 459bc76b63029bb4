"""Files a Discord message carries: taken in as attachments, fetched from the CDN through discord.py's own HTTP
session, against the loopback fake Discord (which serves the files it hands out on its own address)."""

# Test functions receive the imported ``discord_api`` fixture by argument name, which ruff reads
# as redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import logging
from typing import Any

import pytest

from channels.discord.channel import DiscordChannel
from channels.discord.settings import DiscordSettings
from delivery.inbound import InboundJournal
from ground.types import Attachment, AttachmentError, AttachmentKind, AttachmentSource, InboundMessage
from tests.fakes.discord_api import FAKE_DISCORD_TOKEN, FakeDiscord, discord_api  # noqa: F401
from tests.support.channels import Inbox, running

ALICE = 200_000_000_000_000_001
GUILD = 300_000_000_000_000_001
GENERAL = 300_000_000_000_000_002
VOICE_BYTES = b"OggS\x00\x02" + bytes(range(256)) * 40
PHOTO_BYTES = b"\xff\xd8\xff\xe0" + b"\x10JFIF" * 3000 + b"\xff\xd9"
PDF_BYTES = b"%PDF-1.7\n" + b"0123456789" * 500 + b"\n%%EOF"
MAX_BYTES = 1_000_000


@pytest.fixture
def dm(discord_api: FakeDiscord) -> int:
    discord_api.add_user(ALICE, "alice", global_name="Alice")
    discord_api.add_guild(GUILD, "Family", members=[ALICE])
    discord_api.add_text_channel(GUILD, GENERAL, "general")
    return discord_api.open_dm(ALICE)


def _channel(journal: InboundJournal, **kwargs: Any) -> DiscordChannel:
    return DiscordChannel(DiscordSettings(ready_timeout_s=5.0), FAKE_DISCORD_TOKEN, journal=journal,
                          stop_grace_s=1.0, guild_ready_timeout_s=0.05, reidentify_delay_s=0.05, **kwargs)


async def test_a_voice_message_is_unreadable_as_before_and_carries_its_recording(
        discord_api: FakeDiscord, dm: int, journal: InboundJournal) -> None:
    inbox = Inbox()
    async with running(_channel(journal), inbox) as channel:
        discord_api.push_voice_message(dm, ALICE, VOICE_BYTES, duration_s=4.25)
        (message,) = await inbox.wait_for(1)
        (voice,) = message.attachments
        fetched = await channel.fetch_attachment(voice, MAX_BYTES)

    assert isinstance(channel, AttachmentSource)
    assert (message.text, message.unreadable) == ("", "voice message")
    assert (voice.kind, voice.name, voice.mime, voice.size, voice.duration_s) == (
        AttachmentKind.VOICE, "voice-message.ogg", "audio/ogg", len(VOICE_BYTES), 4.25)
    assert voice.ref.startswith(f"{discord_api.url}/attachments/{dm}/")
    assert fetched == VOICE_BYTES
    (download,) = discord_api.downloads
    assert (download.status, download.authorization) == (200, None)  # the bot token stays off the CDN


async def test_an_image_and_a_document_arrive_as_attachments_and_fetch_exactly(
        discord_api: FakeDiscord, dm: int, journal: InboundJournal) -> None:
    inbox = Inbox()
    async with running(_channel(journal), inbox) as channel:
        discord_api.push_message(dm, ALICE, "", attachments=[
            discord_api.attachment(dm, "IMG_2041.jpg", "image/jpeg", PHOTO_BYTES)])
        discord_api.push_message(dm, ALICE, "the contract, and our photo", attachments=[
            discord_api.attachment(dm, "contract.pdf", "application/pdf", PDF_BYTES),
            discord_api.attachment(dm, "us.png", "image/png", PHOTO_BYTES)])
        photo_message, text_message = await inbox.wait_for(2)
        fetched = [await channel.fetch_attachment(a, MAX_BYTES)
                   for a in (*photo_message.attachments, *text_message.attachments)]

    assert (photo_message.text, photo_message.unreadable) == ("", "image")
    assert [(a.kind, a.name, a.mime, a.size, a.duration_s) for a in photo_message.attachments] == [
        (AttachmentKind.IMAGE, "IMG_2041.jpg", "image/jpeg", len(PHOTO_BYTES), None)]
    # A message with words keeps them, and its files too, in Discord's order.
    assert (text_message.text, text_message.unreadable) == ("the contract, and our photo", "")
    assert [(a.kind, a.name) for a in text_message.attachments] == [
        (AttachmentKind.DOCUMENT, "contract.pdf"), (AttachmentKind.IMAGE, "us.png")]
    assert fetched == [PHOTO_BYTES, PDF_BYTES, PHOTO_BYTES]


async def test_a_file_over_the_limit_is_refused_without_a_download(
        discord_api: FakeDiscord, dm: int, journal: InboundJournal) -> None:
    inbox = Inbox()
    async with running(_channel(journal), inbox) as channel:
        discord_api.push_message(dm, ALICE, "", attachments=[
            discord_api.attachment(dm, "contract.pdf", "application/pdf", PDF_BYTES)])
        (message,) = await inbox.wait_for(1)
        with pytest.raises(AttachmentError) as refused:
            await channel.fetch_attachment(message.attachments[0], len(PDF_BYTES) - 1)
        fits = await channel.fetch_attachment(message.attachments[0], len(PDF_BYTES))

    assert refused.value.too_large
    assert fits == PDF_BYTES
    assert len(discord_api.downloads) == 1  # only the fetch that fit went out


@pytest.mark.parametrize("chunked", [False, True])
async def test_a_file_of_unknown_size_is_cut_off_while_it_downloads(
        discord_api: FakeDiscord, dm: int, journal: InboundJournal, chunked: bool) -> None:
    # Without a size (a message kept before sizes were, or a CDN that sends no Content-Length when chunked), the
    # limit holds while the body is read.
    inbox = Inbox()
    async with running(_channel(journal), inbox) as channel:
        discord_api.push_message(dm, ALICE, "", attachments=[
            discord_api.attachment(dm, "contract.pdf", "application/pdf", PDF_BYTES, chunked=chunked)])
        (message,) = await inbox.wait_for(1)
        unsized = Attachment(AttachmentKind.DOCUMENT, message.attachments[0].ref, "contract.pdf")
        with pytest.raises(AttachmentError) as refused:
            await channel.fetch_attachment(unsized, 1_000)
        whole = await channel.fetch_attachment(unsized, len(PDF_BYTES))

    assert refused.value.too_large
    assert whole == PDF_BYTES
    assert len(discord_api.downloads) == 2


@pytest.mark.parametrize("status", [500, 503])
async def test_a_failed_download_is_an_attachment_error_not_too_large(
        discord_api: FakeDiscord, dm: int, journal: InboundJournal, status: int) -> None:
    inbox = Inbox()
    async with running(_channel(journal), inbox) as channel:
        discord_api.push_message(dm, ALICE, "", attachments=[
            discord_api.attachment(dm, "IMG_2041.jpg", "image/jpeg", PHOTO_BYTES)])
        (message,) = await inbox.wait_for(1)
        discord_api.fail_downloads(status)
        with pytest.raises(AttachmentError) as failed:
            await channel.fetch_attachment(message.attachments[0], MAX_BYTES)
        again = await channel.fetch_attachment(message.attachments[0], MAX_BYTES)

    assert not failed.value.too_large and not failed.value.gone and str(status) in str(failed.value)
    assert again == PHOTO_BYTES  # a passing failure: tried again, it works


@pytest.mark.parametrize("status", [404, 403])
async def test_a_refused_download_of_a_deleted_message_is_gone_and_of_a_live_one_is_signed_again(
        discord_api: FakeDiscord, dm: int, journal: InboundJournal, status: int) -> None:
    inbox = Inbox()
    async with running(_channel(journal), inbox) as channel:
        kept = discord_api.push_message(dm, ALICE, "", attachments=[
            discord_api.attachment(dm, "IMG_2041.jpg", "image/jpeg", PHOTO_BYTES)])
        deleted = discord_api.push_message(dm, ALICE, "", attachments=[
            discord_api.attachment(dm, "IMG_2042.jpg", "image/jpeg", PHOTO_BYTES)])
        live, gone = await inbox.wait_for(2)
        del discord_api.messages[int(deleted["id"])]
        discord_api.fail_downloads(status)
        refreshed = await channel.fetch_attachment(live.attachments[0], MAX_BYTES)
        discord_api.fail_downloads(status)
        with pytest.raises(AttachmentError) as failed:
            await channel.fetch_attachment(gone.attachments[0], MAX_BYTES)

    assert refreshed == PHOTO_BYTES and int(kept["id"]) in discord_api.messages
    assert not failed.value.too_large and failed.value.gone and str(status) in str(failed.value)


async def test_a_voice_message_deleted_before_it_was_fetched_is_answered_honestly(
        discord_api: FakeDiscord, dm: int, journal: InboundJournal) -> None:
    from ground.config import MediaSettings
    from media.reader import MediaReader

    inbox = Inbox()
    async with running(_channel(journal), inbox) as channel:
        discord_api.push_message(dm, ALICE, "", attachments=[
            discord_api.attachment(dm, "voice-message.ogg", "audio/ogg", b"OggS voice", duration_s=2.0)])
        (message,) = await inbox.wait_for(1)
        discord_api.messages.clear()  # deleted: asked again, Discord no longer knows it
        discord_api.fail_downloads(404)
        reader = MediaReader(MediaSettings(transcription_model="openai/whisper-1"), None)  # type: ignore[arg-type]
        reading = await reader.read(message, channel)  # never transcribes: nothing was fetched

    assert reading.answer is not None and "couldn't get that voice message" in reading.answer


async def test_an_unreachable_cdn_is_an_attachment_error(discord_api: FakeDiscord, journal: InboundJournal) -> None:
    inbox = Inbox()
    async with running(_channel(journal), inbox) as channel:
        gone = Attachment(AttachmentKind.IMAGE, "http://127.0.0.1:9/attachments/1/2/x.jpg?hm=0", size=10)
        with pytest.raises(AttachmentError) as failed:
            await channel.fetch_attachment(gone, MAX_BYTES)

    assert not failed.value.too_large


async def test_fetching_before_the_channel_starts_is_an_attachment_error(journal: InboundJournal) -> None:
    with pytest.raises(AttachmentError) as failed:
        await _channel(journal).fetch_attachment(
            Attachment(AttachmentKind.IMAGE, "https://cdn.discordapp.com/attachments/1/2/x.jpg", size=10), MAX_BYTES)
    assert not failed.value.too_large


async def test_attachment_logs_carry_no_url_token_or_contents(
        discord_api: FakeDiscord, dm: int, journal: InboundJournal, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    inbox = Inbox()
    async with running(_channel(journal), inbox) as channel:
        discord_api.push_voice_message(dm, ALICE, b"secret words, spoken", duration_s=1.0)
        (message,) = await inbox.wait_for(1)
        voice = message.attachments[0]
        await channel.fetch_attachment(voice, MAX_BYTES)
        discord_api.fail_downloads(500)
        with pytest.raises(AttachmentError):
            await channel.fetch_attachment(voice, MAX_BYTES)

    kith = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("kith"))
    signature = voice.ref.partition("hm=")[2]
    assert "discord attachment fetched" in kith and "discord attachment not fetched" in kith
    for secret in (FAKE_DISCORD_TOKEN, signature, "secret words", voice.ref):
        assert secret not in kith
    assert FAKE_DISCORD_TOKEN not in caplog.text  # discord.py's own debug lines show the URL, never the token


def _kinds(message: InboundMessage) -> list[AttachmentKind]:
    return [a.kind for a in message.attachments]


async def test_a_server_message_with_a_file_carries_it_too(
        discord_api: FakeDiscord, dm: int, journal: InboundJournal) -> None:
    inbox = Inbox()
    async with running(_channel(journal), inbox):
        discord_api.push_message(GENERAL, ALICE, f"<@{discord_api.bot_id}> listen", mentions=[discord_api.bot_id],
                                 attachments=[discord_api.attachment(GENERAL, "song.mp3", "audio/mpeg", VOICE_BYTES)])
        (message,) = await inbox.wait_for(1)

    assert message.text.endswith("listen") and _kinds(message) == [AttachmentKind.VOICE]
    assert message.attachments[0].duration_s is None  # an audio file, not a voice message: no duration given
