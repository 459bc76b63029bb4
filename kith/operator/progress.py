"""A long operator command's progress on standard error: a live bar on a terminal, else a line now and then.

On a terminal the bar (drawn by rich) is one line redrawn in place (``\\r``), at most every ``PROGRESS_BAR_REDRAW_S``;
anywhere else (a log file, a pipe, a service manager's journal) a plain line every
``PROGRESS_LINE_EVERY_S``, so the output stays readable and small however long the command runs.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import Any

from ground.tunables import PROGRESS_BAR_REDRAW_S, PROGRESS_LINE_EVERY_S

BAR_WIDTH = 24


def duration(seconds: float) -> str:
    """``seconds`` as a clock reads: ``0:07``, ``12:30``, ``2:05:00``."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def progress_text(done: int, total: int, elapsed_s: float, unit: str = "records") -> str:
    """``1,234/5,000 records  24%  310/s  ETA 0:12``: the rate so far, and the time left at that rate."""
    share = done / total if total else 1.0
    rate = done / elapsed_s if elapsed_s > 0 else 0.0
    eta = duration((total - done) / rate) if rate > 0 else "-:--"
    return f"{done:,}/{total:,} {unit}  {share:.0%}  {rate:,.0f}/s  ETA {eta}"


def bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    """The bar as rich draws it for a colour terminal, ``width`` cells wide."""
    from rich.console import Console
    from rich.progress_bar import ProgressBar

    out = io.StringIO()
    Console(file=out, width=width, force_terminal=True, color_system="standard").print(
        ProgressBar(total=max(total, 1), completed=min(done, total) if total else 1, width=width), end="")
    return out.getvalue()


def is_terminal(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty()) if callable(isatty) else False


class ProgressShown:
    """Shows ``update(done, total)`` calls on ``stream``; ``finish()`` ends the bar's line."""

    def __init__(
        self,
        stream: Any,
        *,
        unit: str = "records",
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        redraw_s: float | None = None,
        every_s: float | None = None,
    ) -> None:
        self.stream = stream
        self.unit = unit
        self.tty = is_terminal(stream) if tty is None else tty
        self.clock = clock
        if self.tty:
            self.interval = PROGRESS_BAR_REDRAW_S if redraw_s is None else redraw_s
        else:
            self.interval = PROGRESS_LINE_EVERY_S if every_s is None else every_s
        self.started: float | None = None
        self._last_shown: float | None = None
        self._width = 0  # of the bar's line as last drawn, to blank what a shorter one leaves

    def elapsed(self) -> float:
        return 0.0 if self.started is None else self.clock() - self.started

    def update(self, done: int, total: int) -> None:
        now = self.clock()
        if self.started is None:
            self.started = self._last_shown = now
            if not self.tty:
                return  # the caller's own first line says what begins; the first report comes later
        assert self._last_shown is not None
        if done < total and now - self._last_shown < self.interval:
            return
        if not self.tty and done >= total:
            return  # the caller's closing line says it
        self._last_shown = now
        text = progress_text(done, total, now - self.started, self.unit)
        if self.tty:
            # What a shorter line than the last leaves on screen is blanked (the bar's colour codes take no cells).
            self.stream.write(f"\r{bar(done, total)} {text.ljust(self._width)}")
            self._width = len(text)
        else:
            self.stream.write(f"kith: {text}\n")
        self.stream.flush()

    def finish(self) -> None:
        if self.tty and self._width:
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0
