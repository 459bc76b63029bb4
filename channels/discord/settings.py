"""Discord's section of the settings file, ``[discord]``: where the token is and how long the gateway may take.
Read by every command (the wiring builds it with the loader's strict checks), so it imports no SDK."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ground.tunables import DISCORD_READY_TIMEOUT_S

# The platform's name: the prefix of its account keys ("discord:42"), its [discord] and [policy.discord] tables.
PLATFORM = "discord"


@dataclass(frozen=True)
class DiscordSettings:
    token_env: str = "DISCORD_BOT_TOKEN"
    ready_timeout_s: float = DISCORD_READY_TIMEOUT_S

    def token(self) -> str | None:
        return os.environ.get(self.token_env) or None
