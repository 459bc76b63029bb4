"""The settings file with every feature's own value rules applied: what the commands load.

The wiring is where the platforms are known: :class:`Settings` adds each channel package's section to the
sections every part reads, and the policy check is told which platform names a ``[policy.<platform>]`` table
may have. A new platform adds its section and its name here, and nowhere outside its own package.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from channels.discord.settings import PLATFORM as DISCORD
from channels.discord.settings import DiscordSettings
from channels.slack.settings import PLATFORM as SLACK
from channels.slack.settings import SlackSettings
from channels.telegram.settings import PLATFORM as TELEGRAM
from channels.telegram.settings import TelegramSettings
from channels.terminal.channel import PLATFORM as CONSOLE
from ground import config
from ground.config import SectionCheck
from heartbeat.settings import check_heartbeat
from policy.settings import PolicySettings


@dataclass(frozen=True)
class Settings(config.Settings):
    """The whole settings file: the sections every part reads, and each platform's own (its field is named as
    the platform is, which is also the name of its TOML table)."""

    telegram: TelegramSettings = field(default_factory=TelegramSettings)
    slack: SlackSettings = field(default_factory=SlackSettings)
    discord: DiscordSettings = field(default_factory=DiscordSettings)


# Every platform a channel can serve: the names a [policy.<platform>] table may have.
PLATFORMS: frozenset[str] = frozenset({TELEGRAM, SLACK, DISCORD, CONSOLE})


def _policy_rules(settings: config.Settings) -> None:
    PolicySettings.from_mapping(settings.policy or None, platforms=PLATFORMS)


def _heartbeat_rules(settings: config.Settings) -> None:
    try:
        check_heartbeat(settings.heartbeat)
    except ValueError as exc:
        raise ValueError(f"heartbeat: {exc}") from None


SECTION_CHECKS: tuple[SectionCheck, ...] = (_policy_rules, _heartbeat_rules)


def load_settings(path: str | os.PathLike[str] | None) -> Settings:
    """Read the TOML file, check its types, then each feature's rules for its own section."""
    return config.load_settings(path, Settings, SECTION_CHECKS)
