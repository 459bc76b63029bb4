"""Where the log goes while the terminal chat runs: to a file, so it never writes over the conversation.

The terminal chat shares its screen with the person typing, so its log lines go to
``<data_dir>/logs/kith.log`` (rotated, owner-only like everything in the data directory). One line
at start says where; at the end one line counts the warnings, if there were any. ``-v`` keeps the
log on the terminal as well, for whoever is debugging.

A log file that cannot be written (a full or read-only disk) is one line on the terminal when it
happens, not a traceback per record with each record's values; the log is paused for the rest of
the session, and the closing line says which warnings it is missing.
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import sys
from dataclasses import dataclass
from pathlib import Path

from ground.tunables import LOG_FILE_BACKUPS, LOG_FILE_MAX_BYTES

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _WarningTally(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


class _LogFile(logging.handlers.RotatingFileHandler):
    """The log file, paused at the first record it cannot write."""

    def __init__(self, path: Path) -> None:
        # Opened at the first record, so a file that cannot be opened is that record's one line too.
        super().__init__(path, maxBytes=LOG_FILE_MAX_BYTES, backupCount=LOG_FILE_BACKUPS, encoding="utf-8",
                         delay=True)
        self.failure: str | None = None  # why it stopped being written, in a few words
        self.lost_warnings = 0  # records at WARNING or above that are not in the file

    def emit(self, record: logging.LogRecord) -> None:
        if self.failure is not None:
            self._lost(record)
            return
        super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):
            super().handleError(record)  # a record that does not format: a bug in its call, shown as one
            return
        self._lost(record)
        if self.failure is not None:
            return
        self.failure = error.strerror or type(error).__name__
        stream, self.stream = self.stream, None
        if stream is not None:
            with contextlib.suppress(OSError):  # its unwritten buffer fails again; the descriptor closes anyway
                stream.close()
        with contextlib.suppress(OSError, ValueError):
            print(f"kith: cannot write the log ({self.failure}); the rest of this session is not logged",
                  file=sys.stderr, flush=True)

    def _lost(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            self.lost_warnings += 1


@dataclass
class FileLog:
    path: Path
    _tally: _WarningTally
    _handlers: list[logging.Handler]
    _file: _LogFile

    @property
    def warnings(self) -> int:
        return self._tally.count

    def summary(self) -> str | None:
        """One line for the end of the chat when something was logged at WARNING or above, or the log could not
        be written; else None."""
        noun = "warning" if self.warnings == 1 else "warnings"
        failure = self._file.failure
        if failure is None:
            return f"{self.warnings} {noun} this session; see {self.path}" if self.warnings else None
        if not self.warnings:
            return f"{self.path} could not be written this session ({failure})"
        return (f"{self.warnings} {noun} this session, {self._file.lost_warnings} not in {self.path}: it could not "
                f"be written ({failure})")

    def close(self) -> None:
        root = logging.getLogger()
        for handler in self._handlers:
            root.removeHandler(handler)
            handler.close()


def log_to_file(data_dir: Path, *, keep_terminal: bool) -> FileLog:
    """Send the log to ``data_dir/logs/kith.log``; the terminal keeps it too only with ``keep_terminal``."""
    path = data_dir / "logs" / "kith.log"
    with contextlib.suppress(OSError):  # else the first record cannot open the file, and says so
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    root = logging.getLogger()
    if not keep_terminal:
        for handler in list(root.handlers):
            if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
                root.removeHandler(handler)
        root.setLevel(logging.INFO)
    to_file = _LogFile(path)
    to_file.setFormatter(logging.Formatter(LOG_FORMAT))
    tally = _WarningTally()
    root.addHandler(to_file)
    root.addHandler(tally)
    return FileLog(path, tally, [to_file, tally], to_file)
