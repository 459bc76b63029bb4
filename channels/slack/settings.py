"""Slack's section of the settings file, ``[slack]``: Socket Mode or HTTP Events, and where the tokens are.
Read by every command (the wiring builds it with the loader's strict checks), so it imports no SDK."""

from __future__ import annotations

import os
from dataclasses import dataclass

# The platform's name: the prefix of its account keys ("slack:T01:U02"), its [slack] and [policy.slack] tables.
PLATFORM = "slack"


@dataclass(frozen=True)
class SlackSettings:
    bot_token_env: str = "SLACK_BOT_TOKEN"  # xoxb-…
    app_token_env: str = "SLACK_APP_TOKEN"  # xapp-…, Socket Mode only
    signing_secret_env: str = "SLACK_SIGNING_SECRET"  # HTTP mode only
    mode: str = "socket"  # "socket" or "http"
    api_url: str = ""  # empty = https://slack.com/api/ ; a test fake
    http_host: str = "127.0.0.1"
    http_port: int = 3000
    # Stream replies in threads with Slack's chat.startStream; off: post one message and edit it (chat.update).
    native_stream: bool = True

    def bot_token(self) -> str | None:
        return os.environ.get(self.bot_token_env) or None

    def app_token(self) -> str | None:
        return os.environ.get(self.app_token_env) or None

    def signing_secret(self) -> str | None:
        return os.environ.get(self.signing_secret_env) or None
