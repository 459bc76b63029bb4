"""Where the repository is, for tests that read its files or start ``bot.py`` in it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEST_DATA = ROOT / "tests" / "data"  # reference outputs the tests compare against
