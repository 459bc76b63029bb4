"""The ``[heartbeat]`` settings checked, and the pure time rules of the heartbeat's own (active hours, retries).

``HeartbeatSettings`` itself lives in :mod:`ground.config` as ``Settings.heartbeat``; calendar days in a zone,
which goals count in too, are :mod:`ground.days`'s.
"""

from __future__ import annotations

import re
from datetime import time, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ground.config import HeartbeatSettings

_HOURS = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")
_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def parse_active_hours(text: str) -> tuple[time, time]:
    """``"08:00-22:00"`` -> (08:00, 22:00). Raises ValueError naming what is wrong."""
    m = _HOURS.match(text)
    if m is None:
        raise ValueError(f"active_hours must look like 08:00-22:00, got {text!r}")
    h1, m1, h2, m2 = (int(g) for g in m.groups())
    if h1 == 24 and m1 == 0:
        h1 = 0
    ends_at_midnight = h2 == 24 and m2 == 0
    if not (0 <= h1 < 24 and 0 <= m1 < 60 and (ends_at_midnight or (0 <= h2 < 24 and 0 <= m2 < 60))):
        raise ValueError(f"active_hours has an impossible time: {text!r}")
    start, end = time(h1, m1), time(0, 0) if ends_at_midnight else time(h2, m2)
    if start == end and not ends_at_midnight:
        raise ValueError(f"active_hours is an empty range: {text!r}")
    return start, end


def in_active_hours(local: time, start: time, end: time) -> bool:
    """Whether a local wall-clock time is inside [start, end); a range past midnight wraps."""
    if start < end:
        return start <= local < end
    return local >= start or local < end  # 22:00-06:00, or 08:00-24:00 (end 00:00)


def resolve_timezone(name: str) -> tzinfo:
    """The zone named, or the machine's (tzlocal, which APScheduler itself depends on) when empty."""
    if not name:
        import tzlocal

        return tzlocal.get_localzone()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown timezone {name!r}") from None


def check_heartbeat(hb: HeartbeatSettings) -> None:
    """Value checks the config loader's type checks cannot make; raises ValueError with the key."""
    parse_active_hours(hb.active_hours)
    resolve_timezone(hb.timezone)
    if hb.every_minutes <= 0:
        raise ValueError("every_minutes must be positive")
    if hb.token_budget < 200:
        raise ValueError("token_budget must be at least 200")
    if hb.max_retries < 0 or hb.retry_base_s <= 0:
        raise ValueError("max_retries must be >= 0 and retry_base_s > 0")
    if hb.decay_weekday not in _WEEKDAYS:
        raise ValueError(f"decay_weekday must be one of {', '.join(_WEEKDAYS)}")


def retry_delay(attempt: int, base_s: float, max_s: float) -> float:
    """Seconds before retry number ``attempt`` (1-based): doubling from ``base_s``, capped."""
    return min(max_s, base_s * 2 ** max(0, attempt - 1))
