"""The terminal channel with a file to show: saved under its directory by a name that cannot leave it or hide,
or said so when it cannot be written."""

from __future__ import annotations

import io
from pathlib import Path

from channels.terminal import TerminalChannel
from ground.types import OutboundMessage


def _file(name: str) -> OutboundMessage:
    return OutboundMessage("console", "ana", "Here it is.", attachment_name=name, attachment_bytes=b'{"a": 1}')


async def _send(terminal: TerminalChannel, message: OutboundMessage) -> None:
    for index, chunk in enumerate(terminal.render(message)):
        await terminal.send_chunk(message, chunk, index)


async def test_a_files_name_cannot_leave_the_directory_or_hide(tmp_path: Path) -> None:
    out = io.StringIO()
    terminal = TerminalChannel(stdin=io.StringIO(""), stdout=out, user="ana", interactive=False,
                               files_dir=tmp_path / "exports")
    await _send(terminal, _file("../../escape me.json"))
    await _send(terminal, _file(".hidden"))
    assert sorted(p.name for p in (tmp_path / "exports").iterdir()) == ["escape_me.json", "hidden"]
    assert not (tmp_path / "escape me.json").exists()
    assert out.getvalue().splitlines()[0] == f"Here it is. (saved to {tmp_path / 'exports' / 'escape_me.json'}, " \
                                             "readable by you only)"


async def test_a_file_that_cannot_be_written_is_said_so_not_dropped(tmp_path: Path) -> None:
    blocked = tmp_path / "exports"
    blocked.write_text("a file where the directory should be")
    out = io.StringIO()
    terminal = TerminalChannel(stdin=io.StringIO(""), stdout=out, user="ana", interactive=False, files_dir=blocked)
    await _send(terminal, _file("kith-export.json"))
    nowhere = TerminalChannel(stdin=io.StringIO(""), stdout=out, user="ana", interactive=False)
    await _send(nowhere, _file("kith-export.json"))
    assert out.getvalue().splitlines() == [
        "Here it is. (the file kith-export.json could not be saved: File exists)",
        "Here it is. (the file kith-export.json cannot be shown in this terminal)"]
