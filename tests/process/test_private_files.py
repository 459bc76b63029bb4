"""kith's files are its owner's alone: the data directory 0700, every file in it 0600, while the bot runs
and after, including the database's write-ahead log and Chroma's files; doctor warns about looser ones."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from pathlib import Path

import pytest

from ground.private_files import looser_than_owner, tighten
from kith.operator.doctor import check_data_dir, run_doctor
from tests.support.config_file import write_config
from tests.support.paths import ROOT

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")


def _modes(data: Path) -> dict[str, int]:
    found = {".": stat.S_IMODE(data.stat().st_mode)}
    for root, dirs, files in os.walk(data):
        for name in (*dirs, *files):
            path = Path(root, name)
            if not path.is_symlink():
                found[str(path.relative_to(data))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def _not_owner_only(modes: dict[str, int]) -> dict[str, str]:
    return {name: oct(mode) for name, mode in modes.items() if mode & 0o077}


async def _readline(stream: asyncio.StreamReader) -> str:
    return (await asyncio.wait_for(stream.readline(), 60)).decode()


async def test_a_running_bot_and_its_files_are_owner_only(fake_llm, tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "old").mkdir(parents=True)
    data.chmod(0o755)
    (data / "old").chmod(0o755)
    (data / "old" / "export.json").write_text("{}")
    (data / "old" / "export.json").chmod(0o644)  # an older kith's, or made under a looser umask
    cfg = write_config(tmp_path / "kith.toml", fake_llm, data)
    fake_llm.reply("Hello Ana.")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "bot.py"), "--config", str(cfg), "chat", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, cwd=str(ROOT), env=env)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(b"hi, I'm Ana\n")
        await proc.stdin.drain()
        assert (await _readline(proc.stdout)).strip() == "Hello Ana."
        running = _modes(data)  # the database is open: its write-ahead log and shared memory exist now
        assert "kith.db-wal" in running and "kith.db" in running
        assert any(name.startswith("chroma") for name in running)
        assert _not_owner_only(running) == {}
    finally:
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), 60)
    after = _modes(data)
    assert _not_owner_only(after) == {}
    assert after["."] == 0o700 and after["old"] == 0o700 and after["old/export.json"] == 0o600


def test_tighten_makes_an_existing_tree_owner_only_and_leaves_links_alone(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "chroma" / "segment").mkdir(parents=True)
    for path, mode in ((data, 0o755), (data / "chroma", 0o775), (data / "chroma" / "segment", 0o755)):
        path.chmod(mode)
    for name in ("kith.db", "kith.db-wal", "kith.db-shm", "chroma/chroma.sqlite3", "chroma/segment/data.bin"):
        (data / name).write_bytes(b"x")
        (data / name).chmod(0o644)
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("not kith's")
    outside.chmod(0o644)
    (data / "link").symlink_to(outside)
    assert len(looser_than_owner(data)) == 8

    assert tighten(data) == 8
    assert looser_than_owner(data) == []
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE((data / "chroma" / "segment" / "data.bin").stat().st_mode) == 0o600
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644  # a link's target is not the data directory's
    assert tighten(data) == 0


async def test_doctor_warns_about_files_others_can_read(fake_llm, tmp_path: Path, capsys) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / "kith.db").write_bytes(b"")
    (data / "kith.db").chmod(0o644)
    cfg = write_config(tmp_path / "kith.toml", fake_llm, data)

    assert await run_doctor(str(cfg), checks=[check_data_dir]) == 0  # a warning, not a failure
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith("warn  data directory:") and "other users" in line and "kith.db" in line

    tighten(data)
    assert await run_doctor(str(cfg), checks=[check_data_dir]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("ok    data directory:")
