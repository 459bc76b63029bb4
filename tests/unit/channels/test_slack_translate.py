"""Pure translation of Slack payloads to the core's types and back, on payloads shaped like Slack's own."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from channels.slack.channel import send_error_for
from channels.slack.formatting import MESSAGE_MAX_CHARS as SLACK_MAX_CHARS
from channels.slack.formatting import chunk_limit, text_chunks
from channels.slack.translate import (
    Skipped,
    SlackIdentity,
    attachments_of,
    button_blocks,
    escape_text,
    file_kind,
    identity_from_auth_test,
    readable_text,
    target_channel,
    thread_ts_for,
    translate_block_action,
    translate_event,
    user_display_name,
)
from ground.types import Attachment, AttachmentKind, Button, ButtonPress, ChatKind, InboundMessage, OutboundMessage
from tests.support.slack_payloads import ME, RECEIVED, block_action, dm_event, event_body


def _mention(**overrides: Any) -> dict[str, Any]:
    event = {"type": "app_mention", "user": "U061F7AUR", "text": "<@U0LAN0Z89> is it everything a river should be?",
             "ts": "1515449522.000016", "channel": "C0LAN2Q65", "event_ts": "1515449522.000016", "team": "T061EG9R6"}
    event.update(overrides)
    return event_body({k: v for k, v in event.items() if v is not None})


def test_a_dm_is_addressed_to_the_bot() -> None:
    message = translate_event(dm_event(), ME, received_at=RECEIVED)
    assert message == InboundMessage(
        platform="slack", bot_account="T061EG9R6:U0LAN0Z89", chat_id="D024BE91L", chat_kind=ChatKind.DM,
        sender_id="T061EG9R6:U2147483697", sender_name="U2147483697", text="Hello hello can you hear me?",
        message_id="D024BE91L:1355517523.000005", thread_id=None, mentioned=True,
        timestamp=datetime.fromtimestamp(1355517523.000005, UTC),
    )
    assert message.account == "slack:T061EG9R6:U2147483697"


def test_a_dm_thread_reply_stays_in_its_thread_and_names_come_from_the_profile() -> None:
    message = translate_event(dm_event(thread_ts="1355517500.000001", user_profile={"display_name": "", "real_name":
                                                                                 "Ada Lovelace", "name": "ada"}),
                              ME, received_at=RECEIVED)
    assert isinstance(message, InboundMessage)
    assert (message.thread_id, message.sender_name) == ("1355517500.000001", "Ada Lovelace")


def test_a_channel_mention_is_answered_in_a_thread() -> None:
    top = translate_event(_mention(), ME, received_at=RECEIVED)
    nested = translate_event(_mention(thread_ts="1515449000.000001"), ME, received_at=RECEIVED)
    assert isinstance(top, InboundMessage) and isinstance(nested, InboundMessage)
    assert (top.chat_kind, top.chat_id, top.mentioned, top.text) == (
        ChatKind.GROUP, "C0LAN2Q65", True, "@kith is it everything a river should be?")
    assert top.thread_id == "1515449522.000016"  # a new thread under the mention
    assert nested.thread_id == "1515449000.000001"
    assert top.conversation_key != nested.conversation_key


def test_a_person_from_another_workspace_keeps_their_own_team() -> None:
    message = translate_event(_mention(user_team="T0OTHER", team="T061EG9R6"), ME, received_at=RECEIVED)
    assert isinstance(message, InboundMessage) and message.sender_id == "T0OTHER:U061F7AUR"


def test_a_file_shared_with_a_comment_is_a_message() -> None:
    message = translate_event(dm_event(subtype="file_share", text="here is the photo", files=[{"id": "F1"}]), ME,
                              received_at=RECEIVED)
    assert isinstance(message, InboundMessage) and message.text == "here is the photo"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (dm_event(subtype="message_changed", user=None, message={"text": "edited"}), "edited"),
        (dm_event(subtype="message_deleted", user=None, deleted_ts="1355517523.000005"), "deleted"),
        (dm_event(subtype="bot_message", user=None, bot_id="B0OTHER"), "from_bot"),
        (dm_event(subtype="channel_join", text="<@U2147483697> has joined the channel"), "subtype"),
        (dm_event(bot_id="B0OTHER", app_id="A0OTHER"), "from_bot"),
        (dm_event(user="U0LAN0Z89", bot_id="B0LAN0Z90"), "self"),
        (dm_event(user="U0LAN0Z89"), "self"),
        (dm_event(user=None), "no_sender"),
        (dm_event(text="   "), "no_text"),
        (dm_event(ts=None), "malformed"),
        (dm_event(channel_type="channel", channel="C0LAN2Q65"), "not_addressed"),
        (dm_event(channel_type="mpim", channel="G0LAN2Q65"), "not_addressed"),
        (_mention(channel="D024BE91L"), "dm_mention"),
        (event_body({"type": "reaction_added", "user": "U1", "reaction": "thumbsup"}), "unsupported_event"),
        ({"type": "event_callback"}, "malformed"),
    ],
)
def test_what_never_reaches_the_core(body: dict[str, Any], reason: str) -> None:
    skipped = translate_event(body, ME, received_at=RECEIVED)
    assert isinstance(skipped, Skipped) and skipped.reason == reason


@pytest.mark.parametrize(
    ("wire", "readable"),
    [
        ("<@U0LAN0Z89> hi", "@kith hi"),
        ("ask <@U061F7AUR|ada> or <@U0OTHER>", "ask @ada or @U0OTHER"),
        ("see <#C0LAN2Q65|general> and <#C0NONAME>", "see #general and #C0NONAME"),
        ("<!here> <!channel> <!subteam^S0123|@oncall> <!date^1392734382^{date}|Feb 18, 2014>",
         "@here @channel @oncall Feb 18, 2014"),
        ("<https://example.com/a?b=1&amp;c=2|the docs> and <https://example.com>",
         "the docs (https://example.com/a?b=1&c=2) and https://example.com"),
        ("<mailto:ada@example.com|ada@example.com>", "ada@example.com"),
        ("2 &lt; 3 &amp;&amp; 4 &gt; 1, literally &amp;lt;", "2 < 3 && 4 > 1, literally &lt;"),
    ],
)
def test_readable_text(wire: str, readable: str) -> None:
    assert readable_text(wire, ME) == readable


def test_a_button_click_is_a_button_press() -> None:
    assert translate_block_action(block_action()) == ButtonPress(
        platform="slack", chat_id="C0LAN2Q65", sender_id="T061EG9R6:U061F7AUR", data="m:keep:7",
        chat_kind=ChatKind.GROUP, event_id="1548426417.840180")
    in_dm = translate_block_action(block_action(channel={"id": "D024BE91L", "name": "directmessage"}))
    assert isinstance(in_dm, ButtonPress) and in_dm.chat_kind is ChatKind.DM


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"channel": None, "container": {"type": "view", "view_id": "V1"}}, "no_channel"),
        ({"actions": [{"action_id": "pick", "type": "static_select", "action_ts": "1"}]}, "not_a_button"),
        ({"actions": []}, "no_action"),
        ({"user": {}}, "no_sender"),
        ({"type": "view_submission"}, "unsupported_interaction"),
    ],
)
def test_clicks_that_are_not_ours(overrides: dict[str, Any], reason: str) -> None:
    skipped = translate_block_action(block_action(**overrides))
    assert isinstance(skipped, Skipped) and skipped.reason == reason


def test_button_blocks_follow_block_kit_limits() -> None:
    buttons = [Button("Keep", "same"), Button("Also keep", "same"), Button("A" * 100, "x" * 300)]
    buttons += [Button(f"Option {i}", f"opt:{i}") for i in range(30)]
    section, *actions = button_blocks("*Choose*", buttons)

    assert section == {"type": "section", "text": {"type": "mrkdwn", "text": "*Choose*"}}
    assert [len(block["elements"]) for block in actions] == [25, 8]
    elements = [e for block in actions for e in block["elements"]]
    ids = [e["action_id"] for e in elements]
    assert len(set(ids)) == len(ids) and all(len(i) <= 255 for i in ids)
    assert [e["value"] for e in elements[:3]] == ["same", "same", "x" * 300]  # the data always rides in value
    assert ids[:3] == ["same", "kith_button_1", "kith_button_2"]
    assert len(elements[2]["text"]["text"]) == 75 and elements[2]["text"]["text"].endswith("…")


def test_where_a_reply_goes() -> None:
    dm_by_person = OutboundMessage(platform="slack", chat_id="", text="hi", recipient_id="T061EG9R6:U061F7AUR")
    in_thread = OutboundMessage(platform="slack", chat_id="C0LAN2Q65", text="hi", thread_id="1.2",
                                chat_kind=ChatKind.GROUP)
    answering = OutboundMessage(platform="slack", chat_id="C0LAN2Q65", text="hi", chat_kind=ChatKind.GROUP,
                                reply_to_message_id="C0LAN2Q65:1515449522.000016")
    dm = OutboundMessage(platform="slack", chat_id="D024BE91L", text="hi")

    assert target_channel(dm_by_person) == "U061F7AUR" and target_channel(dm) == "D024BE91L"
    assert [thread_ts_for(m) for m in (in_thread, answering, dm)] == ["1.2", "1515449522.000016", None]


def test_plain_text_is_made_literal() -> None:
    assert escape_text("a <b> & <@U1>") == "a &lt;b&gt; &amp; &lt;@U1&gt;"


def test_identity_and_names() -> None:
    assert identity_from_auth_test({"ok": True, "user": "kith", "team_id": "T1", "user_id": "U1", "bot_id": "B1"}) \
        == SlackIdentity(team_id="T1", user_id="U1", bot_id="B1", name="kith")
    with pytest.raises(ValueError):
        identity_from_auth_test({"ok": True, "team_id": "T1"})
    assert user_display_name({"name": "ada", "real_name": "Ada L", "profile": {"display_name": ""}}) == "Ada L"
    assert user_display_name({"name": "ada", "profile": {"display_name": " Countess "}}) == "Countess"


def test_buttons_shrink_chunks_to_a_section() -> None:
    text = "\n\n".join(f"Paragraph {i}: " + "word " * 60 for i in range(30))
    with_buttons = OutboundMessage(platform="slack", chat_id="C1", text=text, buttons=(Button("Yes", "y"),))
    without = OutboundMessage(platform="slack", chat_id="C1", text=text)

    assert chunk_limit(without) == SLACK_MAX_CHARS and chunk_limit(with_buttons) == 3_000
    assert all(len(c.text) <= 3_000 and len(c.plain) <= 3_000 for c in text_chunks(with_buttons))
    assert max(len(c.text) for c in text_chunks(without)) > 3_000


def test_a_network_failure_is_worth_another_try() -> None:
    error = send_error_for(TimeoutError())
    assert (error.retry_after, error.permanent, error.bad_formatting) == (None, False, False)


@pytest.mark.parametrize(("mime", "clip", "kind"), [
    ("audio/webm", "", AttachmentKind.VOICE),
    ("video/mp4", "slack_audio", AttachmentKind.VOICE),  # a clip recorded as audio, whatever its container
    ("audio/mpeg", "", AttachmentKind.VOICE),
    ("image/png", "", AttachmentKind.IMAGE),
    ("video/mp4", "slack_video", AttachmentKind.DOCUMENT),
    ("application/pdf", "", AttachmentKind.DOCUMENT),
    ("", "", AttachmentKind.DOCUMENT),
])
def test_slack_file_kinds(mime: str, clip: str, kind: AttachmentKind) -> None:
    assert file_kind(mime, clip=clip) is kind


def test_slack_files_become_attachments_and_those_without_a_private_url_are_left_out() -> None:
    base = "https://files.slack.com/files-pri/T061EG9R6-F0"
    event = {"files": [
        {"id": "F01", "name": "clip.webm", "mimetype": "audio/webm", "subtype": "slack_audio", "size": 9000,
         "duration_ms": 2500, "url_private": f"{base}1/clip.webm",
         "url_private_download": f"{base}1/download/clip.webm"},
        {"id": "F02", "mode": "hidden_by_limit"},  # past the free plan's history: no URL
        {"id": "F03", "name": "notes.txt", "mimetype": "text/plain", "size": True, "url_private": f"{base}3/notes.txt"},
        "not a file",
    ]}
    assert attachments_of(event) == (
        Attachment(AttachmentKind.VOICE, f"{base}1/download/clip.webm", "clip.webm", "audio/webm", 9000, 2.5),
        Attachment(AttachmentKind.DOCUMENT, f"{base}3/notes.txt", "notes.txt", "text/plain", None, None),
    )
    assert attachments_of({"files": "nonsense"}) == () and attachments_of({}) == ()
