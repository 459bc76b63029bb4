"""The settings file with every feature's own value rules applied: what the commands load."""

from __future__ import annotations

import os

from ground.config import SectionCheck, Settings
from ground.config import load_settings as load_typed_settings
from heartbeat.settings import check_heartbeat
from policy.settings import PolicySettings


def _policy_rules(settings: Settings) -> None:
    PolicySettings.from_mapping(settings.policy or None)


def _heartbeat_rules(settings: Settings) -> None:
    try:
        check_heartbeat(settings.heartbeat)
    except ValueError as exc:
        raise ValueError(f"heartbeat: {exc}") from None


SECTION_CHECKS: tuple[SectionCheck, ...] = (_policy_rules, _heartbeat_rules)


def load_settings(path: str | os.PathLike[str] | None) -> Settings:
    """Read the TOML file, check its types, then each feature's rules for its own section."""
    return load_typed_settings(path, SECTION_CHECKS)
