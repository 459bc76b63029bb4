"""Calendar days in a time zone: the day an instant falls on there, and where a day begins and ends.

Goals (what is overdue), the heartbeat's due items and the nightly consolidation all count in the
operator's days, so they share these two rules. Pure: the zone is always passed in.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, tzinfo


def local_day(now: datetime, tz: tzinfo) -> date:
    return now.astimezone(tz).date()


def day_bounds(day: date, tz: tzinfo) -> tuple[datetime, datetime]:
    """[start, end) of a local calendar day as aware datetimes (a DST day is 23 or 25 hours long)."""
    start = datetime.combine(day, time(0), tzinfo=tz)
    end = datetime.combine(day + timedelta(days=1), time(0), tzinfo=tz)
    return start, end
