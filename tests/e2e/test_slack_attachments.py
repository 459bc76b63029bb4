"""Files a Slack message shares: taken in as attachments, fetched from their private URLs with the bot token, against
the loopback fake Slack (which serves the files it hands out on its own address, to the bot token only)."""

# Test functions receive the imported ``slack_api`` fixture by argument name, which ruff reads
# as redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import logging
from typing import Any

import pytest

from channels.slack.channel import SlackChannel, api_url_of
from channels.slack.files import files_origin, origin_of
from channels.slack.settings import SlackSettings
from delivery.inbound import InboundJournal
from ground.types import Attachment, AttachmentError, AttachmentKind, AttachmentSource, InboundMessage
from tests.fakes.slack_api import FAKE_APP_TOKEN, FAKE_BOT_TOKEN, FakeSlack, slack_api  # noqa: F401
from tests.support.channels import Inbox, running

ALICE = "U0ALICE"
CLIP_BYTES = b"\x1aE\xdf\xa3webm" + bytes(range(256)) * 40
PHOTO_BYTES = b"\x89PNG\r\n\x1a\n" + b"IDAT" * 3000
PDF_BYTES = b"%PDF-1.7\n" + b"0123456789" * 500 + b"\n%%EOF"
MAX_BYTES = 1_000_000


@pytest.fixture
def api(slack_api: FakeSlack) -> FakeSlack:
    slack_api.add_user(ALICE, "alice", real_name="Alice Liddell")
    return slack_api


def _channel(api: FakeSlack, journal: InboundJournal, **kwargs: Any) -> SlackChannel:
    return SlackChannel(SlackSettings(api_url=api.api_url), FAKE_BOT_TOKEN, journal=journal, app_token=FAKE_APP_TOKEN,
                        ping_interval_s=0.2, connect_wait_s=5.0, stop_grace_s=1.0, **kwargs)


async def _shared(api: FakeSlack, channel: SlackChannel, inbox: Inbox, text: str, *files: dict[str, Any],
                  n: int = 1) -> InboundMessage:
    api.push(api.dm_event(ALICE, text, files=list(files)))
    return (await inbox.wait_for(n))[-1]


async def test_a_voice_clip_is_unreadable_as_before_and_carries_its_recording(
        api: FakeSlack, journal: InboundJournal) -> None:
    inbox = Inbox()
    async with running(_channel(api, journal), inbox) as channel:
        message = await _shared(api, channel, inbox, "", api.file_payload(
            ALICE, "audio_message.webm", "audio/webm", subtype="slack_audio", content=CLIP_BYTES, duration_ms=4250))
        (clip,) = message.attachments
        fetched = await channel.fetch_attachment(clip, MAX_BYTES)

    assert isinstance(channel, AttachmentSource)
    assert (message.text, message.unreadable) == ("", "voice message")
    assert (clip.kind, clip.name, clip.mime, clip.size, clip.duration_s) == (
        AttachmentKind.VOICE, "audio_message.webm", "audio/webm", len(CLIP_BYTES), 4.25)
    assert clip.ref.startswith(f"{api.url}/files-pri/") and "/download/" in clip.ref  # url_private_download
    assert fetched == CLIP_BYTES
    (download,) = api.file_downloads
    assert (download.token, download.served) == (FAKE_BOT_TOKEN, True)


async def test_an_image_and_a_document_arrive_as_attachments_and_fetch_exactly(
        api: FakeSlack, journal: InboundJournal) -> None:
    inbox = Inbox()
    async with running(_channel(api, journal), inbox) as channel:
        photo_message = await _shared(api, channel, inbox, "", api.file_payload(
            ALICE, "IMG_2041.png", "image/png", content=PHOTO_BYTES))
        text_message = await _shared(
            api, channel, inbox, "the contract, and our photo",
            api.file_payload(ALICE, "contract.pdf", "application/pdf", content=PDF_BYTES),
            api.file_payload(ALICE, "us.png", "image/png", content=PHOTO_BYTES), n=2)
        fetched = [await channel.fetch_attachment(a, MAX_BYTES)
                   for a in (*photo_message.attachments, *text_message.attachments)]

    assert (photo_message.text, photo_message.unreadable) == ("", "image")
    assert [(a.kind, a.name, a.mime, a.size, a.duration_s) for a in photo_message.attachments] == [
        (AttachmentKind.IMAGE, "IMG_2041.png", "image/png", len(PHOTO_BYTES), None)]
    # A message with words keeps them, and its files too, in Slack's order.
    assert (text_message.text, text_message.unreadable) == ("the contract, and our photo", "")
    assert [(a.kind, a.name) for a in text_message.attachments] == [
        (AttachmentKind.DOCUMENT, "contract.pdf"), (AttachmentKind.IMAGE, "us.png")]
    assert fetched == [PHOTO_BYTES, PDF_BYTES, PHOTO_BYTES]


async def test_a_file_over_the_limit_is_refused_without_a_download(api: FakeSlack, journal: InboundJournal) -> None:
    inbox = Inbox()
    async with running(_channel(api, journal), inbox) as channel:
        message = await _shared(api, channel, inbox, "", api.file_payload(
            ALICE, "contract.pdf", "application/pdf", content=PDF_BYTES))
        with pytest.raises(AttachmentError) as refused:
            await channel.fetch_attachment(message.attachments[0], len(PDF_BYTES) - 1)
        fits = await channel.fetch_attachment(message.attachments[0], len(PDF_BYTES))

    assert refused.value.too_large
    assert fits == PDF_BYTES
    assert len(api.file_downloads) == 1  # only the fetch that fit went out


@pytest.mark.parametrize("chunked", [False, True])
async def test_a_file_of_unknown_size_is_refused_while_it_downloads(api: FakeSlack, journal: InboundJournal,
                                                                    chunked: bool) -> None:
    inbox = Inbox()
    async with running(_channel(api, journal), inbox) as channel:
        message = await _shared(api, channel, inbox, "", api.file_payload(
            ALICE, "contract.pdf", "application/pdf", content=PDF_BYTES, chunked=chunked))
        unsized = Attachment(AttachmentKind.DOCUMENT, message.attachments[0].ref, "contract.pdf")
        with pytest.raises(AttachmentError) as refused:
            await channel.fetch_attachment(unsized, 1_000)
        whole = await channel.fetch_attachment(unsized, len(PDF_BYTES))

    assert refused.value.too_large
    assert whole == PDF_BYTES
    assert len(api.file_downloads) == 2


@pytest.mark.parametrize("status", [500, 503, 404, 403])
async def test_a_failed_download_is_an_attachment_error_not_too_large(
        api: FakeSlack, journal: InboundJournal, status: int) -> None:
    inbox = Inbox()
    async with running(_channel(api, journal), inbox) as channel:
        message = await _shared(api, channel, inbox, "", api.file_payload(
            ALICE, "IMG_2041.png", "image/png", content=PHOTO_BYTES))
        api.fail_downloads(status)
        with pytest.raises(AttachmentError) as failed:
            await channel.fetch_attachment(message.attachments[0], MAX_BYTES)
        again = await channel.fetch_attachment(message.attachments[0], MAX_BYTES)

    assert not failed.value.too_large and str(status) in str(failed.value)
    assert failed.value.gone is (status in (401, 403, 404, 410))  # not there, or not ours: no retry
    assert again == PHOTO_BYTES


async def test_slacks_login_page_is_a_failure_not_the_file(api: FakeSlack, journal: InboundJournal) -> None:
    inbox = Inbox()
    async with running(_channel(api, journal), inbox) as channel:
        message = await _shared(api, channel, inbox, "", api.file_payload(
            ALICE, "IMG_2041.png", "image/png", content=PHOTO_BYTES))
        api.bot_token = "xoxb-another-token"  # ours is refused now (revoked, or without files:read)
        with pytest.raises(AttachmentError) as failed:
            await channel.fetch_attachment(message.attachments[0], MAX_BYTES)

    assert not failed.value.too_large and "login page" in str(failed.value)
    (download,) = api.file_downloads
    assert (download.status, download.served) == (200, False)


@pytest.mark.parametrize("host", ["localhost", "files.slack.com.evil.example"])
async def test_a_file_on_another_host_is_refused_before_any_request(
        api: FakeSlack, journal: InboundJournal, host: str) -> None:
    inbox = Inbox()
    async with running(_channel(api, journal), inbox) as channel:
        message = await _shared(api, channel, inbox, "", api.file_payload(
            ALICE, "IMG_2041.png", "image/png", content=PHOTO_BYTES))
        real = message.attachments[0]
        # "localhost" reaches the very same fake under another name: a request would show up in its downloads.
        elsewhere = Attachment(real.kind, real.ref.replace("127.0.0.1", host), real.name, real.mime, real.size)
        with pytest.raises(AttachmentError) as refused:
            await channel.fetch_attachment(elsewhere, MAX_BYTES)

    assert not refused.value.too_large
    assert api.file_downloads == []


async def test_a_redirect_on_the_file_host_keeps_the_token_and_one_elsewhere_is_refused(
        api: FakeSlack, journal: InboundJournal) -> None:
    inbox = Inbox()
    async with running(_channel(api, journal), inbox) as channel:
        message = await _shared(api, channel, inbox, "", api.file_payload(
            ALICE, "IMG_2041.png", "image/png", content=PHOTO_BYTES))
        real = message.attachments[0]
        api.redirect_next_download(real.ref.replace("/download/", "/"))  # same host: files.slack.com's own hop
        followed = await channel.fetch_attachment(real, MAX_BYTES)
        api.redirect_next_download(real.ref.replace("127.0.0.1", "localhost"))  # plain http to another host
        with pytest.raises(AttachmentError):
            await channel.fetch_attachment(real, MAX_BYTES)

    assert followed == PHOTO_BYTES
    assert [(d.token, d.status) for d in api.file_downloads] == [
        (FAKE_BOT_TOKEN, 302), (FAKE_BOT_TOKEN, 200), (FAKE_BOT_TOKEN, 302)]  # nothing reached "localhost"


async def test_the_bot_token_never_reaches_the_logs(api: FakeSlack, journal: InboundJournal,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    inbox = Inbox()
    async with running(_channel(api, journal), inbox) as channel:
        message = await _shared(api, channel, inbox, "", api.file_payload(
            ALICE, "audio_message.webm", "audio/webm", subtype="slack_audio", content=b"secret words, spoken"))
        clip = message.attachments[0]
        await channel.fetch_attachment(clip, MAX_BYTES)
        api.fail_downloads(500)
        with pytest.raises(AttachmentError):
            await channel.fetch_attachment(clip, MAX_BYTES)
        with pytest.raises(AttachmentError):
            await channel.fetch_attachment(Attachment(clip.kind, "https://evil.example/x.webm"), MAX_BYTES)

    kith = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("kith"))
    assert "slack attachment fetched" in kith and "slack attachment not fetched" in kith
    assert clip.ref not in kith and "evil.example" not in kith and "secret words" not in caplog.text
    assert FAKE_BOT_TOKEN not in caplog.text


async def test_fetching_before_the_channel_starts_is_an_attachment_error(
        api: FakeSlack, journal: InboundJournal) -> None:
    with pytest.raises(AttachmentError) as failed:
        await _channel(api, journal).fetch_attachment(
            Attachment(AttachmentKind.IMAGE, f"{api.url}/files-pri/T-F1/x.png", size=10), MAX_BYTES)
    assert not failed.value.too_large
    assert api.file_downloads == []


@pytest.mark.parametrize(("api_url", "files"), [
    ("", "https://files.slack.com:443"),
    ("https://slack.com/api/", "https://files.slack.com:443"),
    ("https://slack-gov.com/api/", "https://files.slack-gov.com:443"),
    ("http://127.0.0.1:8123/api/", "http://127.0.0.1:8123"),
    ("http://localhost:8123/api/", "http://localhost:8123"),
])
def test_the_files_host_follows_the_configured_api(api_url: str, files: str) -> None:
    assert files_origin(api_url_of(SlackSettings(api_url=api_url))) == origin_of(files)
