"""Operator commands: run a scheduled job once, now.

    bot.py consolidate --now           sweep the days not consolidated yet (a progress bar on stderr)
    bot.py heartbeat --now [--any-hour] one heartbeat tick (active hours apply unless --any-hour)
    bot.py decay --now                  one decay pass
    bot.py memory undo-decay            put back what the last decay pass retired

They open their own database, model client and memory store and close them after. A message a
``heartbeat --now`` writes is in the durable outbox: a running bot delivers it at its next outbox
sweep, a stopped one at its next start (a model failure here is reported, not retried: retries
belong to the running bot's scheduler).
Nothing heavy is imported until a command runs, so ``bot.py --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TextIO

from core import loop
from core.config import Settings

if TYPE_CHECKING:
    from heartbeat.consolidation import ConsolidationReport
    from heartbeat.decay import DecayReport, UndoReport
    from heartbeat.service import Heartbeat
    from heartbeat.turns import TickReport

BAR_WIDTH = 30


def add_consolidate_parser(subparsers: Any) -> argparse.ArgumentParser:
    text = "consolidate past days' transcripts into memory now (the nightly job, run once)"
    parser: argparse.ArgumentParser = subparsers.add_parser("consolidate", help=text, description=text)
    parser.add_argument("--now", action="store_true", required=True, help="run it now")
    return parser


def add_heartbeat_parser(subparsers: Any) -> argparse.ArgumentParser:
    text = "run one heartbeat tick now: a short message to each person with something due"
    parser: argparse.ArgumentParser = subparsers.add_parser("heartbeat", help=text, description=text)
    parser.add_argument("--now", action="store_true", required=True, help="run it now")
    parser.add_argument("--any-hour", action="store_true", help="ignore [heartbeat] active_hours this once")
    return parser


def add_decay_parser(subparsers: Any) -> argparse.ArgumentParser:
    text = "retire lapsed and stale memories now (the weekly job, run once; memory undo-decay reverses it)"
    parser: argparse.ArgumentParser = subparsers.add_parser("decay", help=text, description=text)
    parser.add_argument("--now", action="store_true", required=True, help="run it now")
    return parser


def add_undo_decay_action(memory_actions: Any) -> argparse.ArgumentParser:
    """``memory undo-decay``: add to the ``memory`` command's actions (it names no person)."""
    text = "put back exactly the memories the last decay pass retired (unless changed since)"
    parser: argparse.ArgumentParser = memory_actions.add_parser("undo-decay", help=text, description=text)
    return parser


class ProgressBar:
    """``consolidating [#####.....] 3/10 chunks`` on one line of ``out``."""

    def __init__(self, out: TextIO, label: str = "consolidating") -> None:
        self.out = out
        self.label = label

    def __call__(self, done: int, total: int) -> None:
        filled = BAR_WIDTH if total == 0 else BAR_WIDTH * done // total
        self.out.write(f"\r{self.label} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total} chunks")
        if done >= total:
            self.out.write("\n")
        self.out.flush()


@asynccontextmanager
async def opened(settings: Settings) -> AsyncIterator[Heartbeat]:
    from core.app import open_database
    from core.types import utcnow
    from heartbeat.schema import ensure_tables
    from heartbeat.service import build_heartbeat
    from memory.service import MemoryService
    from persona.llm import LLMClient

    db = open_database(settings)
    ensure_tables(db)
    try:
        llm = LLMClient(settings.llm)
        memory = await MemoryService.open(settings, db, llm, announce=False)
        try:
            yield build_heartbeat(settings=settings, db=db, llm=llm, memory=memory, clock=utcnow)
        finally:
            await memory.close()
    finally:
        db.close()


async def consolidate_now(settings: Settings, *, err: TextIO | None = None) -> ConsolidationReport:
    async with opened(settings) as heartbeat:
        return await heartbeat.consolidate(ProgressBar(err or sys.stderr))


async def heartbeat_now(settings: Settings, *, any_hour: bool = False) -> TickReport:
    async with opened(settings) as heartbeat:
        return await heartbeat.tick(any_hour=any_hour)


async def decay_now(settings: Settings) -> DecayReport:
    async with opened(settings) as heartbeat:
        return await heartbeat.decay()


async def undo_decay(settings: Settings) -> UndoReport:
    async with opened(settings) as heartbeat:
        return await heartbeat.undo_decay()


# --- the handlers bot.py calls; each returns the exit code -----------------------------------------
def run_consolidate(settings: Settings, _args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    report = loop.run(consolidate_now(settings))
    out.write(f"consolidated {report.days_completed}/{report.days} days, {report.chunks_done} chunks "
              f"({report.chars} characters), {report.calls} model calls; memories: "
              f"{report.outcomes.get('new', 0)} new, {report.outcomes.get('merged', 0)} merged, "
              f"{report.outcomes.get('conflict', 0)} conflicts; {report.notes_pruned} old notes pruned\n")
    if report.interrupted:
        out.write("stopped early: the model could not be reached; the next run resumes where this one stopped\n")
        return 1
    return 0


def run_heartbeat(settings: Settings, args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    from heartbeat.turns import count_outcomes

    out = out or sys.stdout
    report = loop.run(heartbeat_now(settings, any_hour=bool(getattr(args, "any_hour", False))))
    if report.quiet:
        out.write("outside [heartbeat] active_hours (or the heartbeat is disabled): nothing done; --any-hour "
                  "overrides\n")
        return 0
    out.write(f"{report.due_people} people with something due, {report.llm_calls} model calls: "
              f"{count_outcomes(report.outcomes)}\n")
    if report.outcomes.get("posted"):
        sweep_s = settings.delivery.outbox_sweep_s
        when = (f"a running bot sends them within {sweep_s:g} s, a stopped one at its next start" if sweep_s > 0
                else "the bot sends them at its next start")
        out.write(f"messages are in the outbox: {when}\n")
    return 1 if report.outcomes.get("failed") else 0


def run_decay(settings: Settings, _args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    report = loop.run(decay_now(settings))
    kept = ", ".join(f"{k} {v}" for k, v in sorted(report.kept.items())) or "none"
    out.write(f"decay run {report.run_id}: retired {report.retired_total} "
              f"({', '.join(f'{k} {v}' for k, v in sorted(report.retired.items())) or 'none'}); kept: {kept}; "
              f"undo with: bot.py memory undo-decay\n")
    return 0


def run_undo_decay(settings: Settings, _args: argparse.Namespace | None = None, *, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    report = loop.run(undo_decay(settings))
    if report.run_id is None:
        out.write("no decay run to undo\n")
        return 1
    out.write(f"undid decay run {report.run_id}: restored {report.restored}; "
              f"{report.changed_since} changed since and left as they are\n")
    return 0
