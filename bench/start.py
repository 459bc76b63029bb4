"""Time from starting ``bot.py run`` to its first poll of Telegram, with the model process ready by then.

    python -m bench.start [--runs N] [--embedder SPEC]

Each run starts the real ``bot.py run`` with Telegram configured against the loopback fake Bot API (in a
process of its own, as Telegram's servers are not on kith's machine) and an instant OpenAI-compatible
model (in its own process too). It times the first ``getUpdates`` from the moment the bot's process is
spawned, then sends one DM at once and times its answer: a model process not ready by the first poll
would show here as an answer that waits for litellm to load (seconds, not milliseconds).

The first start builds the default encoder's graph into a cache made for the run and is printed apart;
the runs after it are the everyday start. Beside it, the floor no start can go under on this machine:
``import litellm`` alone in a bare interpreter, the model process's own load. Target (#34): the first
poll within 1.4 s of start, with the model process ready.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.common import fake_model_process, percentile, verdict
from bench.telegram_process import TelegramProcess, telegram_process
from ground import loop
from tests.fakes.telegram_api import FAKE_BOT_TOKEN

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 1.4
REPLY = "Hello! Nice to meet you."
CHAT = 610_001


@dataclass(frozen=True, slots=True)
class Start:
    first_poll_s: float  # spawn to the first getUpdates
    answer_ms: float  # a DM pushed at the first poll, to its answer


async def one_start(tg: TelegramProcess, config: Path, env: dict[str, str], log: Path) -> Start:
    await tg.reset()
    before = await tg.calls()
    with log.open("ab") as out:
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(ROOT / "bot.py"), "--config", str(config), "run", cwd=str(ROOT), env=env,
            stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        polled = await _first_poll(tg, before, proc)
        await tg.push([(CHAT, "hi there")])
        traffic = await tg.wait(1, timeout=120)
        answered = traffic.sends[0][2] - traffic.pushes[0][1]
        return Start(polled - started, answered * 1000)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 60)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def _first_poll(tg: TelegramProcess, before: int, proc: asyncio.subprocess.Process) -> float:
    polled = asyncio.ensure_future(tg.first("getUpdates", before))
    ended = asyncio.ensure_future(proc.wait())
    await asyncio.wait([polled, ended], return_when=asyncio.FIRST_COMPLETED)
    if not polled.done():
        polled.cancel()
        raise SystemExit(f"the bot ended before it polled (exit {proc.returncode}); see its log")
    ended.cancel()
    stamp = polled.result()
    if stamp is None:
        raise SystemExit("the bot never polled within 120 s")
    return stamp


def litellm_floor_s(collector: bool) -> float:
    """``import litellm`` alone in a bare interpreter: with the garbage collector on (the library as it comes), or
    off as the model process loads it. No start with the model process ready can be quicker than the latter."""
    code = ("import gc, os; os.environ['LITELLM_LOCAL_MODEL_COST_MAP'] = 'True'; "
            + ("" if collector else "gc.disable(); ") + "import litellm")
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.monotonic() - started


async def run(args: argparse.Namespace) -> int:
    async with fake_model_process(REPLY) as model, telegram_process() as tg:
        with tempfile.TemporaryDirectory(prefix="kith-start-") as tmp:
            config = Path(tmp) / "kith.toml"
            config.write_text(
                f'[llm]\nmodel = "openai/bench"\napi_base = "{model.url}"\n'
                f'[storage]\ndata_dir = "{Path(tmp) / "data"}"\n[memory]\nembedder = "{args.embedder}"\n'
                f"[heartbeat]\nenabled = false\n[delivery]\ndebounce_ms = 0\n"
                f'[telegram]\nbase_url = "{tg.base_url}"\npoll_timeout_s = 1\n'
                f'[policy.telegram]\ndm = "open"\n', encoding="utf-8")
            env = {k: v for k, v in os.environ.items() if not k.endswith(("_TOKEN", "_SECRET"))}
            env.pop("PYTHONDONTWRITEBYTECODE", None)  # a person's machine keeps kith's compiled modules
            env.update(XDG_CACHE_HOME=str(Path(tmp) / "cache"), TELEGRAM_BOT_TOKEN=FAKE_BOT_TOKEN, HF_HUB_OFFLINE="1")
            log = Path(tmp) / "bot.log"
            try:
                first = await one_start(tg, config, env, log)
                print(f"first start (new data directory, encoder graph built): first poll after "
                      f"{first.first_poll_s:.2f} s, a DM sent then answered in {first.answer_ms:.0f} ms", flush=True)
                # Each start beside the floors measured just then: this machine's speed drifts from minute to minute.
                starts, plain, off = [], [], []
                for _ in range(args.runs):
                    starts.append(await one_start(tg, config, env, log))
                    plain.append(litellm_floor_s(collector=True))
                    off.append(litellm_floor_s(collector=False))
            except BaseException:
                sys.stderr.write(log.read_text(encoding="utf-8", errors="replace")[-4000:])
                raise
            if args.show_log:
                sys.stderr.write(log.read_text(encoding="utf-8", errors="replace"))
    polls = [s.first_poll_s for s in starts]
    answers = [s.answer_ms for s in starts]
    p50 = percentile(polls, 50)
    print(f"later starts ({args.runs}): first poll p50={p50:.2f} s max={max(polls):.2f} s; a DM sent at the "
          f"first poll answered p50={percentile(answers, 50):.0f} ms max={max(answers):.0f} ms "
          f"(embedder {args.embedder})")
    floor = percentile(off, 50)
    print(f"floor: import litellm alone in a bare interpreter p50={percentile(plain, 50):.2f} s, with the collector "
          f"off as the model process loads it p50={floor:.2f} s; the start spends {p50 - floor:+.2f} s beyond that")
    print(f"target first poll <= {TARGET_S} s with the model process ready: {verdict(p50, TARGET_S)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--embedder", default="onnx:all-MiniLM-L6-v2")
    parser.add_argument("--show-log", action="store_true", help="print the bot's log of every start")
    return loop.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
