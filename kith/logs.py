"""Where the log goes while the terminal chat runs: to a file, so it never writes over the conversation.

The terminal chat shares its screen with the person typing, so its log lines go to
``<data_dir>/logs/kith.log`` (rotated, owner-only like everything in the data directory). One line
at start says where; at the end one line counts the warnings, if there were any. ``-v`` keeps the
log on the terminal as well, for whoever is debugging.
"""

from __future__ import annotations

import logging
import logging.handlers
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


@dataclass
class FileLog:
    path: Path
    _tally: _WarningTally
    _handlers: list[logging.Handler]

    @property
    def warnings(self) -> int:
        return self._tally.count

    def summary(self) -> str | None:
        """One line for the end of the chat when something was logged at WARNING or above, else None."""
        if not self.warnings:
            return None
        noun = "warning" if self.warnings == 1 else "warnings"
        return f"{self.warnings} {noun} this session; see {self.path}"

    def close(self) -> None:
        root = logging.getLogger()
        for handler in self._handlers:
            root.removeHandler(handler)
            handler.close()


def log_to_file(data_dir: Path, *, keep_terminal: bool) -> FileLog:
    """Send the log to ``data_dir/logs/kith.log``; the terminal keeps it too only with ``keep_terminal``."""
    path = data_dir / "logs" / "kith.log"
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    root = logging.getLogger()
    if not keep_terminal:
        for handler in list(root.handlers):
            if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
                root.removeHandler(handler)
        root.setLevel(logging.INFO)
    to_file = logging.handlers.RotatingFileHandler(
        path, maxBytes=LOG_FILE_MAX_BYTES, backupCount=LOG_FILE_BACKUPS, encoding="utf-8"
    )
    to_file.setFormatter(logging.Formatter(LOG_FORMAT))
    tally = _WarningTally()
    root.addHandler(to_file)
    root.addHandler(tally)
    return FileLog(path, tally, [to_file, tally])
