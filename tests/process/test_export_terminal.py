"""The terminal chat cannot show a file: ``/export`` typed there writes it under the data directory, owner-only,
and the reply's line says where (the terminal channel's own file handling is
tests/unit/channels/test_terminal_files.py)."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

from tests.support.bot_process import run_bot
from tests.support.config_file import write_config

SAVED = re.compile(r"\(saved to (\S+), readable by you only\)")


async def test_export_in_the_terminal_chat_writes_the_file_and_names_it(fake_llm, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    cfg = write_config(tmp_path / "kith.toml", fake_llm, data_dir)
    script = "My cat is Miso\n/pause\nI am moving to Porto\n/resume\n/export\n/export\n"
    code, out, err = await run_bot("--config", str(cfg), "chat", stdin=script)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[-2].startswith("Everything I keep about you is in this file")
    paths = [Path(m.group(1)) for line in lines[-2:] if (m := SAVED.search(line))]
    assert len(paths) == 2 and paths[0] != paths[1]  # a second export in the same second keeps the first
    for path in paths:
        assert path.parent == (data_dir / "exports").absolute() and path.suffix == ".json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(paths[0].parent.stat().st_mode) == 0o700
    assert [p.name for p in paths[0].parent.iterdir() if p.name.startswith(".")] == []  # no temporary left
    data = json.loads(paths[0].read_text(encoding="utf-8"))
    said = [(m["from"], m["text"]) for m in data["messages"]]
    assert said == [("person", "My cat is Miso"), ("kith", "echo: My cat is Miso"),
                    ("person", "I am moving to Porto"), ("kith", "echo: I am moving to Porto")]  # paused, still kept
    assert data["capture"]["paused"] is False and data["accounts"][0]["platform"] == "console"


async def test_forget_reaches_the_export_files_the_terminal_saved(fake_llm, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    cfg = write_config(tmp_path / "kith.toml", fake_llm, data_dir)
    script = "My cat is Miso. I live in Porto.\n/export\n/forget Miso\nyes\n"
    code, out, err = await run_bot("--config", str(cfg), "chat", stdin=script)
    assert code == 0, err
    (saved,) = [Path(m.group(1)) for line in out.splitlines() if (m := SAVED.search(line))]
    assert "1 saved export file" in out  # the plan counts it before anything changes
    text = saved.read_text(encoding="utf-8")
    assert "Miso" not in text and "[forgotten]" in text and "Porto" in text  # only the words forgotten go
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    json.loads(text)  # still a whole export document
