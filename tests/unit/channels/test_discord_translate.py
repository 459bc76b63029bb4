"""Pure Discord translation: discord.py objects built from real gateway payloads, in and out of the core's types."""

from __future__ import annotations

from dataclasses import dataclass, field

import discord
import pytest
from multidict import CIMultiDict

from channels.discord.translate import (
    Place,
    Skipped,
    allowed_mentions,
    attachment_kind,
    button_view,
    gateway_intents,
    message_ref,
    place_of,
    reply_reference,
    retry_after_of,
    send_error_for,
    snowflake,
    start_failure,
    translate_interaction,
    translate_message,
)
from ground.types import AttachmentKind, Button, ButtonPress, ChatKind, InboundMessage
from tests.fakes.discord_api import attachment_payload
from tests.support.discord_payloads import ALICE, BOB, DM, GENERAL, GUILD, OTHER_BOT, THREAD, Payloads


@pytest.fixture
def p() -> Payloads:
    return Payloads()


def _where(p: Payloads, message: discord.Message) -> Place:
    place = place_of(message.channel, message.guild.id if message.guild else None)
    assert place is not None
    return place


# --- places ---------------------------------------------------------------------------------------------
def test_places_of_dm_channel_and_thread(p: Payloads) -> None:
    assert place_of(p.dm, None) == Place(ChatKind.DM, DM)
    assert place_of(p.guild.get_channel(GENERAL), GUILD) == Place(ChatKind.GROUP, GENERAL)
    thread = place_of(p.guild.get_thread(THREAD), GUILD)
    assert thread == Place(ChatKind.GROUP, GENERAL, THREAD) and thread.channel_id == THREAD
    # What discord.py makes of a channel it has not cached:
    assert place_of(discord.PartialMessageable(state=p.state, id=DM), None) == Place(ChatKind.DM, DM)
    unknown = discord.PartialMessageable(state=p.state, id=THREAD, guild_id=GUILD)
    assert place_of(unknown, GUILD) is None  # maybe a thread: its parent must be looked up
    text = discord.PartialMessageable(state=p.state, id=GENERAL, guild_id=GUILD, type=discord.ChannelType.text)
    assert place_of(text, GUILD) == Place(ChatKind.GROUP, GENERAL)


# --- messages ---------------------------------------------------------------------------------------------
def test_dm_message_has_every_field(p: Payloads) -> None:
    message = p.message(DM, ALICE, "hello there")
    assert translate_message(message, p.me, _where(p, message)) == InboundMessage(
        platform="discord", bot_account=str(p.fake.bot_id), chat_id=str(DM), chat_kind=ChatKind.DM,
        sender_id=str(ALICE), sender_name="Alice", text="hello there", message_id=f"{DM}:{message.id}",
        thread_id=None, mentioned=True, timestamp=message.created_at, reply_to_message_id=None,
    )


def test_server_text_reads_as_a_person_sees_it(p: Payloads) -> None:
    bot = p.fake.bot_id
    message = p.message(GENERAL, ALICE, f"<@{bot}> see <#{GENERAL}> and tell @everyone", mentions=[bot],
                        mention_everyone=True)
    translated = translate_message(message, p.me, _where(p, message))
    assert isinstance(translated, InboundMessage)
    assert translated.text == "@Kith see #general and tell @everyone"  # no zero-width space left in memory
    assert (translated.sender_name, translated.mentioned) == ("Ally", True)


@pytest.mark.parametrize(
    ("build", "mentioned"),
    [
        (lambda p: p.message(GENERAL, BOB, "plain"), False),
        (lambda p: p.message(GENERAL, BOB, f"hi <@{p.fake.bot_id}>", mentions=[p.fake.bot_id]), True),
        (lambda p: p.message(GENERAL, BOB, f"hi <@{ALICE}>", mentions=[ALICE]), False),
        (lambda p: p.message(GENERAL, BOB, "role", role_mentions=[p.fake.role_of_bot(GUILD)]), True),
        (lambda p: p.message(GENERAL, BOB, "all", mention_everyone=True), False),
    ],
)
def test_mentions(p: Payloads, build: object, mentioned: bool) -> None:
    message = build(p)  # type: ignore[operator]
    translated = translate_message(message, p.me, _where(p, message))
    assert isinstance(translated, InboundMessage) and translated.mentioned is mentioned


def test_replies_to_the_bot_count_as_addressed(p: Payloads) -> None:
    ours = p.message(THREAD, p.fake.bot_id, "I said this")
    theirs = p.message(THREAD, ALICE, "Alice said this")
    to_us = p.message(THREAD, BOB, "yes!", reply_to=ours.id)
    to_alice = p.message(THREAD, BOB, "no", reply_to=theirs.id)
    to_deleted = p.message(THREAD, BOB, "what?", reply_to=ours.id)
    to_deleted.reference.resolved = discord.DeletedReferencedMessage(to_deleted.reference)  # type: ignore[union-attr]

    results = [translate_message(m, p.me, _where(p, m)) for m in (to_us, to_alice, to_deleted)]
    assert all(isinstance(r, InboundMessage) for r in results)
    assert [r.mentioned for r in results] == [True, False, False]  # type: ignore[union-attr]
    assert [r.reply_to_message_id for r in results] == [  # type: ignore[union-attr]
        f"{THREAD}:{ours.id}", f"{THREAD}:{theirs.id}", f"{THREAD}:{ours.id}"]
    assert {(r.chat_id, r.thread_id) for r in results} == {(str(GENERAL), str(THREAD))}  # type: ignore[union-attr]


def test_a_forward_is_not_a_reply(p: Payloads) -> None:
    ours = p.message(GENERAL, p.fake.bot_id, "I said this")
    payload = p.fake.message_payload(GENERAL, ALICE, "fwd note")
    payload["message_reference"] = {"type": 1, "message_id": str(ours.id), "channel_id": str(GENERAL)}
    forward = discord.Message(state=p.state, channel=p.channel(GENERAL), data=payload)  # type: ignore[arg-type]
    translated = translate_message(forward, p.me, _where(p, forward))
    assert isinstance(translated, InboundMessage)
    assert (translated.mentioned, translated.reply_to_message_id) == (False, None)


@pytest.mark.parametrize(
    ("author", "content", "kwargs", "reason"),
    [
        ("bot", "my own words", {}, "own"),
        (OTHER_BOT, "beep", {}, "from_bot"),
        (ALICE, "via hook", {"webhook_id": 400_000_000_000_000_001}, "webhook"),
        (ALICE, "pinned a message", {"message_type": 6}, "service"),
        (ALICE, "   ", {}, "no_text"),
    ],
)
def test_what_is_skipped(p: Payloads, author: int | str, content: str, kwargs: dict[str, object],
                         reason: str) -> None:
    author_id = p.fake.bot_id if author == "bot" else author
    message = p.message(GENERAL, author_id, content, **kwargs)  # type: ignore[arg-type]
    assert translate_message(message, p.me, _where(p, message)) == Skipped(reason, str(GENERAL))


# --- interactions ---------------------------------------------------------------------------------------
def test_button_clicks(p: Payloads) -> None:
    question = p.message(THREAD, p.fake.bot_id, "Keep it?")
    place = _where(p, question)
    assert translate_interaction(p.click(question, ALICE, "m:keep"), p.me, place) == ButtonPress(
        platform="discord", chat_id=str(GENERAL), sender_id=str(ALICE), data="m:keep", chat_kind=ChatKind.GROUP)
    assert translate_interaction(p.click(question, ALICE, "pick", component_type=3), p.me, place) == Skipped(
        "not_button", str(GENERAL))
    assert translate_interaction(p.click(question, OTHER_BOT, "m:keep"), p.me, place) == Skipped(
        "from_bot", str(GENERAL))
    dm_question = p.message(DM, p.fake.bot_id, "Sure?")
    press = translate_interaction(p.click(dm_question, ALICE, "yes"), p.me, _where(p, dm_question))
    assert press == ButtonPress(platform="discord", chat_id=str(DM), sender_id=str(ALICE), data="yes")


# --- outbound -----------------------------------------------------------------------------------------
def test_ids_and_reply_references() -> None:
    assert snowflake("123") == 123
    assert [snowflake(v) for v in (None, "", "abc", "0", "-5")] == [None] * 5
    assert message_ref(f"{GENERAL}:42") == (GENERAL, 42)
    assert message_ref("42") == (None, 42)
    assert [message_ref(v) for v in (None, "x:y", f"{GENERAL}:")] == [None, None, None]
    ref = reply_reference(f"{THREAD}:42", GENERAL)
    assert ref is not None
    assert (ref.channel_id, ref.message_id, ref.fail_if_not_exists) == (THREAD, 42, False)
    bare = reply_reference("42", GENERAL)
    assert bare is not None and bare.channel_id == GENERAL
    assert reply_reference(None, GENERAL) is None


async def test_button_view_respects_discords_limits() -> None:
    buttons = [Button("x" * 100, "long-label"), Button("Bad", "y" * 101), Button("Ok", "ok")]
    buttons += [Button(f"b{i}", f"id{i}") for i in range(30)]
    view = button_view(buttons)
    rows = view.to_components()
    items = [item for row in rows for item in row["components"]]
    assert len(rows) == 5 and all(len(row["components"]) <= 5 for row in rows)
    assert len(items) == 24  # 25 kept, one of them dropped for its oversized custom_id
    assert [len(i["label"]) for i in items[:2]] == [80, 2]
    assert "y" * 101 not in [i["custom_id"] for i in items]
    assert view.is_finished()  # discord.py keeps no dispatch state for it; clicks come by custom_id


def test_gateway_intents_and_mentions() -> None:
    intents = gateway_intents()
    assert intents.message_content and intents.guild_messages and intents.dm_messages and intents.guilds
    assert not intents.members and not intents.presences  # the other privileged intents stay off
    assert allowed_mentions().to_dict() == {"parse": [], "replied_user": True}


# --- failures -------------------------------------------------------------------------------------------
@dataclass
class _Answer:
    """What discord.HTTPException reads from an aiohttp response."""

    status: int
    reason: str = "x"
    headers: CIMultiDict[str] = field(default_factory=CIMultiDict)


def _http_error(cls: type[discord.HTTPException], status: int, code: int = 0,
                headers: dict[str, str] | None = None) -> discord.HTTPException:
    return cls(_Answer(status, headers=CIMultiDict(headers or {})), {"message": "m", "code": code})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (discord.RateLimited(42.5), (42.5, False)),
        (_http_error(discord.HTTPException, 429, headers={"Retry-After": "7"}), (7.0, False)),
        (_http_error(discord.HTTPException, 429, headers={"X-RateLimit-Reset-After": "2.5"}), (2.5, False)),
        (_http_error(discord.HTTPException, 429), (5.0, False)),
        (_http_error(discord.Forbidden, 403, 50007), (None, True)),
        (_http_error(discord.NotFound, 404, 10003), (None, True)),
        (_http_error(discord.HTTPException, 400, 50035), (None, True)),
        (_http_error(discord.DiscordServerError, 503), (None, False)),
        (ConnectionResetError(), (None, False)),
        (TimeoutError(), (None, False)),
    ],
)
def test_send_errors(exc: BaseException, expected: tuple[float | None, bool]) -> None:
    error = send_error_for(exc)
    assert (error.retry_after, error.permanent, error.bad_formatting) == (*expected, False)


def test_retry_after_ignores_nonsense() -> None:
    assert retry_after_of(_Answer(429, headers=CIMultiDict({"Retry-After": "soon"}))) == 5.0
    assert retry_after_of(None) == 5.0


def test_start_failures_are_one_line_and_name_the_fix() -> None:
    env = "DISCORD_BOT_TOKEN"
    assert start_failure(discord.LoginFailure("Improper token has been passed."), env) == (
        "discord: the token in DISCORD_BOT_TOKEN was rejected")
    assert "Message Content intent" in start_failure(discord.PrivilegedIntentsRequired(None), env)
    closed = discord.ConnectionClosed(None, shard_id=None, code=4004)  # type: ignore[arg-type]
    assert start_failure(closed, env) == "discord: the gateway rejected the token in DISCORD_BOT_TOKEN"
    assert start_failure(ConnectionRefusedError(111, "refused"), env) == (
        "discord: cannot reach Discord (ConnectionRefusedError)")
    assert start_failure(_http_error(discord.DiscordServerError, 502), env) == (
        "discord: the API answered HTTP 502 at login")
    try:  # discord.py failing inside its own reconnect path, while handling the refused connection
        try:
            raise ConnectionRefusedError(111, "refused")
        except ConnectionRefusedError:
            raise AttributeError("'NoneType' object has no attribute 'sequence'")  # noqa: B904 (as discord.py does)
    except AttributeError as crash:
        assert start_failure(crash, env) == "discord: cannot reach Discord (ConnectionRefusedError)"
        crash.__suppress_context__ = True  # as `raise ... from None` would: the raiser calls it beside the point
        assert start_failure(crash, env) == "discord: could not connect (AttributeError)"
    assert start_failure(KeyError("x"), env) == "discord: could not connect (KeyError)"


@pytest.mark.parametrize(("mime", "voice", "kind"), [
    ("audio/ogg", False, AttachmentKind.VOICE),
    ("audio/mpeg", False, AttachmentKind.VOICE),
    ("", True, AttachmentKind.VOICE),  # a voice message whatever its type says
    ("image/png", False, AttachmentKind.IMAGE),
    ("IMAGE/JPEG", False, AttachmentKind.IMAGE),
    ("video/mp4", False, AttachmentKind.DOCUMENT),
    ("application/pdf", False, AttachmentKind.DOCUMENT),
    ("", False, AttachmentKind.DOCUMENT),
])
def test_attachment_kinds(mime: str, voice: bool, kind: AttachmentKind) -> None:
    assert attachment_kind(mime, voice=voice) is kind


def test_a_discord_file_without_a_type_is_a_document_and_text_stays(p: Payloads) -> None:
    item = attachment_payload(p.fake.snowflake(), "notes", "", size=12, channel_id=DM)
    del item["content_type"]
    message = p.message(DM, ALICE, "see attached", attachments=[item])
    translated = translate_message(message, p.me, Place(ChatKind.DM, DM))
    assert isinstance(translated, InboundMessage)
    (attachment,) = translated.attachments
    assert (translated.text, attachment.kind, attachment.mime, attachment.size, attachment.ref) == (
        "see attached", AttachmentKind.DOCUMENT, "", 12, item["url"])
