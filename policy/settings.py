"""The access-policy configuration: one ``[policy.<platform>]`` TOML table per platform, validated strictly.

Example::

    [policy.telegram]
    dm = "pairing"                   # pairing (default) | allowlist | open | disabled
    group = "allowlist"              # allowlist (default) | open | disabled
    allow_from = ["12345"]           # sender ids (or "telegram:12345") that pass DM policy
    allow_groups = ["-1001234"]      # group/channel ids the bot may talk in under group = "allowlist"
    require_mention = true           # default for every group
    mention_patterns = ["^kith\\b"]  # case-insensitive regexes that count as a mention
    rate_limit_burst = 8             # messages one sender may send at once ...
    rate_limit_per_minute = 20.0     # ... and then this many a minute

    [policy.telegram.groups."-1001234"]
    require_mention = false          # per-group override; unset keys inherit the platform's value

A per-group ``mention_patterns`` replaces the platform's list rather than extending it, so a group can
also drop them. Listing a group under ``groups`` does not allow it: ``allow_groups`` is the allowlist.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

from ground.tunables import RATE_LIMIT_BURST, RATE_LIMIT_PER_MINUTE

_PLATFORM_KEYS = frozenset(
    {"dm", "group", "allow_from", "allow_groups", "require_mention", "mention_patterns", "groups",
     "rate_limit_burst", "rate_limit_per_minute"}
)
_GROUP_KEYS = frozenset({"require_mention", "mention_patterns"})

_E = TypeVar("_E", bound=enum.StrEnum)


class PolicyConfigError(ValueError):
    """A policy setting cannot be used; ``key`` is its dotted TOML path (``policy.telegram.dm``)."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


class DmPolicy(enum.StrEnum):
    PAIRING = "pairing"  # unknown senders get a code the owner approves
    ALLOWLIST = "allowlist"  # only listed, approved or owner accounts; others are ignored
    OPEN = "open"  # anyone
    DISABLED = "disabled"  # nobody, the owner included: a kill switch


class GroupPolicy(enum.StrEnum):
    ALLOWLIST = "allowlist"  # only the listed group/channel ids
    OPEN = "open"  # any group the bot is in
    DISABLED = "disabled"  # no group


@dataclass(frozen=True)
class GroupRule:
    require_mention: bool = True
    mention_patterns: tuple[str, ...] = ()  # regexes, matched case-insensitively anywhere in the text


@dataclass(frozen=True)
class PlatformPolicy:
    dm: DmPolicy = DmPolicy.PAIRING
    group: GroupPolicy = GroupPolicy.ALLOWLIST
    allow_from: frozenset[str] = frozenset()  # platform-scoped sender ids ("12345", Slack "T01:U02")
    allow_groups: frozenset[str] = frozenset()
    groups: Mapping[str, GroupRule] = field(default_factory=lambda: MappingProxyType({}))
    default_group_rule: GroupRule = GroupRule()
    rate_limit_burst: int = RATE_LIMIT_BURST  # per sender: messages at once ...
    rate_limit_per_minute: float = RATE_LIMIT_PER_MINUTE  # ... then the steady refill

    def rule_for(self, chat_id: str) -> GroupRule:
        return self.groups.get(chat_id, self.default_group_rule)


@dataclass(frozen=True)
class PolicySettings:
    platforms: Mapping[str, PlatformPolicy] = field(default_factory=lambda: MappingProxyType({}))

    def for_platform(self, platform: str) -> PlatformPolicy:
        """The configured policy, or the safe defaults (pairing DMs, allowlisted groups) when unset."""
        return self.platforms.get(platform) or PlatformPolicy()

    @classmethod
    def from_mapping(
        cls, table: Mapping[str, Any] | None, *, platforms: Collection[str] | None = None
    ) -> PolicySettings:
        """Validate the parsed ``[policy]`` table; any unknown key or bad value raises PolicyConfigError.

        ``platforms`` are the names a table may have, which only the wiring knows; None accepts any name
        (for a table the wiring has already checked when it loaded the file).
        """
        if table is None:
            return cls()
        if not isinstance(table, Mapping):
            raise PolicyConfigError("policy", "expected a table")
        parsed: dict[str, PlatformPolicy] = {}
        for name, value in table.items():
            key = f"policy.{name}"
            if platforms is not None and name not in platforms:
                known = ", ".join(sorted(platforms))
                raise PolicyConfigError(key, f"unknown platform (known: {known})")
            parsed[name] = _parse_platform(name, value, key)
        return cls(platforms=MappingProxyType(parsed))


def _parse_platform(platform: str, value: Any, key: str) -> PlatformPolicy:
    table = _table(value, key)
    _reject_unknown(table, _PLATFORM_KEYS, key)
    default_rule = GroupRule(
        require_mention=_bool(table.get("require_mention", True), f"{key}.require_mention"),
        mention_patterns=_patterns(table.get("mention_patterns", []), f"{key}.mention_patterns"),
    )
    groups: dict[str, GroupRule] = {}
    groups_key = f"{key}.groups"
    for group_id, group_value in _table(table.get("groups", {}), groups_key).items():
        group_key = f'{groups_key}."{group_id}"'
        group_table = _table(group_value, group_key)
        _reject_unknown(group_table, _GROUP_KEYS, group_key)
        require_mention = group_table.get("require_mention", default_rule.require_mention)
        groups[str(group_id)] = GroupRule(
            require_mention=_bool(require_mention, f"{group_key}.require_mention"),
            mention_patterns=(
                _patterns(group_table["mention_patterns"], f"{group_key}.mention_patterns")
                if "mention_patterns" in group_table
                else default_rule.mention_patterns
            ),
        )
    return PlatformPolicy(
        dm=_choice(DmPolicy, table.get("dm", DmPolicy.PAIRING.value), f"{key}.dm"),
        group=_choice(GroupPolicy, table.get("group", GroupPolicy.ALLOWLIST.value), f"{key}.group"),
        allow_from=frozenset(
            _strip_platform(platform, i) for i in _ids(table.get("allow_from", []), f"{key}.allow_from")
        ),
        allow_groups=frozenset(_ids(table.get("allow_groups", []), f"{key}.allow_groups")),
        groups=MappingProxyType(groups),
        default_group_rule=default_rule,
        rate_limit_burst=_positive_int(table.get("rate_limit_burst", RATE_LIMIT_BURST), f"{key}.rate_limit_burst"),
        rate_limit_per_minute=_positive_number(table.get("rate_limit_per_minute", RATE_LIMIT_PER_MINUTE),
                                               f"{key}.rate_limit_per_minute"),
    )


def _strip_platform(platform: str, sender_id: str) -> str:
    # People copy account keys from logs and the pairing CLI ("telegram:123"); accept them as ids.
    return sender_id.removeprefix(f"{platform}:")


def _table(value: Any, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise PolicyConfigError(key, f"expected a table, got {_tname(value)}")
    return value


def _reject_unknown(table: Mapping[str, Any], allowed: frozenset[str], key: str) -> None:
    for name in table:
        if name not in allowed:
            expected = ", ".join(sorted(allowed))
            raise PolicyConfigError(f"{key}.{name}", f"unknown key (expected one of: {expected})")


def _choice(kind: type[_E], value: Any, key: str) -> _E:
    if isinstance(value, str):
        try:
            return kind(value.strip().lower())
        except ValueError:
            pass
    choices = ", ".join(f'"{m.value}"' for m in kind)
    raise PolicyConfigError(key, f"expected one of {choices}, got {value!r}")


def _bool(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise PolicyConfigError(key, f"expected true or false, got {_tname(value)}")
    return value


def _positive_int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PolicyConfigError(key, f"expected a whole number of at least 1, got {value!r}")
    return value


def _positive_number(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 or value == float("inf"):
        raise PolicyConfigError(key, f"expected a number above 0, got {value!r}")
    return float(value)


def _ids(value: Any, key: str) -> list[str]:
    """Ids as strings; integers are accepted because Telegram ids are numbers and TOML keeps them so."""
    if not isinstance(value, list):
        raise PolicyConfigError(key, f"expected a list, got {_tname(value)}")
    ids: list[str] = []
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, str | int):
            raise PolicyConfigError(f"{key}[{i}]", f"expected an id (string or integer), got {_tname(item)}")
        text = str(item).strip()
        if not text:
            raise PolicyConfigError(f"{key}[{i}]", "empty id")
        ids.append(text)
    return ids


def _patterns(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise PolicyConfigError(key, f"expected a list, got {_tname(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise PolicyConfigError(f"{key}[{i}]", f"expected a regex string, got {_tname(item)}")
        if not item:
            # An empty pattern matches every message, silently turning require_mention off.
            raise PolicyConfigError(f"{key}[{i}]", "empty pattern")
        try:
            re.compile(item, re.IGNORECASE)
        except re.error as exc:
            raise PolicyConfigError(f"{key}[{i}]", f"not a valid regex: {exc}") from None
    return tuple(value)


def _tname(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a table"}.get(type(value), type(value).__name__)
