"""The fault suite: the real ``bot.py run`` under crashes and faults, against the loopback fakes.

    .venv/bin/python -m bench.faults [--kills 30] [--seed S] [--chats 12] [--rate 5] [--deadline 240]
        [--platforms telegram,discord,slack] [--only crash,model,platform,network,disk,odd] [--json FILE] [--logs DIR]

Each run starts a fresh bot (its model process included) on a data directory of its own and sends it
messages, each with a unique token the fake model echoes back, then counts every message as answered once,
doubled, answered with an honest failure text, or lost (see ``tests/support/faults.py``), and the bot's
crashes. One table row per platform and fault:

* crash loop: ``--kills`` SIGKILLs of the bot and its model process at random moments 4-25 s apart (seeded:
  the seed is printed; the model process alone is killed once more in about a third of the gaps) under
  ``--rate`` messages a second across ``--chats`` DM chats, then a clean run until every message is
  answered or ``--deadline`` passes (every platform);
* the model answering 500, hanging past ``[llm] timeout_s``, or down, for a window (Telegram);
* the platform answering 429 or 500 to sends (every platform); connections reset as the platform answers,
  and answers slower than kith's HTTP timeout (Telegram and Slack; Discord's sends and gateway go through
  the same proxy and are tried too);
* the disk filling up during replies' commits: a 16 MB tmpfs as the data directory (needs root and
  ``mount -t tmpfs``; otherwise the row says why it was skipped) (Telegram);
* odd and malformed updates: lone surrogates, odd Unicode, an update_id far above the others, updates
  missing fields (Telegram).

Target: 0 lost, 0 crashes, doubles only inside the documented window (the "in window" column: doubles
whose outbox row the bot logged as ``maybe doubled``). Everything listens on 127.0.0.1 only; a full run
takes about 25 minutes on 2 cores, most of it the crash loops.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import time
from pathlib import Path

from ground import loop
from tests.support import faults as f

KILL_GAP_S = (4.0, 25.0)
MODEL_WINDOW_S = 12.0
PLATFORM_FAILURES = 12  # sends refused in a row
DROP_BURSTS = 4
SLOW_DELAY_S = 12.0  # past kith's 10 s HTTP timeout for a send
SLOW_WINDOW_S = 6.0
DISK_FULL_S = 24.0
KINDS = ("crash", "model", "platform", "network", "disk", "odd")


def plan(args: argparse.Namespace) -> list[tuple[str, str, f.Scenario | str]]:
    """(platform, kind, scenario or the reason it is skipped), in the order they run."""
    runs: list[tuple[str, str, f.Scenario | str]] = []
    for platform in args.platforms:
        if "crash" in args.only:
            runs.append((platform, "crash", f.crash_loop(args.kills, KILL_GAP_S, args.seed)))
        if "model" in args.only and platform == "telegram":
            for kind in ("500", "hang", "down"):
                runs.append((platform, "model", f.model_window(kind, MODEL_WINDOW_S)))
        if "platform" in args.only:
            for status in (429, 500):
                runs.append((platform, "platform", f.platform_failures(status, PLATFORM_FAILURES)))
        if "network" in args.only:
            runs.append((platform, "network", f.dropped_connections(DROP_BURSTS)))
            runs.append((platform, "network", f.slow_answers(SLOW_DELAY_S, SLOW_WINDOW_S)))
        if "disk" in args.only and platform == "telegram":
            runs.append((platform, "disk", f.disk_full(DISK_FULL_S)))
        if "odd" in args.only and platform == "telegram":
            runs.append((platform, "odd", f.odd_updates()))
    return runs


async def run_all(args: argparse.Namespace) -> list[f.Tally]:
    tallies: list[f.Tally] = []
    options = f.RunOptions(chats=args.chats, rate=args.rate, answer_deadline_s=args.deadline, keep_logs=args.logs)
    for platform, kind, scenario in plan(args):
        started = time.monotonic()
        if kind == "disk":
            tally = await _disk(platform, scenario, options)
        else:
            tally = await f.run_one(platform, scenario, options)  # type: ignore[arg-type]
        print(f"  {platform:8} {tally.fault}: {tally.tried} tried, {tally.lost} lost, {tally.doubled} doubled, "
              f"{tally.crashed} crashes ({time.monotonic() - started:.0f} s)", flush=True)
        tallies.append(tally)
    return tallies


async def _disk(platform: str, scenario: f.Scenario | str, options: f.RunOptions) -> f.Tally:
    try:
        with f.small_tmpfs() as data_dir:
            return await f.run_one(platform, scenario, dataclasses.replace(options, data_dir=data_dir))  # type: ignore[arg-type]
    except OSError as exc:
        tally = f.Tally(platform, "disk full: skipped")
        tally.notes.append(str(exc))
        return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=30, help="SIGKILLs per crash loop")
    parser.add_argument("--seed", type=int, default=None, help="the crash loop's random seed (printed)")
    parser.add_argument("--chats", type=int, default=12)
    parser.add_argument("--rate", type=float, default=5.0, help="messages a second under load")
    parser.add_argument("--platforms", default=",".join(f.PLATFORMS))
    parser.add_argument("--only", default=",".join(KINDS), help=f"fault kinds to run, of {','.join(KINDS)}")
    parser.add_argument("--deadline", type=float, default=240.0,
                        help="seconds after the faults for every message to be answered")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    parser.add_argument("--logs", type=Path, default=None, help="keep the bot's logs here, a directory per row")
    args = parser.parse_args()
    args.platforms = [p for p in args.platforms.split(",") if p]
    args.only = [k for k in args.only.split(",") if k]
    if bad := [p for p in args.platforms if p not in f.PLATFORMS] + [k for k in args.only if k not in KINDS]:
        parser.error(f"unknown: {', '.join(bad)}")
    if args.kills < 1 or args.chats < 1 or args.rate <= 0:
        parser.error("--kills, --chats and --rate must be positive")
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1_000_000)
    print(f"fault suite: seed {args.seed}, {args.kills} kills per crash loop, {args.rate:g} messages/s across "
          f"{args.chats} chats, platforms {', '.join(args.platforms)}", flush=True)
    tallies = loop.run(run_all(args))
    print()
    print(f.table(tallies))
    if args.json is not None:
        args.json.write_text(f.to_json(tallies), encoding="utf-8")
    sys.exit(0 if all(t.lost == 0 and t.crashed == 0 and t.doubled <= t.doubled_in_window for t in tallies) else 1)


if __name__ == "__main__":
    main()
