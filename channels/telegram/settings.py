"""Telegram's section of the settings file, ``[telegram]``: where the Bot API is, how updates arrive, where the
token is. Read by every command (the wiring builds it with the loader's strict checks), so it imports no SDK."""

from __future__ import annotations

import os
from dataclasses import dataclass

# The platform's name: the prefix of its account keys ("telegram:42"), its [telegram] and [policy.telegram] tables.
PLATFORM = "telegram"


@dataclass(frozen=True)
class TelegramSettings:
    token_env: str = "TELEGRAM_BOT_TOKEN"
    base_url: str = ""  # empty = https://api.telegram.org/bot ; a self-hosted Bot API server, or a test fake
    mode: str = "polling"  # "polling" or "webhook"
    webhook_url: str = ""  # public URL Telegram posts to, in webhook mode
    webhook_host: str = "127.0.0.1"
    webhook_port: int = 8443
    webhook_secret_env: str = "TELEGRAM_WEBHOOK_SECRET"
    poll_timeout_s: int = 30

    def token(self) -> str | None:
        return os.environ.get(self.token_env) or None
