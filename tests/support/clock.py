"""The tests' fixed moment and a clock that moves only when a test says."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)  # the tests' "now" unless they need the wall clock


class FakeClock:
    """A controllable clock for code that takes ``clock: Callable[[], datetime]``."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kw: float) -> None:
        self.now += timedelta(**kw)
