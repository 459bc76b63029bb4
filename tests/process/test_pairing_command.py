"""``bot.py pairing`` as the owner runs it: a subprocess, on a config with no platform."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT


def test_pairing_command_line(tmp_path: Path) -> None:
    cfg = tmp_path / "kith.toml"
    cfg.write_text(f'[storage]\ndata_dir = "{tmp_path / "data"}"\n')
    result = subprocess.run([sys.executable, str(ROOT / "bot.py"), "--config", str(cfg), "pairing", "list"],
                            capture_output=True, text=True, cwd=ROOT, env=os.environ.copy(), timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:2] == ["pending: 0", "approved: 0"]
    result = subprocess.run([sys.executable, str(ROOT / "bot.py"), "--config", str(cfg), "pairing", "approve",
                             "ABCDEFGH"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 1 and "no pending request has this code" in result.stdout
