"""Each active thread's recent window, kept in memory between turns.

Every turn needs the thread's last messages, its summary and how many messages wait for the
summary; reading them cost more than the rest of the turn's database work together. History is
append-only, so a window kept from the previous turn is still right exactly when the thread's
newest message before the new one is the window's last and the summary cursor has not moved:
one indexed lookup checks both, whoever wrote in between (this process's heartbeat, another
process). Anything else reads the window afresh.

A window is stored only after the transaction that wrote its newest row committed: a rolled-back
row's id may be handed to another message later. Only on SQLite, whose writers take turns: on a
server database a transaction holding a lower id may commit after a higher one is read.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from sqlalchemy.engine import Connection

from ground.tunables import HISTORY_WINDOW_CACHE_CHARS, HISTORY_WINDOW_CACHE_THREADS
from people import history
from people.history import StoredMessage, Summary


@dataclass(frozen=True, slots=True)
class Window:
    rows: tuple[StoredMessage, ...]  # the thread's newest messages, oldest first
    summary: Summary
    older: int  # messages after the summary's cursor and before rows[0]: the part awaiting a summary


def extend(window: Window, row: StoredMessage, size: int) -> Window:
    """``window`` with ``row`` appended, cut to its ``size`` newest rows; the ones cut out now wait for the summary."""
    rows = (*window.rows, row)
    cut = max(0, len(rows) - size)
    older = window.older + sum(1 for r in rows[:cut] if r.id > window.summary.through)
    return Window(rows[cut:], window.summary, older)


def read_window(conn: Connection, conversation: str, size: int, *, through_id: int | None = None) -> Window:
    """The thread's newest ``size`` messages, or those up to ``through_id`` (a turn resumed after a
    restart sees the thread as it was when its message came)."""
    rows = history.recent(conn, conversation, size, through_id=through_id)
    summary = history.get_summary(conn, conversation)
    first = rows[0].id if rows else 0
    older = history.count_between(conn, conversation, summary.through, first) if rows else 0
    return Window(tuple(rows), summary, older)


class WindowCache:
    """The windows of the most recently active threads, for one process: at most ``capacity`` threads
    and ``max_chars`` characters of message text (people paste long texts), least recent out first."""

    def __init__(self, capacity: int = HISTORY_WINDOW_CACHE_THREADS,
                 max_chars: int = HISTORY_WINDOW_CACHE_CHARS) -> None:
        self.capacity = capacity
        self.max_chars = max_chars
        self.chars = 0
        self._windows: OrderedDict[str, tuple[Window, int]] = OrderedDict()

    def get(self, conversation: str) -> Window | None:
        kept = self._windows.get(conversation)
        return kept[0] if kept is not None else None

    def put(self, conversation: str, window: Window) -> None:
        self.drop(conversation)
        size = sum(len(row.text) for row in window.rows) + len(window.summary.text)
        if size > self.max_chars:
            return  # read afresh each turn rather than push every other thread out
        self._windows[conversation] = (window, size)
        self.chars += size
        while self._windows and (len(self._windows) > self.capacity or self.chars > self.max_chars):
            _window, evicted = self._windows.popitem(last=False)[1]
            self.chars -= evicted

    def drop(self, conversation: str) -> None:
        kept = self._windows.pop(conversation, None)
        if kept is not None:
            self.chars -= kept[1]

    def __len__(self) -> int:
        return len(self._windows)


def window_after(conn: Connection, kept: Window | None, conversation: str, row: StoredMessage,
                 size: int) -> Window:
    """The window ending with ``row``, just written in this transaction: ``kept`` extended when it is
    still the thread's tail, the database's otherwise."""
    if kept is not None and kept.rows:
        newest, through = history.newest_before(conn, conversation, row.id)
        if kept.rows[-1].id == newest and kept.summary.through == through:
            return extend(kept, row, size)
    return read_window(conn, conversation, size)


def still_tail(conn: Connection, kept: Window | None, conversation: str, row: StoredMessage) -> bool:
    """Whether ``row``, just written, directly follows ``kept`` in its thread (its summary is checked
    again when the window is next used)."""
    if kept is None or not kept.rows:
        return False
    if row.id == kept.rows[-1].id + 1:
        return True  # ids only grow: no message of any thread was written in between
    newest, _through = history.newest_before(conn, conversation, row.id)
    return kept.rows[-1].id == newest
