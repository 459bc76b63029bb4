"""The journal of confirmed forgets: each one under way is a file until it is done, so that a forget killed
half-way is finished at the next start (:meth:`memory.forgetting.forgetter.Forgetter.resume`)."""

from __future__ import annotations

import errno
import json
import logging
import os
import time
from datetime import datetime
from pathlib import Path

from ground.private_files import write_private_atomically
from memory.forgetting.plan import ForgetPlan
from memory.forgetting.scrub import Places

log = logging.getLogger("kith.memory.forget")

# A confirmed forget under way is journalled in a file of this directory (under the data directory) until it is
# done, so that one killed half-way is finished at the next start. The file holds the words (a forget cannot be
# finished without them), and only while they are still in the rows it rewrites: it is overwritten and removed
# once they are gone. Not a table: a row's old bytes would stay in the database's free pages and log until the
# next checkpoint, and a journal must outlive exactly the commit that would take them out.
JOURNAL_DIR = "forgetting"


def plan_document(plan: ForgetPlan, started: datetime) -> bytes:
    return json.dumps({"person": plan.person, "query": plan.query, "note_ids": list(plan.note_ids),
                       "memory_ids": list(plan.memory_ids), "unlink": {k: list(v) for k, v in plan.unlink.items()},
                       "phrases": list(plan.phrases), "receipt_ids": list(plan.receipt_ids),
                       "started_at": started.isoformat()}, ensure_ascii=False).encode("utf-8")


def plan_from_document(data: bytes) -> tuple[ForgetPlan, datetime]:
    d = json.loads(data.decode("utf-8"))
    plan = ForgetPlan(str(d["person"]), str(d["query"]), tuple(map(str, d["note_ids"])),
                      tuple(map(str, d["memory_ids"])), {str(k): tuple(v) for k, v in d["unlink"].items()}, {},
                      tuple(map(str, d["phrases"])), Places(), tuple(map(str, d["receipt_ids"])))
    return plan, datetime.fromisoformat(str(d["started_at"]))


def write_entry(journal: Path, plan: ForgetPlan, started: datetime) -> Path:
    """Journal ``plan`` before any of it is applied; the entry's path, to :func:`wipe` once it is done. Raises
    :class:`JournalUnwritable` (nothing was begun) when the entry cannot be written. Blocking: run it in a thread."""
    entry = journal / f"{time.time_ns()}-{os.getpid()}.json"
    try:
        write_private_atomically(entry, plan_document(plan, started))
    except OSError as exc:
        # Begun unjournalled, a kill half-way would leave the words with nothing to finish it.
        log.warning("forget not begun person=%s: its journal entry could not be written error=%s",
                    plan.person, _errno_name(exc))
        raise JournalUnwritable(exc) from None
    return entry


def wipe(path: Path) -> bool:
    """Overwrite ``path`` with zeros, then remove it: its words do not stay in the file's old blocks where the
    file system reuses them in place. Best effort: a copy-on-write disk keeps what it keeps. Never raises: a
    disk that turned read-only or full keeps the file, which is logged (no path, no words) and left to the next
    start. True when the file is gone."""
    try:
        size = path.stat().st_size
        with path.open("r+b") as f:
            f.write(b"\0" * size)
            f.flush()
            os.fsync(f.fileno())
    except FileNotFoundError:
        return True
    except OSError as exc:  # removed all the same: a file that is gone cannot be read back by name
        log.warning("forget journal entry not overwritten error=%s", _errno_name(exc))
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("forget journal entry not removed error=%s: the next start removes it", _errno_name(exc))
        return False
    return True


def _errno_name(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, type(exc).__name__)


class JournalUnwritable(Exception):
    """A confirmed forget could not be journalled (a full or read-only disk): it was not begun, nothing changed."""

    def __init__(self, cause: OSError) -> None:
        self.errno = cause.errno
        super().__init__(f"nothing was forgotten: the forget could not be recorded before starting it "
                         f"({_errno_name(cause)}); free the data directory's disk and ask again")

    @property
    def disk(self) -> str:
        """What is wrong with the disk, in a few plain words."""
        if self.errno in (errno.ENOSPC, errno.EDQUOT):
            return "my disk is full"
        if self.errno == errno.EROFS:
            return "my disk is read-only"
        if self.errno in (errno.EACCES, errno.EPERM):
            return "I may not write to my data folder"
        return "I could not write to my data folder"


__all__ = ["JOURNAL_DIR", "JournalUnwritable", "plan_document", "plan_from_document", "wipe", "write_entry"]
