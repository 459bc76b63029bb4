"""The fault suite's machinery: the real ``bot.py run`` against the loopback fakes, faults, and a count.

Every message sent to the bot carries a unique token (``kf`` and six digits); the fake model echoes the
person's newest message, so a reply names the messages it answers. At the end each token is one of:

* answered once: exactly one outgoing message carried it;
* doubled: more than one did (counted apart from "answered once"); those whose outbox row the bot logged
  as ``maybe doubled`` are the documented at-least-once window, the rest are not;
* honest reply: none carried it, but the person got one of kith's honest failure texts for it (see
  :func:`judge` for how an honest reply, which names no token, is matched to the messages it stands for);
* lost: neither, by the deadline.

A run also counts the bot's crashes: the process ending when nobody killed it, or a ``Traceback`` in its
log. Nothing here leaves 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from llm.client import HONEST_FAILURE_REPLY
from tests.fakes import discord_api as fake_discord
from tests.fakes import slack_api as fake_slack
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.openai_api import FakeOpenAI, Scripted
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi
from tests.support.config_file import write_config
from tests.support.fault_bot import API_ENV, GATEWAY_ENV
from tests.support.paths import ROOT
from tests.support.tcp_proxy import FaultProxy

TOKEN = re.compile(r"kf\d{6}")
# kith's honest texts: the model unreachable, and a message that could not be handled.
HONEST_MARKERS = (HONEST_FAILURE_REPLY[:28].lower(), "could not handle that message")
MAYBE_DOUBLED = re.compile(r"maybe doubled id=(\S+?)(?:\s|$)")
LLM_TIMEOUT_S = 5.0  # [llm] timeout_s for the bot under test: a hung model costs a turn this long
BOT_STOP_TIMEOUT_S = 30.0
RESTARTS_AFTER_EXIT = 5  # a bot that keeps ending on its own is started again this often, then left down
PLATFORMS = ("telegram", "discord", "slack")
SLACK_RETRIES = 3  # Slack redelivers an unacknowledged event this many times
SLACK_ACK_TIMEOUT_S = 3.0  # Slack sends an event again when its envelope was not acknowledged within this
# A double whose first copy the platform accepted this soon before a SIGKILL of the bot is the crash window the
# README documents (the platform answered, the process died before committing that progress). Generous on a
# loaded 2-core machine, where that commit can trail the answer; the largest gap seen is printed.
CRASH_WINDOW_S = 1.0
# A post first seen this long after a kill was on its way when the process died (a few pump intervals).
IN_FLIGHT_S = 0.25


# --- the count -----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Pushed:
    token: str
    chat: str
    index: int  # its place among its chat's messages
    at: float  # time.monotonic() when pushed


class Ledger:
    """Every message the suite sent, by token and by chat."""

    def __init__(self) -> None:
        self._serial = itertools.count(1)
        self.pushed: dict[str, Pushed] = {}
        self.by_chat: dict[str, list[str]] = {}

    def new(self, chat: str) -> str:
        token = f"kf{next(self._serial):06d}"
        tokens = self.by_chat.setdefault(chat, [])
        self.pushed[token] = Pushed(token, chat, len(tokens), time.monotonic())
        tokens.append(token)
        return token


@dataclass
class Tally:
    platform: str
    fault: str
    tried: int = 0
    once: int = 0
    honest: int = 0
    lost: int = 0
    doubled: int = 0
    doubled_in_window: int = 0
    crashed: int = 0
    notes: list[str] = field(default_factory=list)
    lost_tokens: list[str] = field(default_factory=list)
    doubled_tokens: list[str] = field(default_factory=list)


def is_honest(text: str) -> bool:
    low = text.lower()
    return any(marker in low for marker in HONEST_MARKERS)


def judge(ledger: Ledger, outgoing: list[tuple[str, str]], platform: str = "", fault: str = "") -> Tally:
    """Count ``ledger``'s messages against what the bot sent (``(chat, text)`` in the order sent).

    An honest reply names no token. Replies in a chat come in the order of its messages, so an honest reply
    stands for the messages left unanswered between the newest message answered before it and the next one
    answered after it; any such gap that holds an honest reply counts wholly as "honest", a gap without one
    as "lost". (A debounced burst gets one honest reply for several messages, hence a gap, not one-to-one.)
    """
    counts: dict[str, int] = {t: 0 for t in ledger.pushed}
    per_chat: dict[str, list[str]] = {}
    for chat, text in outgoing:
        per_chat.setdefault(chat, []).append(text)
    covered: set[str] = set()
    for chat, texts in per_chat.items():
        tokens = ledger.by_chat.get(chat, [])
        index = {t: i for i, t in enumerate(tokens)}
        echoed: list[int] = []  # per outgoing message: the newest of this chat's messages it answers, or -1
        honest_at: list[tuple[int, int]] = []  # (place in the outgoing order, newest answered before it)
        for place, text in enumerate(texts):
            mine = [index[t] for t in TOKEN.findall(text) if t in index]
            for i in set(mine):
                counts[tokens[i]] += 1
            if mine:
                echoed.append(max(mine))
            else:
                echoed.append(-1)
                if is_honest(text):
                    honest_at.append((place, max(echoed[:place], default=-1)))
        for place, low in honest_at:
            later = [i for i in echoed[place + 1:] if i > low]
            high = min(later, default=len(tokens))
            covered.update(tokens[low + 1:high])
    tally = Tally(platform, fault, tried=len(ledger.pushed))
    for token, n in counts.items():
        if n == 1:
            tally.once += 1
        elif n > 1:
            tally.doubled += 1
            tally.doubled_tokens.append(token)
        elif token in covered:
            tally.honest += 1
        else:
            tally.lost += 1
            tally.lost_tokens.append(token)
    return tally


# --- the bot process ----------------------------------------------------------------------------------------
class BotProcess:
    """``bot.py run`` (through :mod:`tests.support.fault_bot`) with its log in a file per start."""

    def __init__(self, config: Path, env: dict[str, str], log_dir: Path) -> None:
        self.config = config
        self.env = env
        self.log_dir = log_dir
        self.logs: list[Path] = []
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0
        self.kills = 0
        self.model_kills = 0
        self.exits_on_its_own = 0
        self._expect_exit = False
        self._watch: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.starts += 1
        log = self.log_dir / f"bot-{self.starts:03d}.log"
        self.logs.append(log)
        with log.open("wb") as err:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "tests.support.fault_bot", "--config", str(self.config), "run",
                cwd=str(ROOT), stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=self.env)
        self._expect_exit = False
        self._watch = asyncio.create_task(self._watch_exit(self.proc))

    async def _watch_exit(self, proc: asyncio.subprocess.Process) -> None:
        await proc.wait()
        if not self._expect_exit and proc is self.proc:
            self.exits_on_its_own += 1
            if self.exits_on_its_own <= RESTARTS_AFTER_EXIT:
                await self.start()  # as a supervisor would, so the run goes on and the count stays honest

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.returncode is None else None

    def model_pid(self) -> int | None:
        """The bot's model process (``llm.worker``), read from /proc; None while there is none."""
        pid = self.pid
        if pid is None:
            return None
        for child in _children(pid):
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"llm.worker" in cmdline:
                return child
        return None

    async def kill(self) -> None:
        """SIGKILL the model process and the bot, as a power cut or the OOM killer would."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        self._expect_exit = True
        model = self.model_pid()
        if model is not None:
            _signal(model, signal.SIGKILL)
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        self.kills += 1

    def kill_model(self) -> bool:
        model = self.model_pid()
        if model is None:
            return False
        _signal(model, signal.SIGKILL)
        self.model_kills += 1
        return True

    async def stop(self) -> int | None:
        """SIGTERM and wait; the exit code, or None if it did not end in time (then it is killed)."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return proc.returncode if proc else None
        self._expect_exit = True
        proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(proc.wait(), BOT_STOP_TIMEOUT_S)
        except TimeoutError:
            await self.kill()
            return None

    def log_text(self) -> str:
        return "".join(p.read_text("utf-8", "replace") for p in self.logs if p.exists())


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                found += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return found


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


# --- the platforms ----------------------------------------------------------------------------------------------
class Platform(Protocol):
    name: str
    proxy: FaultProxy

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    def config(self) -> str: ...
    def env(self) -> dict[str, str]: ...
    def chats(self, n: int) -> list[str]: ...
    def push(self, chat: str, text: str) -> None: ...
    def outgoing(self) -> list[tuple[str, str]]: ...
    def connected(self) -> bool: ...
    def fail_sends(self, status: int, times: int) -> None: ...
    def before_kill(self) -> None: ...
    def after_start(self) -> None: ...
    def pump(self) -> None: ...


def _policy(platform: str) -> str:
    # The rate limit is policy, not delivery: lifted so that every message of the load is a turn.
    return f'[policy.{platform}]\ndm = "open"\nrate_limit_burst = 100000\nrate_limit_per_minute = 100000.0\n'


class TelegramPlatform:
    name = "telegram"

    def __init__(self) -> None:
        self.api = FakeTelegramApi()
        self.proxy: FaultProxy

    async def start(self) -> None:
        await self.api.start()
        self.proxy = await FaultProxy(self.api.port).start()

    async def stop(self) -> None:
        await self.proxy.stop()
        await self.api.stop()

    def config(self) -> str:
        return f'[telegram]\nbase_url = "{self.proxy.url}/bot"\npoll_timeout_s = 1\n' + _policy("telegram")

    def env(self) -> dict[str, str]:
        return {"TELEGRAM_BOT_TOKEN": FAKE_BOT_TOKEN}

    def chats(self, n: int) -> list[str]:
        return [str(700_001 + i) for i in range(n)]

    def push(self, chat: str, text: str) -> None:
        self.api.push_text(int(chat), int(chat), text)

    def outgoing(self) -> list[tuple[str, str]]:
        return [(str(m.chat_id), m.visible_text) for m in self.api.sent]

    def connected(self) -> bool:
        return any(c.method.lower() == "getupdates" for c in self.api.calls[-50:])

    def fail_sends(self, status: int, times: int) -> None:
        for _ in range(times):
            self.api.fail_next("sendMessage", status, retry_after=1)

    def before_kill(self) -> None:
        pass

    def after_start(self) -> None:
        pass

    def pump(self) -> None:
        pass


class DiscordPlatform:
    """Discord keeps no backlog for a bot that is away: messages are held here while no session is live
    (a person writing into a dead bot is not what is measured), then pushed once it identified again."""

    name = "discord"

    def __init__(self) -> None:
        self.api = FakeDiscord()
        self.proxy: FaultProxy
        self._users: dict[str, int] = {}
        self._held: list[tuple[str, str]] = []
        self._identifies_at_kill = 0

    async def start(self) -> None:
        await self.api.start()
        self.proxy = await FaultProxy(self.api._port).start()

    async def stop(self) -> None:
        await self.proxy.stop()
        await self.api.stop()

    def config(self) -> str:
        return _policy("discord")

    def env(self) -> dict[str, str]:
        return {"DISCORD_BOT_TOKEN": fake_discord.FAKE_DISCORD_TOKEN,
                API_ENV: f"{self.proxy.url}{fake_discord.API_PREFIX}",
                GATEWAY_ENV: f"ws://127.0.0.1:{self.proxy.port}/gateway"}

    def chats(self, n: int) -> list[str]:
        out = []
        for i in range(n):
            user = 910_000_000_000_000_001 + i
            self.api.add_user(user, f"person{i}", global_name=f"Person {i}")
            chat = str(self.api.open_dm(user))
            self._users[chat] = user
            out.append(chat)
        return out

    def push(self, chat: str, text: str) -> None:
        self._held.append((chat, text))
        self.pump()

    def pump(self) -> None:
        while self._held and self.connected():
            chat, text = self._held.pop(0)
            self.api.push_message(int(chat), self._users[chat], text)

    def outgoing(self) -> list[tuple[str, str]]:
        return [(str(m.channel_id), m.content) for m in self.api.posted]

    def connected(self) -> bool:
        return len(self.api.identifies) > self._identifies_at_kill and self.api.connected > 0

    def fail_sends(self, status: int, times: int) -> None:
        self.api.fail_next("create_message", status, times=times)

    def before_kill(self) -> None:
        self._identifies_at_kill = len(self.api.identifies)

    def after_start(self) -> None:
        pass


class SlackPlatform:
    """Slack retries an event its app did not acknowledge: an envelope sent and not acked within
    ``SLACK_ACK_TIMEOUT_S`` is sent again (same event id, retry_attempt + 1), at most ``SLACK_RETRIES``
    times, as Slack would. Timed from the send, not from a kill, so that an envelope that went out into a
    connection a kill was just ending comes again too."""

    name = "slack"

    def __init__(self) -> None:
        self.api = FakeSlack()
        self.proxy: FaultProxy
        self._users: dict[str, str] = {}
        self._scanned = 0  # how many of the fake's envelopes pump() has looked at
        self._unacked: dict[str, list[Any]] = {}  # event id → its envelopes, while none of them was acked

    async def start(self) -> None:
        await self.api.start()
        self.proxy = await FaultProxy(self.api._port).start()

    async def stop(self) -> None:
        await self.proxy.stop()
        await self.api.stop()

    def config(self) -> str:
        return f'[slack]\napi_url = "{self.proxy.url}/api/"\n' + _policy("slack")

    def env(self) -> dict[str, str]:
        return {"SLACK_BOT_TOKEN": fake_slack.FAKE_BOT_TOKEN, "SLACK_APP_TOKEN": fake_slack.FAKE_APP_TOKEN}

    def chats(self, n: int) -> list[str]:
        out = []
        for i in range(n):
            user = f"U0P{i:05d}"
            self.api.add_user(user, f"person{i}")
            chat = self.api.dm_channel(user)
            self._users[chat] = user
            out.append(chat)
        return out

    def push(self, chat: str, text: str) -> None:
        self.api.push_dm(self._users[chat], text)

    def outgoing(self) -> list[tuple[str, str]]:
        return [(m.channel, m.text) for m in self.api.posted]

    def connected(self) -> bool:
        return self.api.open_sockets > 0

    def fail_sends(self, status: int, times: int) -> None:
        for _ in range(times):
            if status == 429:
                self.api.fail_next("chat.postMessage", "ratelimited", retry_after=1)
            else:
                self.api.fail_next("chat.postMessage", "internal_error", status=status)

    def before_kill(self) -> None:
        pass

    def after_start(self) -> None:
        pass

    def pump(self) -> None:
        # Only an event's newest envelope is timed, and none once any of its envelopes was acked.
        for envelope in self.api.envelopes[self._scanned:]:
            if envelope.event_id is not None:
                self._unacked.setdefault(envelope.event_id, []).append(envelope)
        self._scanned = len(self.api.envelopes)
        now = time.monotonic()
        for event_id, sent in list(self._unacked.items()):
            newest = sent[-1]
            if any(e.acked_at is not None for e in sent) or newest.retry_attempt >= SLACK_RETRIES:
                del self._unacked[event_id]
            elif newest.sent_at is not None and now - newest.sent_at >= SLACK_ACK_TIMEOUT_S:
                self.api.redeliver(newest, reason="timeout")


def make_platform(name: str) -> Platform:
    return {"telegram": TelegramPlatform, "discord": DiscordPlatform, "slack": SlackPlatform}[name]()


# --- one run: a world, a load, faults, a count -------------------------------------------------------------------
@dataclass
class RunOptions:
    chats: int = 12
    rate: float = 5.0  # messages a second, spread over the chats
    answer_deadline_s: float = 180.0  # after the faults: every message answered by then, or it is lost
    settle_s: float = 3.0  # then this long for anything doubled to show up
    data_dir: Path | None = None  # e.g. a small tmpfs; default a new temporary directory
    extra_config: str = ""
    keep_logs: Path | None = None  # copy the bot's logs here (a directory per run) before the scratch goes


class World:
    """The fakes, the bot and the load of one run."""

    def __init__(self, platform: Platform, options: RunOptions, root: Path) -> None:
        self.platform = platform
        self.options = options
        self.root = root
        self.model = FakeOpenAI()
        self.ledger = Ledger()
        self.bot: BotProcess
        self.chat_ids: list[str] = []
        self.model_fault: Callable[[dict[str, Any]], Scripted | None] | None = None
        self._load: asyncio.Task[None] | None = None
        self._pump: asyncio.Task[None] | None = None
        self._rng = random.Random(0)
        self.kill_times: list[float] = []  # monotonic times of the bot's SIGKILLs
        self.first_seen: list[float] = []  # per outgoing message, in order: when the pump first saw it

    @property
    def data_dir(self) -> Path:
        return self.options.data_dir or self.root / "data"

    async def __aenter__(self) -> World:
        await self.model.start()
        self.model.route = lambda request: self.model_fault(request) if self.model_fault else None
        await self.platform.start()
        self.chat_ids = self.platform.chats(self.options.chats)
        config = write_config(self.root / "kith.toml", self.model, self.data_dir, extra=(
            f"[heartbeat]\nenabled = false\n{self.platform.config()}{self.options.extra_config}"))
        # timeout_s is written by write_config; the suite's own value keeps a hung model's cost known.
        text = config.read_text("utf-8").replace("timeout_s = 5.0", f"timeout_s = {LLM_TIMEOUT_S}")
        config.write_text(text, "utf-8")
        env = {k: v for k, v in os.environ.items() if not k.endswith(("_TOKEN", "_SECRET"))}
        env.update(self.platform.env(), LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONUNBUFFERED="1")
        self.bot = BotProcess(config, env, self.root)
        await self.start_bot()
        self._pump = asyncio.create_task(self._pump_forever())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop_load()
        if self._pump is not None:
            self._pump.cancel()
            await asyncio.gather(self._pump, return_exceptions=True)
        await self.bot.stop()
        await self.platform.stop()
        await self.model.stop()

    async def start_bot(self) -> None:
        await self.bot.start()
        self.platform.after_start()

    async def kill_bot(self) -> None:
        self.platform.before_kill()
        self.note_outgoing()
        self.kill_times.append(time.monotonic())
        await self.bot.kill()

    def _keep_evidence(self, kept: Path, tokens: list[str]) -> None:
        """For each doubled token: when each copy went out and the kills around it (seconds from the first
        kill), and a copy of the database, so the double can be traced in the outbox and the logs."""
        outgoing = self.platform.outgoing()
        start = self.kill_times[0] if self.kill_times else 0.0
        copies = {t: [{"index": i, "chat": chat, "seen_s": round(self.first_seen[i] - start, 3)
                       if i < len(self.first_seen) else None, "text": text}
                      for i, (chat, text) in enumerate(outgoing) if t in text] for t in tokens}
        pushed = {t: {"chat": self.ledger.pushed[t].chat, "sent_s": round(self.ledger.pushed[t].at - start, 3)}
                  for t in tokens if t in self.ledger.pushed}
        evidence = {"kills_s": [round(k - start, 3) for k in self.kill_times], "pushed": pushed, "copies": copies}
        (kept / "doubles.json").write_text(json.dumps(evidence, indent=1, ensure_ascii=False), "utf-8")
        for name in ("kith.db", "kith.db-wal"):
            with contextlib.suppress(OSError):
                shutil.copy(self.data_dir / name, kept / name)

    def note_outgoing(self) -> None:
        """Stamp outgoing messages not seen before with the time now (at most a pump's interval late)."""
        seen = len(self.platform.outgoing())
        if seen > len(self.first_seen):
            self.first_seen += [time.monotonic()] * (seen - len(self.first_seen))

    async def wait_connected(self, timeout: float = 60.0) -> None:
        await until(self.platform.connected, timeout, "the bot never connected to the platform")

    async def _pump_forever(self) -> None:
        while True:
            self.platform.pump()
            self.note_outgoing()
            await asyncio.sleep(0.05)

    def send(self, chat: str | None = None, text: str = "how was your day? {token}") -> str:
        chat = chat or self._rng.choice(self.chat_ids)
        token = self.ledger.new(chat)
        self.platform.push(chat, text.format(token=token))
        return token

    def start_load(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)
        self._load = asyncio.create_task(self._run_load())

    async def _run_load(self) -> None:
        gap = 1.0 / self.options.rate
        while True:
            self.send()
            await asyncio.sleep(gap)

    async def stop_load(self) -> None:
        if self._load is not None:
            self._load.cancel()
            await asyncio.gather(self._load, return_exceptions=True)
            self._load = None

    def count(self, fault: str) -> Tally:
        return judge(self.ledger, self.platform.outgoing(), self.platform.name, fault)

    async def finish(self, fault: str) -> Tally:
        """Let every message be answered (or the deadline pass), then stop the bot and count."""
        await self.stop_load()
        with contextlib.suppress(TimeoutError):
            await until(lambda: not self.count(fault).lost, self.options.answer_deadline_s, "answers")
        await asyncio.sleep(self.options.settle_s)
        rc = await self.bot.stop()
        tally = self.count(fault)
        log = self.bot.log_text()
        if self.options.keep_logs is not None:
            kept = self.options.keep_logs / f"{self.platform.name}-{re.sub(r'[^a-z0-9]+', '-', fault.lower())}"
            kept.mkdir(parents=True, exist_ok=True)
            for path in self.bot.logs:
                with contextlib.suppress(OSError):
                    shutil.copy(path, kept / path.name)
            if tally.doubled_tokens:
                self._keep_evidence(kept, tally.doubled_tokens)
        seen = tracebacks(log)
        tally.crashed = self.bot.exits_on_its_own + sum(seen.crashes.values())
        doubled_ids = MAYBE_DOUBLED.findall(log)
        tally.doubled_in_window = _doubles_in_window(self.data_dir, doubled_ids, tally.doubled_tokens)
        if tally.doubled > tally.doubled_in_window and self.kill_times:
            gaps = crash_window_gaps(self.platform.outgoing(), self.first_seen, self.kill_times,
                                     tally.doubled_tokens)
            crashed = min(len(gaps), tally.doubled - tally.doubled_in_window)
            if crashed:
                tally.doubled_in_window += crashed
                tally.notes.append(f"{crashed} doubled at a SIGKILL: first copy accepted between "
                                   f"{-max(gaps) * 1000:.0f} and {-min(gaps) * 1000:.0f} ms from the kill "
                                   "(negative: before it; the crash window)")
        if rc not in (0, None) and rc != -signal.SIGTERM:
            tally.notes.append(f"exit code {rc} on SIGTERM")
        elif rc is None:
            tally.notes.append(f"did not stop within {BOT_STOP_TIMEOUT_S:g} s of SIGTERM")
        if self.bot.exits_on_its_own:
            tally.notes.append(f"{self.bot.exits_on_its_own} exits on its own")
        if seen.crashes:
            tally.notes.append("tracebacks: " + "; ".join(f"{n}x {e}" for e, n in seen.crashes.items()))
        if seen.handled:
            tally.notes.append("tracebacks logged for handled errors (not crashes): "
                               + "; ".join(f"{n}x {e}" for e, n in seen.handled.items()))
        if dropped := log.count("inbox dropped"):
            tally.notes.append(f"{dropped} 'inbox dropped' log lines")
        if doubled_ids:
            tally.notes.append(f"{len(doubled_ids)} 'maybe doubled' log lines")
        other = [t for _c, t in self.platform.outgoing() if not TOKEN.search(t) and not is_honest(t)]
        if other:
            tally.notes.append(f"{len(other)} other replies")
        return tally


LOG_RECORD = re.compile(r"^\d{4}-\d\d-\d\d [\d:,]+ [A-Z]+ (\S+): ")
# Tracebacks logged for an error that was handled, not crashes: kith's own loggers (a turn or an intake batch
# that failed and is retried, e.g. on a full disk; whether the message was then answered is counted apart),
# and python-telegram-bot's request layer, which logs a gateway's HTML error page with a traceback before
# raising its usual NetworkError. Any other (asyncio's "Task exception was never retrieved", a platform
# library's "Ignoring exception in …", none at all) is a crash.
HANDLED_BY_LIBRARY = ("telegram.request", "kith.")


@dataclass
class Tracebacks:
    crashes: dict[str, int] = field(default_factory=dict)  # the exception line, how often
    handled: dict[str, int] = field(default_factory=dict)  # logged by a logger in HANDLED_BY_LIBRARY


def tracebacks(log: str) -> Tracebacks:
    """Every traceback in the log, a chain of exceptions counted once, by its last exception line."""
    found = Tracebacks()
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("Traceback (most recent call last)"):
            continue
        back = i - 1
        while back >= 0 and not lines[back].strip():
            back -= 1
        if back >= 0 and lines[back].startswith(("During handling of the above", "The above exception was")):
            continue  # the chain's first traceback counted it
        logger = ""
        for k in range(i - 1, max(-1, i - 40), -1):
            if match := LOG_RECORD.match(lines[k]):
                logger = match.group(1)
                break
        j = i + 1
        while j < len(lines) and (lines[j].startswith(" ") or not lines[j].strip()):
            j += 1
        exception = lines[j][:160] if j < len(lines) else "(cut off)"
        bucket = found.handled if logger.startswith(HANDLED_BY_LIBRARY) else found.crashes
        bucket[exception] = bucket.get(exception, 0) + 1
    return found


def crash_window_gaps(outgoing: list[tuple[str, str]], first_seen: list[float], kill_times: list[float],
                      doubled_tokens: list[str], window_s: float = CRASH_WINDOW_S,
                      in_flight_s: float = IN_FLIGHT_S) -> list[float]:
    """For each doubled token whose first copy went out at most ``window_s`` before a SIGKILL of the bot, how
    long before it: the crash window, where the platform answered and the process died before its commit.

    A copy first seen at most ``in_flight_s`` after a kill counts too (as a negative gap): its request had left
    when the process died, and the platform carried it out after (the pump sees a post up to its interval late).
    """
    gaps = []
    for token in doubled_tokens:
        first = next((i for i, (_chat, text) in enumerate(outgoing) if token in text), None)
        if first is None or first >= len(first_seen):
            continue
        around = [k - first_seen[first] for k in kill_times if -in_flight_s <= k - first_seen[first] <= window_s]
        if around:
            gaps.append(min(around, key=abs))
    return gaps


def _doubles_in_window(data_dir: Path, logged_ids: list[str], doubled_tokens: list[str]) -> int:
    """How many doubled messages the bot owned up to: their outbox row was logged as ``maybe doubled``.

    The row's text (the model's echo) names the tokens; when the rows cannot be read (pruned, another id
    than the outbox row's), as many doubles as log lines are taken for the window, never more.
    """
    if not logged_ids or not doubled_tokens:
        return 0
    named: set[str] = set()
    try:
        with contextlib.closing(sqlite3.connect(f"file:{data_dir / 'kith.db'}?mode=ro", uri=True)) as conn:
            for raw in set(logged_ids):
                row = conn.execute("SELECT text FROM outbox WHERE id = ?", (raw.strip(",;"),)).fetchone()
                if row:
                    named.update(TOKEN.findall(row[0]))
    except sqlite3.Error:
        named = set()
    if named:
        return sum(1 for t in doubled_tokens if t in named)
    return min(len(doubled_tokens), len(set(logged_ids)))


async def until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.05)


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kith-faults-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# --- the faults ----------------------------------------------------------------------------------------------------
Scenario = Callable[[World], Awaitable[str]]  # drives the faults under load; returns the fault's label


def crash_loop(kills: int, gap_s: tuple[float, float], seed: int, model_only_share: float = 0.3) -> Scenario:
    """``kills`` SIGKILLs of the bot and its model process at random moments ``gap_s`` apart under load; in
    about ``model_only_share`` of the gaps the model process alone is killed once more, at a random moment."""

    async def run(world: World) -> str:
        rng = random.Random(seed)
        world.start_load(seed)
        model_only = 0
        for _ in range(kills):
            gap = rng.uniform(*gap_s)
            if rng.random() < model_only_share:
                first = rng.uniform(0, gap)
                await asyncio.sleep(first)
                model_only += world.bot.kill_model()
                gap -= first
            await asyncio.sleep(gap)
            await world.kill_bot()
            await world.start_bot()
        return f"crash loop ({kills} kills, {model_only} of the model alone)"

    return run


def model_window(kind: str, window_s: float, lead_s: float = 4.0, tail_s: float = 4.0) -> Scenario:
    """The model answers 500, hangs past ``[llm] timeout_s``, or is down, for ``window_s`` under load."""

    async def run(world: World) -> str:
        world.start_load()
        await asyncio.sleep(lead_s)
        if kind == "500":
            world.model_fault = lambda _request: Scripted(status=500)
        elif kind == "hang":
            world.model_fault = lambda _request: Scripted(text="too late", delay_s=LLM_TIMEOUT_S + 3)
        else:
            await world.model.stop()
        await asyncio.sleep(window_s)
        world.model_fault = None
        if kind == "down":
            await world.model.start()
        await asyncio.sleep(tail_s)
        return {"500": "model 500", "hang": "model hang", "down": "model down"}[kind] + f" {window_s:g} s"

    return run


def platform_failures(status: int, times: int, lead_s: float = 3.0, tail_s: float = 6.0) -> Scenario:
    """The platform refuses the next ``times`` sends with ``status`` (429 with retry_after 1, or 5xx)."""

    async def run(world: World) -> str:
        world.start_load()
        await asyncio.sleep(lead_s)
        world.platform.fail_sends(status, times)
        await asyncio.sleep(tail_s)
        return f"platform {status} x{times}"

    return run


def dropped_connections(bursts: int, burst_s: float = 0.6, apart_s: float = 2.0) -> Scenario:
    """Every connection to the platform is reset as the platform begins to answer, ``bursts`` times."""

    async def run(world: World) -> str:
        world.start_load()
        await asyncio.sleep(apart_s)
        for _ in range(bursts):
            world.platform.proxy.cut = True
            await asyncio.sleep(burst_s)
            world.platform.proxy.cut = False
            await asyncio.sleep(apart_s)
        return f"dropped connections ({world.platform.proxy.stats.cut} cut)"

    return run


def slow_answers(delay_s: float, window_s: float) -> Scenario:
    """The platform's answers arrive ``delay_s`` late for ``window_s`` (past kith's HTTP timeout if longer)."""

    async def run(world: World) -> str:
        world.start_load()
        await asyncio.sleep(2.0)
        world.platform.proxy.delay_s = delay_s
        await asyncio.sleep(window_s)
        world.platform.proxy.delay_s = 0.0
        await asyncio.sleep(delay_s + 2.0)
        return f"slow answers ({delay_s:g} s for {window_s:g} s)"

    return run


def odd_updates() -> Scenario:
    """Telegram: odd text that must be answered (lone surrogates, odd Unicode, an update_id far above the
    rest), and malformed updates that must not stop anything; normal messages around them."""

    async def run(world: World) -> str:
        api: FakeTelegramApi = world.platform.api  # type: ignore[attr-defined]
        chats = world.chat_ids
        odd_texts = ["hi \ud800 there {token}", "{token} \udfff\ud83d", "\u202eright to left\u202c {token}",
                     "zero\u200bwidth\u200d joiner \U0001f468\u200d\U0001f469\u200d\U0001f467 {token}",
                     "combining e\u0301\u0301\u0301 {token}", "nul \x00 inside {token}",
                     "{token} \ufeff bom and \uffff nonchar", "emoji flood " + "\U0001f600" * 500 + " {token}"]
        for i, text in enumerate(odd_texts):
            world.send(chats[i % len(chats)], text)
        malformed: list[dict[str, Any]] = [
            {"message": {"message_id": 1, "date": int(time.time()), "text": "no chat, no sender"}},
            {"message": {"message_id": 2, "chat": {"id": int(chats[0]), "type": "private"}, "date": 0}},
            {"message": {"message_id": 3, "chat": {"id": int(chats[0]), "type": "private"}, "text": None,
                         "date": int(time.time()), "from": {"id": int(chats[0]), "is_bot": False,
                                                          "first_name": "x"}}},
            {"edited_message": {"message_id": 4}},
            {"callback_query": {"id": "1", "from": {"id": int(chats[0]), "is_bot": False, "first_name": "x"},
                                "chat_instance": "1", "data": "pick:\ud800"}},
            {"poll": {"id": "p"}},
            {"something_new": {"x": 1}},
        ]
        for update in malformed:
            api.push_update(update)
        await until(lambda: not api.pending_updates, 30, "the bot never fetched the malformed updates")
        # An update_id far above the others, alone in its batch; then ordinary ones must still come through.
        chat = chats[1 % len(chats)]
        token = world.ledger.new(chat)
        user = api._user(int(chat))
        chat_json = api.add_chat(int(chat), "private", first_name=user["first_name"])
        message = {"message_id": 9_999, "from": user, "chat": chat_json, "date": int(time.time()),
                   "text": f"far ahead {token}"}
        api.push_update({"update_id": 2**62, "message": message})
        await until(lambda: not api.pending_updates, 30, "the bot never fetched the outlying update")
        world.start_load()
        await asyncio.sleep(4.0)
        return f"odd updates ({len(odd_texts) + 1} answerable, {len(malformed)} malformed)"

    return run


def disk_full(hold_s: float, messages: int = 10) -> Scenario:
    """The data directory's filesystem fills up while replies are being committed, then frees."""

    async def run(world: World) -> str:
        filler = world.data_dir / "filler"
        world.start_load()
        await asyncio.sleep(2.0)
        with filler.open("wb", buffering=0) as f, contextlib.suppress(OSError):
            while f.write(b"\0" * 65_536):
                pass
        await asyncio.sleep(hold_s)
        filler.unlink()
        await asyncio.sleep(4.0)
        return f"disk full {hold_s:g} s"

    return run


@contextlib.contextmanager
def small_tmpfs(size_mb: int = 16) -> Iterator[Path]:
    """A tmpfs of ``size_mb`` for a data directory; raises ``OSError`` with the reason where it cannot be had."""
    if os.geteuid() != 0:
        raise OSError("disk full needs root to mount a small tmpfs")
    path = Path(tempfile.mkdtemp(prefix="kith-tmpfs-"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        path.rmdir()
        raise OSError(f"mount -t tmpfs failed: {done.stderr.strip() or done.returncode}")
    try:
        yield path / "data"
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)
        with contextlib.suppress(OSError):
            path.rmdir()


async def run_one(platform_name: str, scenario: Scenario, options: RunOptions) -> Tally:
    with scratch() as root:
        async with World(make_platform(platform_name), options, root) as world:
            await world.wait_connected()
            label = await scenario(world)
            return await world.finish(label)


# --- the table ---------------------------------------------------------------------------------------------------
COLUMNS = ("platform", "fault", "tried", "answered once", "honest reply", "lost", "doubled", "in window",
           "crashed")


def table(tallies: list[Tally]) -> str:
    rows = [COLUMNS] + [(t.platform, t.fault, str(t.tried), str(t.once), str(t.honest), str(t.lost),
                         str(t.doubled), str(t.doubled_in_window), str(t.crashed)) for t in tallies]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = []
    for n, row in enumerate(rows):
        cells = [c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(cells))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    total = Tally("all", "")
    for t in tallies:
        total.tried += t.tried
        total.lost += t.lost
        total.doubled += t.doubled
        total.doubled_in_window += t.doubled_in_window
        total.crashed += t.crashed
    notes = [f"  {t.platform} / {t.fault}: {'; '.join(t.notes)}" for t in tallies if t.notes]
    lines.append("")
    lines.append(f"in all: {total.tried} tried, {total.lost} lost, {total.doubled} doubled "
                 f"({total.doubled_in_window} inside the documented window), {total.crashed} crashes")
    if notes:
        lines.append("notes:")
        lines += notes
    return "\n".join(lines)


def to_json(tallies: list[Tally]) -> str:
    # The tokens too, so a loss or a double can be traced through the bot's logs (--logs) afterwards.
    return json.dumps([{k: getattr(t, k) for k in ("platform", "fault", "tried", "once", "honest", "lost", "doubled",
                                                   "doubled_in_window", "crashed", "notes", "lost_tokens",
                                                   "doubled_tokens")} for t in tallies])
