"""The settings file with every feature's own value rules applied: what the commands load.

The wiring is where the platforms are known: :class:`AppSettings` adds each channel package's section to the
sections every part reads (:class:`ground.config.Settings`), and the policy check is told which platform names a
``[policy.<platform>]`` table may have. A new platform adds its section and its name here, and nowhere outside
its own package.

Where the settings come from: ``--config``, else ``$KITH_CONFIG``, else the file ``bot.py setup`` writes
(``config.toml`` under ``$XDG_CONFIG_HOME/kith``, i.e. ``~/.config/kith``) when it exists, else the built-in
defaults. The secrets the file names by variable (``api_key_env``, ``token_env`` ...) may be kept in a ``.env``
beside it, read on loading; a variable already set in the environment wins.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from channels.discord.settings import PLATFORM as DISCORD
from channels.discord.settings import DiscordSettings
from channels.slack.settings import PLATFORM as SLACK
from channels.slack.settings import SlackSettings
from channels.telegram.settings import PLATFORM as TELEGRAM
from channels.telegram.settings import TelegramSettings
from channels.terminal.channel import PLATFORM as CONSOLE
from ground import config
from ground.config import ConfigError, SectionCheck
from ground.env_file import EnvFileError, parse_env
from heartbeat.settings import check_heartbeat
from policy.settings import PolicySettings


@dataclass(frozen=True)
class AppSettings(config.Settings):
    """The whole settings file, as the commands load it: the sections every part reads, and each platform's own
    (its field is named as the platform is, which is also the name of its TOML table)."""

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


SECTION_CHECKS: tuple[SectionCheck, ...] = (_policy_rules, _heartbeat_rules, config.check_media, config.check_web)


CONFIG_ENV = "KITH_CONFIG"
ENV_FILE_NAME = ".env"


def default_config_path() -> Path:
    """Where ``bot.py setup`` writes the config, and where every command looks when none is named."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "kith" / "config.toml"


def config_path(explicit: str | None) -> str | None:
    """The config file a command uses: ``--config``, ``$KITH_CONFIG``, or the default one when it exists;
    ``None`` for the built-in defaults."""
    named = explicit or os.environ.get(CONFIG_ENV)
    if named:
        return named
    default = default_config_path()
    return str(default) if default.is_file() else None


def env_file_beside(path: str | os.PathLike[str]) -> Path:
    return Path(path).parent / ENV_FILE_NAME


def read_env_file(path: Path) -> dict[str, str]:
    """The variables of a ``.env`` file; empty when there is none."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or type(exc).__name__}") from None
    try:
        return parse_env(text)
    except EnvFileError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def apply_env_file(config_file: str | os.PathLike[str]) -> None:
    """Put the ``.env`` beside ``config_file`` into this process's environment, where every part (and the model
    process, which inherits it) reads secrets. A variable already set, and not empty, is left as it is."""
    for key, value in read_env_file(env_file_beside(config_file)).items():
        if not os.environ.get(key):
            os.environ[key] = value


def load_settings(path: str | os.PathLike[str] | None, *, require_environment: bool = True) -> AppSettings:
    """Read the TOML file (and the ``.env`` beside it), check its types, then each feature's rules for its own
    section."""
    if path is not None and Path(path).is_file():
        apply_env_file(path)
    return config.load_settings(path, AppSettings, SECTION_CHECKS, require_environment=require_environment)
