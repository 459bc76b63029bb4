"""``/file <path> [caption]`` in the terminal chat: what it sends, read from its path within the limit asked for."""

from __future__ import annotations

from pathlib import Path

import pytest

from channels.terminal.files import USAGE, parse_file_line, read_local
from ground.types import AttachmentError, AttachmentKind


def test_the_path_its_kind_and_the_caption(tmp_path: Path) -> None:
    (tmp_path / "My Lease.pdf").write_bytes(b"%PDF")
    (tmp_path / "note.ogg").write_bytes(b"OggS")
    (tmp_path / "cat.jpg").write_bytes(b"\xff\xd8")
    lease = parse_file_line(f'/file "{tmp_path / "My Lease.pdf"}" keep this, please')
    assert lease.attachment is not None and lease.caption == "keep this, please"
    assert (lease.attachment.kind, lease.attachment.name, lease.attachment.size) == (
        AttachmentKind.DOCUMENT, "My Lease.pdf", 4)
    note = parse_file_line(f"/file {tmp_path / 'note.ogg'}")
    assert note.attachment is not None and (note.attachment.kind, note.caption) == (AttachmentKind.VOICE, "")
    cat = parse_file_line(f"/file {tmp_path / 'cat.jpg'} my cat  Miso")
    assert cat.attachment is not None and (cat.attachment.kind, cat.caption) == (AttachmentKind.IMAGE, "my cat  Miso")


def test_a_home_relative_path_is_expanded_and_the_caption_kept_whole(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "recipes.md").write_text("## Pancakes")
    sent = parse_file_line("/file ~/recipes.md what do you think?")
    assert sent.attachment is not None and sent.attachment.ref == str(tmp_path / "recipes.md")
    assert sent.caption == "what do you think?"


def test_a_bad_line_says_why(tmp_path: Path) -> None:
    assert parse_file_line("/file").error == USAGE
    assert parse_file_line('/file "unclosed').error == USAGE
    assert parse_file_line(f"/file {tmp_path}").error == f"No file at {tmp_path}."  # a directory is no file


def test_reading_stops_at_the_limit_and_a_vanished_file_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"x" * 100)
    sent = parse_file_line(f"/file {path}")
    assert sent.attachment is not None
    assert read_local(sent.attachment, 100) == b"x" * 100
    with pytest.raises(AttachmentError) as too_large:
        read_local(sent.attachment, 99)
    assert too_large.value.too_large
    path.unlink()
    with pytest.raises(AttachmentError) as gone:
        read_local(sent.attachment, 100)
    assert gone.value.gone
