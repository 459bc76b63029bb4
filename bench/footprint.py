"""kith's memory footprint: the real ``bot.py run`` against the loopback fakes, and each heavy import alone.

    .venv/bin/python -m bench.footprint [--platforms telegram,discord,slack] [--dms 40] [--chats 10]
        [--embedders none,onnx:all-MiniLM-L6-v2] [--idle 8] [--no-imports] [--no-bot] [--env KEY=VALUE ...]

For each embedder, a fresh bot is started as a person starts it (``bot.py --config … run``; through
``tests.support.fault_bot`` when Discord is configured, the same ``main`` with discord.py pointed at its fake)
with every platform of ``--platforms`` configured against its loopback fake (in this process) and an echoing
fake model (in this process) that answers capture's requests with one fact the person said, so capture, the
merge gate and the store all run. Each platform gets ``--dms`` DMs from ``--chats`` people, each person's next
message sent once the last was answered. Then the bot is left idle (``--idle`` seconds with no model request) and
each of its processes is read from /proc: RSS, PSS and USS (``smaps_rollup``: PSS splits shared pages among the
processes that map them; USS is the private part), its peak RSS (``VmHWM``), and its RSS once every platform
had connected, before any DM ("at start"). "together" sums them.

Then each heavy import alone, in a bare interpreter of its own (``python -c "import X"``, then ``VmRSS``): the
floor each library puts under kith's processes, and what it adds to the bare interpreter.

``--env KEY=VALUE`` sets an environment variable for the bot (e.g. ``MALLOC_ARENA_MAX=2``), to measure a change
before making it. Targets (#34), every platform configured: together <= 350 MB with the default embedder and
<= 250 MB with none (RSS; PSS is printed beside it); the peak under ``bench.telegram_e2e`` <= 400 MB (that
benchmark prints its own).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ground import loop
from tests.fakes.openai_api import FakeOpenAI, Scripted
from tests.support.faults import Platform, make_platform, until
from tests.support.paths import ROOT

DEFAULT_EMBEDDER = "onnx:all-MiniLM-L6-v2"
TARGETS_MB = {"none": 250.0, DEFAULT_EMBEDDER: 350.0}
CAPTURE_SYSTEM = "The transcript and the stored memories"  # how capture's system message begins (persona)
TOKEN = re.compile(r"\bfp\d{5}\b")
# What people say: each a fact capture keeps (the fake model quotes it as the evidence).
FACTS = (
    "I work as a nurse at the city hospital",
    "my sister Ola lives in Gdansk with her two cats",
    "I am learning to play the cello this year",
    "my dog Luna is afraid of thunder",
    "I moved to Krakow last spring for a new job",
    "I am allergic to penicillin",
    "I run every Sunday morning with my friend Tom",
    "my favourite food is pierogi with cheese",
    "I want to visit Japan next autumn",
    "my daughter Mia starts school in September",
)
STOP_TIMEOUT_S = 30.0


# --- reading a process ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Memory:
    rss: float  # MB
    pss: float
    uss: float
    peak: float  # VmHWM

    def __add__(self, other: Memory) -> Memory:
        return Memory(self.rss + other.rss, self.pss + other.pss, self.uss + other.uss, self.peak + other.peak)


def read_memory(pid: int) -> Memory:
    """A live process's memory from /proc, in MB (zeros where it cannot be read)."""
    fields: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text("ascii").splitlines()[1:]:
            key, _, value = line.partition(":")
            fields[key] = int(value.split()[0]) / 1024
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text("ascii").splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, _, value = line.partition(":")
                fields[key] = int(value.split()[0]) / 1024
    return Memory(fields.get("VmRSS", fields.get("Rss", 0.0)), fields.get("Pss", 0.0),
                  fields.get("Private_Clean", 0.0) + fields.get("Private_Dirty", 0.0), fields.get("VmHWM", 0.0))


def descendants(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                found += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return found + [d for child in found for d in descendants(child)]


def process_name(pid: int) -> str:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return f"pid {pid}"
    words = [w.decode(errors="replace") for w in cmdline if w]
    if "llm.worker" in words:
        return "model process (llm.worker)"
    return " ".join(Path(w).name if i == 0 else w for i, w in enumerate(words[:4]))


# --- the bot under a load -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BotFigures:
    embedder: str
    platforms: tuple[str, ...]
    processes: list[tuple[str, Memory]]  # the bot first
    at_start: dict[str, float]  # each process's RSS once every platform connected, before any DM
    answered: int
    sent: int
    captured: int  # capture requests the fake model answered
    start_s: float  # start until every platform connected

    @property
    def together(self) -> Memory:
        total = Memory(0.0, 0.0, 0.0, 0.0)
        for _name, memory in self.processes:
            total = total + memory
        return total


class _Model:
    """The fake model: an echo for replies, and for capture one fact the person said (quoted from their line)."""

    def __init__(self, said: dict[str, str]) -> None:
        self.fake = FakeOpenAI()
        self.said = said  # token -> the fact in that message
        self.captures = 0
        self.last_request = time.monotonic()
        self.fake.route = self._route

    def _route(self, request: dict[str, Any]) -> Scripted | None:
        self.last_request = time.monotonic()
        messages = request.get("messages") or []
        if not messages or not str(messages[0].get("content", "")).startswith(CAPTURE_SYSTEM):
            return None
        self.captures += 1
        shown = " ".join(str(m.get("content", "")) for m in messages[1:])
        facts = [self.said[t] for t in TOKEN.findall(shown) if t in self.said]
        if not facts:
            return Scripted(text=json.dumps({"memories": []}))
        fact = facts[-1]
        return Scripted(text=json.dumps({"memories": [
            {"kind": "fact", "text": f"PERSON says: {fact}", "evidence": [fact], "importance": 0.7,
             "horizon": "lasting"}]}))


def _config(root: Path, model_url: str, embedder: str, platforms: list[Platform]) -> Path:
    path = root / "kith.toml"
    path.write_text(
        f'[llm]\nmodel = "openai/fake-model"\napi_base = "{model_url}"\ntimeout_s = 10.0\nmax_retries = 0\n'
        f'[storage]\ndata_dir = "{root / "data"}"\n[memory]\nembedder = "{embedder}"\n'
        f'[heartbeat]\nenabled = false\n[delivery]\ndebounce_ms = 0\n'
        + "".join(p.config() for p in platforms), encoding="utf-8")
    return path


async def measure_bot(embedder: str, names: list[str], dms: int, chats: int, idle_s: float,
                      extra_env: dict[str, str]) -> BotFigures:
    said: dict[str, str] = {}
    model = _Model(said)
    platforms = [make_platform(name) for name in names]
    await model.fake.start()
    for platform in platforms:
        await platform.start()
    root = Path(tempfile.mkdtemp(prefix="kith-footprint-"))
    proc: asyncio.subprocess.Process | None = None
    try:
        config = _config(root, model.fake.base_url, embedder, platforms)
        env = {k: v for k, v in os.environ.items() if not k.endswith(("_TOKEN", "_SECRET"))}
        for platform in platforms:
            env.update(platform.env())
        env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1", **extra_env)
        # bot.py itself, unless Discord is configured: its fake needs discord.py pointed at it (fault_bot).
        entry = ["-m", "tests.support.fault_bot"] if "discord" in names else [str(ROOT / "bot.py")]
        log = (root / "bot.log").open("wb")
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, *entry, "--config", str(config), "run", cwd=str(ROOT), stdin=subprocess.DEVNULL,
            stdout=log, stderr=log, env=env)
        pump = asyncio.create_task(_pump(platforms))
        try:
            for platform in platforms:
                await until(platform.connected, 120, f"the bot never connected to {platform.name}")
            start_s = time.monotonic() - started
            await asyncio.sleep(2)  # the start's own work (the lemma dictionaries, the model process) settles
            at_start = {_name(proc.pid, pid): read_memory(pid).rss for pid in [proc.pid, *descendants(proc.pid)]}
            serial = 0
            sent: list[str] = []

            async def person(platform: Platform, chat: str, count: int) -> None:
                nonlocal serial
                for _ in range(count):
                    serial += 1
                    token = f"fp{serial:05d}"
                    fact = FACTS[serial % len(FACTS)]
                    said[token] = fact
                    sent.append(token)
                    platform.push(chat, f"{fact} ({token})")
                    await until(lambda t=token: any(t in text for _c, text in platform.outgoing()), 120,
                                f"no answer to {token} on {platform.name}")

            people = []
            for platform in platforms:
                ids = platform.chats(chats)
                people += [person(platform, chat, dms // chats + (i < dms % chats)) for i, chat in enumerate(ids)]
            await asyncio.gather(*people)
            answered = sum(1 for t in sent if any(t in text for p in platforms for _c, text in p.outgoing()))
            # Idle: no model request for idle_s (capture has run its course), then read every process.
            await until(lambda: time.monotonic() - model.last_request >= idle_s, 300, "the bot never went idle")
            pids = [proc.pid, *descendants(proc.pid)]
            processes = [(_name(proc.pid, pid), read_memory(pid)) for pid in pids]
        finally:
            pump.cancel()
            await asyncio.gather(pump, return_exceptions=True)
        if proc.returncode is not None:
            raise RuntimeError(f"the bot ended early; its log: {root / 'bot.log'}")
        return BotFigures(embedder, tuple(names), processes, at_start, answered, len(sent), model.captures, start_s)
    finally:
        if proc is not None and proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        for platform in platforms:
            await platform.stop()
        await model.fake.stop()
        if proc is not None and proc.returncode in (0, -15):
            shutil.rmtree(root, ignore_errors=True)


def _name(bot: int, pid: int) -> str:
    return "bot (bot.py run)" if pid == bot else process_name(pid)


async def _pump(platforms: list[Platform]) -> None:
    while True:
        for platform in platforms:
            platform.pump()
        await asyncio.sleep(0.05)


# --- each import alone --------------------------------------------------------------------------------------
_VMRSS = ("import gc; gc.collect(); print([int(l.split()[1]) for l in open('/proc/self/status') "
          "if l.startswith('VmRSS')][0])")
_LITELLM = "from llm.client import import_litellm; import_litellm()"
_ENCODER = ("import asyncio; from ground.config import Settings; from memory.encoders import open_embedder; "
            "e, s = asyncio.run(open_embedder(Settings())); assert s.ready, s.line()")
_LEMMAS = "from memory.core import read_lemma_dictionaries; read_lemma_dictionaries()"
IMPORTS: tuple[tuple[str, str], ...] = (
    ("bare interpreter", "pass"),
    ("litellm (llm.client.import_litellm)", _LITELLM),
    ("the model process's imports (llm.worker + litellm)", f"import llm.worker; {_LITELLM}"),
    ("chromadb alone", "import chromadb"),
    ("chromadb as kith opens it (memory.store.chroma.make_client, embedded)",
     "import pathlib, tempfile; from ground.config import MemorySettings; from memory.store.chroma import make_client; "
     "make_client(MemorySettings(), pathlib.Path(tempfile.mkdtemp()))"),
    ("onnxruntime", "import onnxruntime"),
    ("the default encoder loaded (onnx:all-MiniLM-L6-v2, one text embedded)", _ENCODER),
    ("python-telegram-bot (channels.telegram.channel)", "import channels.telegram.channel"),
    ("discord.py (channels.discord.channel)", "import channels.discord.channel"),
    ("slack_bolt (channels.slack.channel)", "import channels.slack.channel"),
    ("simplemma, kith's reading of its dictionaries (capture on)", _LEMMAS),
    ("sqlalchemy", "import sqlalchemy"),
    ("numpy", "import numpy"),
    ("kith's wiring (kith.app.wiring: every part, before Chroma)", "import kith.app.wiring"),
    ("the memory store (memory.store: Chroma's client)", "import memory.store"),
)


def import_rss_mb(code: str) -> float:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", f"{code}\n{_VMRSS}"], cwd=str(ROOT), env=env, check=True,
                         capture_output=True, text=True, timeout=300).stdout
    return int(out.split()[-1]) / 1024


# --- the report ---------------------------------------------------------------------------------------------
def print_bot(figures: BotFigures) -> None:
    target = TARGETS_MB.get(figures.embedder)
    print(f"\nembedder = {figures.embedder!r}, platforms: {', '.join(figures.platforms)}; {figures.answered} of "
          f"{figures.sent} DMs answered, {figures.captured} capture requests; connected {figures.start_s:.1f} s "
          "after start; read idle")
    print(f"  {'process':<44} {'RSS MB':>8} {'PSS MB':>8} {'USS MB':>8} {'peak MB':>8} {'at start':>9}")
    at_start = sum(figures.at_start.values())
    for name, m in [*figures.processes, ("together", figures.together)]:
        start = at_start if name == "together" else figures.at_start.get(name, float("nan"))
        print(f"  {name[:44]:<44} {m.rss:>8.0f} {m.pss:>8.0f} {m.uss:>8.0f} {m.peak:>8.0f} {start:>9.0f}")
    if target is not None:
        rss = figures.together.rss
        print(f"  target together <= {target:.0f} MB RSS: {'meets target' if rss <= target else 'MISSES target'} "
              f"({rss:.0f} MB)")


def print_imports() -> None:
    print("\neach import alone in a bare interpreter (VmRSS after it)")
    print(f"  {'import':<74} {'RSS MB':>7} {'added':>7}")
    bare = 0.0
    for name, code in IMPORTS:
        try:
            rss = import_rss_mb(code)
        except subprocess.CalledProcessError as exc:
            print(f"  {name:<74} failed: {(exc.stderr or '').strip().splitlines()[-1:]}")
            continue
        bare = bare or rss
        print(f"  {name:<74} {rss:>7.0f} {rss - bare:>+7.0f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--platforms", default="telegram,discord,slack")
    parser.add_argument("--embedders", default=f"none,{DEFAULT_EMBEDDER}")
    parser.add_argument("--dms", type=int, default=40, help="DMs sent on each platform")
    parser.add_argument("--chats", type=int, default=10, help="people writing them, on each platform")
    parser.add_argument("--idle", type=float, default=8.0, help="seconds with no model request before reading")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="set for the bot")
    parser.add_argument("--no-imports", action="store_true", help="skip the per-import table")
    parser.add_argument("--no-bot", action="store_true", help="only the per-import table")
    args = parser.parse_args()
    names = [p.strip() for p in args.platforms.split(",") if p.strip()]
    extra_env = dict(item.split("=", 1) for item in args.env)
    if not args.no_bot:
        for embedder in [e.strip() for e in args.embedders.split(",") if e.strip()]:
            print_bot(loop.run(measure_bot(embedder, names, args.dms, args.chats, args.idle, extra_env)))
    if not args.no_imports:
        print_imports()


if __name__ == "__main__":
    main()
