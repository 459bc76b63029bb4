"""Replies that stream on Telegram (issue #34): first visible text, the CPU a stream costs, and faults.

    .venv/bin/python -m bench.streaming [--replies 40] [--rate 30] [--chunk-chars 8] [--rounds 2]
        [--fault-chats 60] [--kills 5] [--quick]

kith runs for real: ``bot.py run`` (its model process included) with a config pointing at two fakes,
a fake OpenAI-compatible model in a process of its own that streams every reply at a fixed rate
(``--chunk-chars`` characters a chunk, ``--rate`` chunks a second) and the loopback fake Bot API with its
message drafts, which runs **in this benchmark's process** (its CPU is neither kith's nor the model's; kith's
CPU is read from /proc for the bot process and its children). Every person's message carries a token the
model puts first in its reply, so each reply, draft and model stream is matched to the message it answers.
Nothing is asserted; it prints figures and a verdict per target:

1. **First visible text**: for ``--replies`` messages from distinct DMs, the time from the model writing a
   reply's first content chunk (stamped in the model's process) to the fake Bot API accepting that chat's
   first draft (stamped in this one; both ``time.monotonic()``, one machine clock). Target: p95 <= 300 ms.
2. **CPU**: kith's CPU per reply (the bot process and its model process) for the same replies at the same
   pace, streamed (``[delivery] stream = ["telegram"]``) and whole (``stream = []``; the model then answers
   unstreamed after the time the stream would have taken), ``--rounds`` times each, alternating. Target: a
   streamed reply costs at most 20% more.
3. **Faults**: ``--fault-chats`` DMs, one message each, while 429s are injected on sendMessageDraft and on
   sendMessage (retry_after short, 1 s, and long, past ``stream_give_up_s``) and the bot is SIGKILLed
   ``--kills`` times while a reply is streaming (its model process with it), started again each time.
   Once every chat has its reply (or ``--deadline`` passed): duplicates (chats with more than one final
   message), lost (chats with none), and chats left with a live draft, at once and after 30 s of the fake's
   clock. Target: 0 duplicates and 0 lost.

``--quick`` runs a small version of each part (under a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import percentile, process_cpu_s, verdict
from bench.footprint import descendants
from ground import loop
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi

ROOT = Path(__file__).resolve().parent.parent
TARGET_FIRST_MS = 300.0
TARGET_CPU_EXTRA = 0.20
TOKEN = re.compile(r"\bst\d{6}\b")
# What the model says after the token: plain prose with a little Markdown, about 480 characters.
BODY = (" Here is **the plan** for Monday: call Ola about the cello in the morning, then book the train to "
        "Gdansk and pack everything the evening before, so that nothing is left for the last minute. After "
        "that, the week is quieter: a walk on Wednesday if the weather holds, the dentist on Thursday at ten, "
        "and on Friday the dinner with Ben and Ola you have been putting off since spring. That is all for "
        "today, and honestly it is plenty; tell me which part you want to start with and we go from there.")
GIVE_UP_S = 5.0  # [delivery] stream_give_up_s (the default): a longer retry_after ends the preview
SHORT_RETRY_S = 1
LONG_RETRY_S = 8  # past GIVE_UP_S


# --- the fake model, in its own process ---------------------------------------------------------------------
_current: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("stream_token", default=None)


def serve_model(chunk_chars: int, rate: float) -> None:
    """The fake model's process: streams ``token + BODY`` at ``rate`` chunks a second and prints
    ``first <token> <monotonic>`` the moment each stream's first content chunk was written."""
    from aiohttp import web

    from tests.fakes.openai_api import FakeOpenAI, Scripted

    delay = 1 / rate
    original_write = web.StreamResponse.write

    async def write(self: web.StreamResponse, data: bytes | bytearray | memoryview) -> None:
        await original_write(self, data)
        held = _current.get()  # set by route() below, in the same request's task
        if held is not None and not held[1] and b'"content": "' in data and b'"content": ""' not in data:
            held[1] = True
            print(f"first {held[0]} {time.monotonic():.6f}", flush=True)

    web.StreamResponse.write = write  # type: ignore[method-assign]

    def route(body: dict[str, Any]) -> Scripted:
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        last = str(users[-1].get("content", "")) if users else ""
        found = TOKEN.findall(last)
        token = found[-1] if found else "st000000"
        text = token + BODY
        if body.get("stream"):
            _current.set([token, False])
            return Scripted(text=text, chunk_chars=chunk_chars, chunk_delay_s=delay)
        chunks = -(-len(text) // chunk_chars)
        return Scripted(text=text, delay_s=(chunks - 1) * delay)  # whole, after the time the stream takes

    async def serve() -> None:
        server = await FakeOpenAI().start()
        server.route = route
        print(server.port, flush=True)
        await asyncio.Event().wait()

    loop.run(serve())


class ModelProcess:
    def __init__(self, chunk_chars: int, rate: float, litellm_model: str) -> None:
        self.litellm_model = litellm_model  # the model string kith is configured with
        self.args = ["--chunk-chars", str(chunk_chars), "--rate", str(rate)]
        self.first: dict[str, list[float]] = {}  # token -> when each of its streams wrote its first content
        self.proc: asyncio.subprocess.Process | None = None
        self.url = ""
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> ModelProcess:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.streaming", "--serve-model", *self.args, cwd=str(ROOT),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)  # a killed client's reset is noise
        assert self.proc.stdout is not None
        self.url = f"http://127.0.0.1:{int(await self.proc.stdout.readline())}/v1"
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            _, token, at = line.decode().split()
            self.first.setdefault(token, []).append(float(at))

    async def __aexit__(self, *exc: object) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self.proc is not None:
            self.proc.kill()
            await self.proc.wait()


# --- kith: bot.py run -------------------------------------------------------------------------------------------
class Bot:
    """``bot.py run`` on a data directory of its own; started again after each kill."""

    def __init__(self, root: Path, model_url: str, tg: FakeTelegramApi, stream: bool, model: str) -> None:
        self.tg = tg
        self.config = root / "kith.toml"
        self.log_dir = root
        streams = '["telegram"]' if stream else "[]"
        self.config.write_text(
            f'[llm]\nmodel = "{model}"\napi_base = "{model_url}"\ntimeout_s = 30.0\nmax_retries = 0\n'
            f'[storage]\ndata_dir = "{root / "data"}"\n[memory]\nembedder = "none"\ncapture = false\n'
            f'[telegram]\nbase_url = "{tg.base_url}"\npoll_timeout_s = 1\n'
            '[policy.telegram]\ndm = "open"\nrate_limit_burst = 100000\nrate_limit_per_minute = 100000.0\n'
            f'[delivery]\ndebounce_ms = 0\nstream = {streams}\nstream_give_up_s = {GIVE_UP_S}\n'
            '[heartbeat]\nenabled = false\n', encoding="utf-8")
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0
        self.logs: list[Path] = []

    async def start(self) -> float:
        """Start it and wait until it polls Telegram; the seconds that took."""
        self.starts += 1
        log = self.log_dir / f"bot-{self.starts}.log"
        self.logs.append(log)
        started = time.monotonic()
        with log.open("wb") as out:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, str(ROOT / "bot.py"), "--config", str(self.config), "run", cwd=str(ROOT),
                stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                env={**os.environ, "TELEGRAM_BOT_TOKEN": FAKE_BOT_TOKEN})
        await until(lambda: any(c.at >= started and c.method.lower() == "getupdates" for c in self.tg.calls[-20:]),
                    120, "the bot polling Telegram")
        return time.monotonic() - started

    def cpu_s(self) -> tuple[float, float]:
        """The CPU kith used so far: the bot process, and every process under it (its model process)."""
        if self.proc is None or self.proc.returncode is not None:
            return 0.0, 0.0
        return process_cpu_s(self.proc.pid), sum(process_cpu_s(pid) for pid in descendants(self.proc.pid))

    async def kill(self) -> None:
        """SIGKILL its model process and the bot, as a power cut would."""
        if self.proc is None or self.proc.returncode is not None:
            return
        for pid in descendants(self.proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()

    async def stop(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.proc.wait(), 30)
        except TimeoutError:
            await self.kill()

    def log_count(self, needle: str) -> int:
        return sum(p.read_text("utf-8", "replace").count(needle) for p in self.logs if p.exists())


async def until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def token(n: int) -> str:
    return f"st{n:06d}"


def finals(tg: FakeTelegramApi, chat: int) -> list[str]:
    return tg.texts_to(chat)


async def push_paced(tg: FakeTelegramApi, items: list[tuple[int, str]], rate: float) -> None:
    for chat, text in items:
        tg.push_text(chat, chat, text)
        await asyncio.sleep(1 / rate)


# --- parts 1 and 2: first visible text and CPU ----------------------------------------------------------------
@dataclass
class Round:
    stream: bool
    replies: int
    cpu_s: float  # the bot process and its model process
    model_cpu_s: float  # its model process alone
    wall_s: float
    start_s: float
    first_ms: list[float] = field(default_factory=list)  # streamed: first draft - first model chunk, per reply
    drafts: list[int] = field(default_factory=list)  # streamed: drafts per reply
    no_draft: int = 0


async def ready_bot(stack: contextlib.AsyncExitStack, model: ModelProcess, stream: bool,
                    base: int) -> tuple[Bot, FakeTelegramApi, float]:
    """A bot with a fake Bot API of its own, started and warmed up (its first reply: litellm's first call)."""
    tg = FakeTelegramApi()
    await tg.start()
    stack.push_async_callback(tg.stop)
    tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="kith-bench-stream-"))
    bot = Bot(Path(tmp), model.url, tg, stream, model.litellm_model)
    stack.push_async_callback(bot.stop)
    start_s = await bot.start()
    warm = base + 999
    tg.push_text(warm, warm, f"{token(warm)} hello, warming up")
    await until(lambda: bool(finals(tg, warm)), 120, "the warm-up reply")
    return bot, tg, start_s


async def one_round(args: argparse.Namespace, model: ModelProcess, bot: Bot, tg: FakeTelegramApi, stream: bool,
                    base: int, start_s: float) -> Round:
    chats = [base + i for i in range(args.replies)]
    cpu, started = bot.cpu_s(), time.monotonic()
    await push_paced(tg, [(c, f"{token(c)} what is the plan for the week?") for c in chats], args.msg_rate)
    await until(lambda: all(finals(tg, c) for c in chats), 300, "every reply")
    (bot_after, model_after), wall = bot.cpu_s(), time.monotonic() - started
    result = Round(stream, args.replies, bot_after + model_after - sum(cpu), model_after - cpu[1], wall, start_s)
    await bot.stop()
    if stream:
        for chat in chats:
            drafts = tg.drafts_to(chat)
            result.drafts.append(len(drafts))
            first_chunk = model.first.get(token(chat))
            if not drafts or not first_chunk:
                result.no_draft += 1
                continue
            result.first_ms.append((min(d.time for d in drafts) - first_chunk[0]) * 1000)
    return result


async def first_text_and_cpu(args: argparse.Namespace, model: ModelProcess) -> None:
    rounds: list[Round] = []
    for r in range(args.rounds):
        base = 100_000 + r * 10_000
        async with contextlib.AsyncExitStack() as stack:
            # Both bots start and warm up at once (a bot that waits on its long poll costs next to nothing);
            # each is then measured alone, streamed first.
            bots = await asyncio.gather(ready_bot(stack, model, True, base),
                                        ready_bot(stack, model, False, base + 5_000))
            for stream, (bot, tg, start_s) in zip((True, False), bots, strict=True):
                done = await one_round(args, model, bot, tg, stream, base + (0 if stream else 5_000), start_s)
                rounds.append(done)
                print(f"  round {r + 1}, {'streamed' if stream else 'whole   '}: {done.replies} replies in "
                      f"{done.wall_s:.1f} s, kith's CPU {done.cpu_s / done.replies * 1000:.1f} ms per reply "
                      f"({done.model_cpu_s / done.replies * 1000:.1f} ms of it the model process) "
                      f"(bot started in {done.start_s:.1f} s)", flush=True)
    streamed = [r for r in rounds if r.stream]
    whole = [r for r in rounds if not r.stream]
    first = [ms for r in streamed for ms in r.first_ms]
    drafts = [n for r in streamed for n in r.drafts]
    p50, p95 = percentile(first, 50), percentile(first, 95)
    print(f"first visible text (first draft accepted - model's first content chunk), {len(first)} replies from "
          f"distinct DMs: p50={p50:.0f} ms p95={p95:.0f} ms max={max(first, default=float('nan')):.0f} ms "
          f"(target p95 <= {TARGET_FIRST_MS:.0f} ms: {verdict(p95, TARGET_FIRST_MS)}); "
          f"drafts per reply median {statistics.median(drafts) if drafts else 0:g}, "
          f"replies with no draft {sum(r.no_draft for r in streamed)}")
    s_cpu = sum(r.cpu_s for r in streamed) / sum(r.replies for r in streamed) * 1000
    w_cpu = sum(r.cpu_s for r in whole) / sum(r.replies for r in whole) * 1000
    ratio = s_cpu / w_cpu if w_cpu else float("nan")
    print(f"kith's CPU per reply (bot process + its model process): streamed {s_cpu:.1f} ms, whole {w_cpu:.1f} ms: "
          f"{ratio - 1:+.0%} (target <= +{TARGET_CPU_EXTRA:.0%}: {verdict(ratio, 1 + TARGET_CPU_EXTRA)}); "
          f"per round streamed {', '.join(f'{r.cpu_s / r.replies * 1000:.1f}' for r in streamed)} ms, "
          f"whole {', '.join(f'{r.cpu_s / r.replies * 1000:.1f}' for r in whole)} ms")


# --- part 3: faults -------------------------------------------------------------------------------------------
async def faults(args: argparse.Namespace, model: ModelProcess) -> None:
    rng = random.Random(args.seed)
    tg = FakeTelegramApi()
    await tg.start()
    chats = [700_000 + i for i in range(args.fault_chats)]
    injected: dict[tuple[str, int], int] = {}
    kills: list[str] = []
    with contextlib.ExitStack() as keep:
        tmp = args.logs or keep.enter_context(tempfile.TemporaryDirectory(prefix="kith-bench-stream-faults-"))
        bot = Bot(Path(tmp), model.url, tg, True, model.litellm_model)
        started = time.monotonic()
        try:
            await bot.start()
            pushing = asyncio.create_task(push_paced(
                tg, [(c, f"{token(c)} what is the plan for the week?") for c in chats], args.fault_rate))
            done = asyncio.Event()

            async def inject() -> None:
                kinds = [(m, s) for m in ("sendMessageDraft", "sendMessage") for s in (SHORT_RETRY_S, LONG_RETRY_S)]
                while not done.is_set():
                    await asyncio.sleep(rng.uniform(0.5, 2.0) * args.inject_every)
                    method, retry_after = rng.choice(kinds)
                    tg.fail_next(method, 429, retry_after=retry_after)
                    injected[(method, retry_after)] = injected.get((method, retry_after), 0) + 1

            def streaming_now() -> int | None:
                """A chat whose reply is streaming: a draft in the last half second and no final yet."""
                now = tg.now()
                for chat in chats:
                    draft = tg.live_draft(chat)
                    if draft is not None and now - draft.time < 0.5 and not finals(tg, chat):
                        return chat
                return None

            async def killer() -> None:
                for _ in range(args.kills):
                    await asyncio.sleep(rng.uniform(2.0, 6.0))
                    try:
                        await until(lambda: streaming_now() is not None, 30, "a reply streaming")
                    except TimeoutError:
                        break
                    chat = streaming_now()
                    await bot.kill()
                    took = await bot.start()
                    kills.append(f"{token(chat or 0)} (back in {took:.1f} s)")

            injector = asyncio.create_task(inject())
            await killer()
            await pushing
            done.set()  # the faults stop once every message is sent and every kill done; then it settles
            injector.cancel()
            with contextlib.suppress(TimeoutError):
                await until(lambda: all(finals(tg, c) for c in chats), args.deadline, "every reply")
            await asyncio.sleep(2.0)  # time for anything doubled, or a late draft, to show up
            settled_s = time.monotonic() - started
            live_now = sum(1 for c in chats if tg.seen_in(c).draft is not None)
            tg.advance_clock(30.0)
            live_later = sum(1 for c in chats if tg.seen_in(c).draft is not None)
        finally:
            await bot.stop()
            await tg.stop()
        rate_limited = bot.log_count("ended=rate_limited")
        tracebacks = bot.log_count("Traceback")
    per_chat = {c: finals(tg, c) for c in chats}
    duplicates = sum(1 for texts in per_chat.values() if len(texts) > 1)
    lost = sum(1 for texts in per_chat.values() if not texts)
    wrong = sum(1 for c, texts in per_chat.items() for t in texts if token(c) not in t)
    refused = [c for c in tg.calls if c.failed_status == 429]
    print(f"faults: {len(chats)} DMs, one message each, at {args.fault_rate:g}/s; "
          f"{len(kills)} SIGKILLs mid-stream (bot and its model process; started again each time); "
          f"429s injected: " + ", ".join(f"{m} retry_after {s} s x{n}" for (m, s), n in sorted(injected.items()))
          + f"; 429s answered: sendMessageDraft {sum(1 for c in refused if c.method == 'sendMessageDraft')}, "
          f"sendMessage {sum(1 for c in refused if c.method == 'sendMessage')}; "
          f"previews ended by a long retry_after: {rate_limited}; settled after {settled_s:.0f} s")
    for k in kills:
        print(f"  killed while {k}")
    print(f"  duplicate finals: {duplicates} (target 0: {verdict(duplicates, 0)}); "
          f"lost replies: {lost} (target 0: {verdict(lost, 0)}); "
          f"replies not naming their message (an honest failure text instead): {wrong}; "
          f"chats with a live draft once settled: {live_now}, after 30 s more of the fake's clock: {live_later}; "
          f"tracebacks in kith's log: {tracebacks}")
    odd = sorted({t[:70] for c, texts in per_chat.items() for t in texts if token(c) not in t})
    for text in odd[:5]:
        print(f"  a reply not naming its message: {text!r}")
    if wrong:
        print(f"  ... {bot.log_count('turn given up')} turns given up in kith's log: a message whose turn was open "
              f"in too many killed starts gets kith's honest reply instead")
    for chat, texts in per_chat.items():
        if not texts:
            print(f"  lost {token(chat)}: {len(tg.drafts_to(chat))} drafts, "
                  f"{len(model.first.get(token(chat), []))} model streams")


async def run(args: argparse.Namespace) -> int:
    chars = len(token(0) + BODY)
    print(f"model: {args.model}, a fake streaming {args.chunk_chars} characters a chunk at {args.rate:g} chunks/s "
          f"({chars} characters a reply, {(-(-chars // args.chunk_chars) - 1) / args.rate:.1f} s a stream); "
          f"messages at {args.msg_rate:g}/s; {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    async with ModelProcess(args.chunk_chars, args.rate, args.model) as model:
        if "first" in args.only:
            await first_text_and_cpu(args, model)
        if "faults" in args.only:
            await faults(args, model)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replies", type=int, default=40, help="replies per round, each from a distinct DM")
    parser.add_argument("--rate", type=float, default=30.0, help="the model's chunks (tokens) per second")
    parser.add_argument("--chunk-chars", type=int, default=8, help="characters per chunk")
    parser.add_argument("--model", default="openai/bench",
                        help="kith's litellm model string for the fake server, e.g. hosted_vllm/bench")
    parser.add_argument("--msg-rate", type=float, default=2.0, help="messages per second sent to kith")
    parser.add_argument("--rounds", type=int, default=2, help="streamed and whole runs, alternating, each")
    parser.add_argument("--fault-chats", type=int, default=60)
    parser.add_argument("--fault-rate", type=float, default=3.0, help="messages per second in the fault run")
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--inject-every", type=float, default=1.5, help="mean seconds between injected 429s")
    parser.add_argument("--deadline", type=float, default=180.0, help="seconds to wait for every fault-run reply")
    parser.add_argument("--seed", type=int, default=34)
    parser.add_argument("--only", default="first,faults", help="first (parts 1 and 2), faults, or both")
    parser.add_argument("--logs", help="keep the fault run's config, data and bot logs in this new directory")
    parser.add_argument("--quick", action="store_true", help="a small run of each part, under a minute")
    parser.add_argument("--serve-model", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_model:
        serve_model(args.chunk_chars, args.rate)
        return 0
    if args.quick:
        args.replies, args.rounds, args.fault_chats, args.kills, args.deadline = 6, 1, 10, 1, 40.0
        args.msg_rate = args.fault_rate = 4.0
    args.only = set(args.only.split(","))
    return loop.run(run(args))


if __name__ == "__main__":
    raise SystemExit(main())
