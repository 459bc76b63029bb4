"""Operator commands: run a scheduled job once, now.

    bot.py consolidate --now           sweep the days not consolidated yet (a progress bar on stderr)
    bot.py heartbeat --now [--any-hour] one heartbeat tick (active hours apply unless --any-hour)
    bot.py decay --now                  one decay pass
    bot.py memory undo-decay            put back what the last decay pass retired (empty passes skipped)

Each body runs in the running bot, over its own heartbeat, memory and delivery worker, or in this
process holding the data directory's lock when no bot runs (:mod:`kith.control`). A message a
``heartbeat --now`` writes is in the durable outbox: the running bot sends it at once, a stopped one
at its next start (a model failure here is reported, not retried: retries belong to the running
bot's scheduler). Nothing heavy is imported until a body runs, so ``bot.py --help`` stays fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ground.wording import counted
from kith.operator.progress import ProgressShown

if TYPE_CHECKING:
    from kith.control.parts import Console, Parts



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


# --- the bodies, run by the bot or by a command holding the lock (kith.control.operations) ----------
def _waiting(what: str, console: Console) -> Callable[[], None]:
    """One line, said by the heartbeat just before this run waits behind the bot's own run of the same job (or
    one queued for it): this one then finds its work done (the counts that follow are this run's, not the
    bot's). Said when it is known to wait, not from a look taken before: a run queued behind one that just
    ended waits as well."""
    def say() -> None:
        console.err.write(f"kith: the bot's own {what} is under way; this one runs when it has finished\n")

    return say


async def consolidate_body(parts: Parts, _args: argparse.Namespace, console: Console) -> int:
    heartbeat = await parts.heartbeat()
    progress = ProgressShown(console.err, unit="chunks")
    report = await heartbeat.consolidate(progress.update, waiting=_waiting("consolidation", console))
    progress.finish()
    if report.days == 0:
        console.out.write("nothing to consolidate: only days before today are folded into memory, and none is "
                          f"waiting (today's conversation is folded after {parts.settings.memory.consolidation_hour}"
                          f":00 tomorrow); {report.notes_pruned} old notes pruned\n")
        return 0
    console.out.write(f"consolidated {report.days_completed}/{report.days} days, "
                      f"{counted(report.chunks_done, 'chunk', 'chunks')} ({report.chars} characters), "
                      f"{counted(report.calls, 'model call', 'model calls')}; memories: "
                      f"{report.outcomes.get('new', 0)} new, {report.outcomes.get('merged', 0)} merged, "
                      f"{report.outcomes.get('conflict', 0)} conflicts; {report.notes_pruned} old notes pruned\n")
    if report.interrupted:
        console.out.write("stopped early: the model could not be reached; the next run resumes where this one "
                          "stopped\n")
        return 1
    return 0


async def heartbeat_body(parts: Parts, args: argparse.Namespace, console: Console) -> int:
    from heartbeat.check_ins import count_outcomes
    from heartbeat.service import QUESTIONS_ASKED

    heartbeat = await parts.heartbeat()
    report = await heartbeat.tick(any_hour=bool(args.any_hour), waiting=_waiting("heartbeat run", console))
    out = console.out
    if report.quiet:
        out.write("outside [heartbeat] active_hours (or the heartbeat is disabled): nothing done; --any-hour "
                  "overrides\n")
        return 0
    out.write(f"{counted(report.due_people, 'person', 'people')} with something due, "
              f"{counted(report.llm_calls, 'model call', 'model calls')}: "
              f"{count_outcomes(report.outcomes)}\n")
    if report.outcomes.get("posted") or report.outcomes.get(QUESTIONS_ASKED):
        when = ("the bot is sending them now" if parts.live
                else "the bot sends them when it next starts")
        out.write(f"messages are in the outbox: {when}\n")
    return 1 if report.outcomes.get("failed") else 0


async def decay_body(parts: Parts, _args: argparse.Namespace, console: Console) -> int:
    heartbeat = await parts.heartbeat()
    report = await heartbeat.decay(waiting=_waiting("decay pass", console))
    kept = ", ".join(f"{k} {v}" for k, v in sorted(report.kept.items())) or "none"
    console.out.write(f"decay run {report.run_id}: retired {report.retired_total} "
                      f"({', '.join(f'{k} {v}' for k, v in sorted(report.retired.items())) or 'none'}); "
                      f"kept: {kept}; undo with: scripts/run memory undo-decay\n")
    return 0


async def undo_decay_body(parts: Parts, _args: argparse.Namespace, console: Console) -> int:
    heartbeat = await parts.heartbeat()
    # Behind the bot's own pass it then undoes that pass, which is the last one: the line says why.
    report = await heartbeat.undo_decay(waiting=_waiting("decay pass", console))
    if report.run_id is None:
        # Not a failure: nothing retired is waiting to be put back (a script running it after every decay
        # must not stop on a pass that retired nothing).
        console.out.write("no decay run to undo\n")
        return 0
    console.out.write(f"undid decay run {report.run_id}: restored {report.restored}; "
                      f"{report.changed_since} changed since and left as they are\n")
    return 0
