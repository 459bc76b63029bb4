"""Time from starting kith to its first reply, with an instant model: what a newcomer waits for.

Starts ``bot.py chat`` (the terminal chat, as ``scripts/run`` does with no platform token), types
one message the moment the process exists, and times the first line of the reply. An
OpenAI-compatible model that answers at once runs in its own process, so the time is kith's own:
interpreter start, imports, opening the stores, the model process, the turn. The first start
builds the default encoder's graph into a cache made for the run; the runs after it are the
everyday start. Target: the first reply within 3 s of start on an idle machine.

    python -m bench.first_reply [--runs N] [--embedder SPEC]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common import fake_model_process, percentile, verdict
from ground import loop

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 3.0
REPLY = "Hello! Nice to meet you."


async def one_start(config: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "bot.py"), "--config", str(config), "chat", cwd=str(ROOT), env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"hi there\n")
    await proc.stdin.drain()
    line = await asyncio.wait_for(proc.stdout.readline(), 120)
    elapsed = time.perf_counter() - started
    proc.stdin.close()
    await asyncio.wait_for(proc.wait(), 60)
    if line.decode().strip() != REPLY:
        raise SystemExit(f"unexpected first line: {line.decode().strip()!r}")
    return elapsed


async def run(args: argparse.Namespace) -> int:
    async with fake_model_process(REPLY) as model:
        with tempfile.TemporaryDirectory(prefix="kith-first-reply-") as tmp:
            config = Path(tmp) / "kith.toml"
            config.write_text(
                f'[llm]\nmodel = "openai/bench"\napi_base = "{model.url}"\n'
                f'[storage]\ndata_dir = "{Path(tmp) / "data"}"\n[memory]\nembedder = "{args.embedder}"\n',
                encoding="utf-8")
            env = {**os.environ, "XDG_CACHE_HOME": str(Path(tmp) / "cache")}
            for name in ("TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"):
                env.pop(name, None)
            first = await one_start(config, env)
            print(f"first start (new data directory, encoder graph built): first reply after {first:.2f} s",
                  flush=True)
            times = [await one_start(config, env) for _ in range(args.runs)]
    p50 = percentile(times, 50)
    print(f"later starts ({args.runs}): first reply p50={p50:.2f} s max={max(times):.2f} s "
          f"target <= {TARGET_S:.0f} s: {verdict(p50, TARGET_S)}  (embedder {args.embedder})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--embedder", default="onnx:all-MiniLM-L6-v2")
    return loop.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
