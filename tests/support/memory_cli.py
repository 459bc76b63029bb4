"""``bot.py memory …`` as bot.py runs it with no bot running, for tests that read what the operator reads."""

from __future__ import annotations

import argparse
import io

from ground.config import Settings
from kith.control.dispatch import run_command
from kith.operator.memory_cli import add_memory_parser


def operator(settings: Settings, *argv: str) -> tuple[int, str]:
    """``bot.py memory ARGV…``: its exit code and standard output."""
    parser = argparse.ArgumentParser(prog="bot.py")
    add_memory_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["memory", *argv])
    out = io.StringIO()
    code = run_command(settings, f"memory.{args.memory_command}", args, out=out, stdin=io.StringIO(""))
    return code, out.getvalue()
