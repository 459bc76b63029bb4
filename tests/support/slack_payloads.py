"""Slack's payloads as the Events API and interactivity send them, for tests of the translation to the core's types."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from channels.slack.translate import SlackIdentity

ME = SlackIdentity(team_id="T061EG9R6", user_id="U0LAN0Z89", bot_id="B0LAN0Z90", name="kith")
RECEIVED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def event_body(event: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The Events API envelope around ``event``."""
    return {"token": "XXYYZZ", "team_id": "T061EG9R6", "api_app_id": "A0MDYCDME", "event": event,
            "type": "event_callback", "event_id": "Ev0MDYHUEL", "event_time": 1515449522, **extra}


def dm_event(**overrides: Any) -> dict[str, Any]:
    """A direct message to kith, as the Events API delivers it; an override of ``None`` leaves the key out."""
    event = {"type": "message", "channel": "D024BE91L", "user": "U2147483697", "text": "Hello hello can you hear me?",
             "ts": "1355517523.000005", "event_ts": "1355517523.000005", "channel_type": "im", "team": "T061EG9R6"}
    event.update(overrides)
    return event_body({k: v for k, v in event.items() if v is not None})


def block_action(**overrides: Any) -> dict[str, Any]:
    """A click on one of kith's buttons, as Slack sends it."""
    payload = {
        "type": "block_actions", "user": {"id": "U061F7AUR", "username": "ada", "team_id": "T061EG9R6"},
        "api_app_id": "A0MDYCDME", "container": {"type": "message", "message_ts": "1548426417.840180",
                                                 "channel_id": "C0LAN2Q65", "is_ephemeral": False},
        "trigger_id": "12321423423.333649436676.d8c1bb837935619ccad0f624c448ffb3",
        "team": {"id": "T061EG9R6", "domain": "kith"}, "channel": {"id": "C0LAN2Q65", "name": "general"},
        "actions": [{"action_id": "m:keep:7", "block_id": "b1", "text": {"type": "plain_text", "text": "Keep"},
                     "value": "m:keep:7", "type": "button", "action_ts": "1548426417.840180"}],
    }
    payload.update(overrides)
    return payload
