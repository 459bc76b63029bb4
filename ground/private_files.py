"""Owner-only files: the data directory is 0700 and everything in it 0600 (directories 0700).

kith's data is people's own words: the database, its write-ahead log, the Chroma store, exports.
A file another local user can read is a leak however careful the rest is. Every command sets a
``077`` umask at start (:func:`owner_only_umask`), so whatever kith, SQLite or Chroma creates
afterwards is owner-only; :func:`tighten` brings an existing data directory (made by an older kith,
or under a looser umask) to the same modes when a command opens it; ``doctor`` reports what is
still looser (:func:`looser_than_owner`), as a warning: the operator may have a reason.

Symbolic links are neither followed nor changed: the data directory's own files are what matter,
and a link could point anywhere.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger("kith.files")

OWNER_ONLY_UMASK = 0o077
DIR_MODE = 0o700
FILE_MODE = 0o600
_GROUP_OR_OTHER = 0o077


def owner_only_umask() -> int:
    """Make everything this process creates from now on owner-only; the previous umask."""
    return os.umask(OWNER_ONLY_UMASK)


def _entries(data_dir: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """The data directory and everything under it that is a file or a directory (never through a link)."""
    try:
        yield data_dir, data_dir.stat()
    except FileNotFoundError:
        return
    for root, dirs, files in os.walk(data_dir, followlinks=False):
        for name in (*dirs, *files):
            path = Path(root, name)
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue  # gone meanwhile (SQLite's journal, a temporary file)
            if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
                yield path, st


def tighten(data_dir: Path) -> int:
    """Set the data directory and every directory under it to 0700 and every file to 0600; how many changed.

    A file kith cannot change (another owner's, a read-only mount) is left as it is and logged by
    path length only; ``doctor`` names it.
    """
    changed = 0
    for path, st in _entries(data_dir):
        want = DIR_MODE if stat.S_ISDIR(st.st_mode) else FILE_MODE
        if stat.S_IMODE(st.st_mode) & _GROUP_OR_OTHER == 0:
            continue  # already owner-only (a stricter mode, 0400 say, is kept)
        try:
            os.chmod(path, want)
            changed += 1
        except OSError as exc:
            log.warning("cannot make private path_len=%d error=%s", len(str(path)), type(exc).__name__)
    if changed:
        log.info("made private data_dir_len=%d paths=%d", len(str(data_dir)), changed)
    return changed


def looser_than_owner(data_dir: Path) -> list[Path]:
    """Every path under the data directory (itself included) that its group or other users may use."""
    return [path for path, st in _entries(data_dir) if stat.S_IMODE(st.st_mode) & _GROUP_OR_OTHER]


def write_private_atomically(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all (a temporary file, synced, then renamed), owner-only."""
    path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the rename itself survives a power cut
    finally:
        os.close(dir_fd)
