"""The terminal chat's log file: written, summed up at the end, and a file that cannot be written is one line on
the chat's screen, not a traceback per record."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kith.app.logs import FileLog, log_to_file

FULL_DISK = Path("/dev/full")  # every write to it fails with "No space left on device"
needs_full_disk = pytest.mark.skipif(not FULL_DISK.exists(), reason="no /dev/full here")


@pytest.fixture
def root_logger() -> Iterator[logging.Logger]:
    """The root logger's handlers and level as they were, whatever log_to_file changed."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield root
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def _on_a_full_disk(data_dir: Path) -> FileLog:
    (data_dir / "logs").mkdir(parents=True)
    (data_dir / "logs" / "kith.log").symlink_to(FULL_DISK)
    return log_to_file(data_dir, keep_terminal=False)


@needs_full_disk
def test_a_full_disk_is_one_line_on_the_screen_and_in_the_summary(
    tmp_path: Path, root_logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    file_log = _on_a_full_disk(tmp_path)
    try:
        log = logging.getLogger("kith.memory")
        log.info("recall person=%s", "p_ana")
        for i in range(3):
            log.warning("forget applied person=%s notes=%d", "p_ana", i)
        summary = file_log.summary()
    finally:
        file_log.close()
    said = capsys.readouterr().err
    full = os.strerror(errno.ENOSPC)
    assert said == f"kith: cannot write the log ({full}); the rest of this session is not logged\n"
    assert summary == f"3 warnings this session, 3 not in {tmp_path / 'logs' / 'kith.log'}: it could not be " \
                      f"written ({full})"


@needs_full_disk
def test_a_log_it_could_not_write_is_said_at_the_end_without_a_warning(
    tmp_path: Path, root_logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    file_log = _on_a_full_disk(tmp_path)
    try:
        logging.getLogger("kith.core").info("reply sent")
        summary = file_log.summary()
    finally:
        file_log.close()
    full = os.strerror(errno.ENOSPC)
    assert summary == f"{tmp_path / 'logs' / 'kith.log'} could not be written this session ({full})"
    assert capsys.readouterr().err == f"kith: cannot write the log ({full}); the rest of this session is not logged\n"


def test_a_data_directory_it_cannot_make_is_the_same_one_line(
    tmp_path: Path, root_logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("a file where the data directory should be")
    file_log = log_to_file(blocker, keep_terminal=False)
    try:
        logging.getLogger("kith.core").warning("one")
        logging.getLogger("kith.core").warning("two")
        summary = file_log.summary()
    finally:
        file_log.close()
    why = os.strerror(errno.ENOTDIR)
    assert capsys.readouterr().err == f"kith: cannot write the log ({why}); the rest of this session is not logged\n"
    assert summary is not None and summary.startswith("2 warnings this session, 2 not in")


def test_a_log_it_can_write_holds_the_warnings_the_summary_counts(
    tmp_path: Path, root_logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    file_log = log_to_file(tmp_path, keep_terminal=False)
    try:
        logging.getLogger("kith.core").info("reply sent")
        logging.getLogger("kith.core").warning("slow reply ms=%d", 9000)
        summary = file_log.summary()
    finally:
        file_log.close()
    written = file_log.path.read_text(encoding="utf-8")
    assert "INFO kith.core: reply sent" in written and "WARNING kith.core: slow reply ms=9000" in written
    assert summary == f"1 warning this session; see {file_log.path}"
    assert capsys.readouterr().err == ""
