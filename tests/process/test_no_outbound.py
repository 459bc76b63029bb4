"""kith's promise "no outbound connection the user did not configure; no telemetry", tried on the whole process.

The real ``bot.py run`` (through :mod:`tests.support.fault_bot`, which only points discord.py at the fake) runs on
Telegram, Discord and Slack, every one a loopback fake, with the OpenAI-compatible fake model, capture on and the
default embedder (``onnx:all-MiniLM-L6-v2``), under a fresh ``HOME`` with the default config and data paths. A
``sitecustomize`` put first on ``PYTHONPATH`` installs an audit hook in every Python process of the session (the
bot, its model process, ``doctor``, the operator command): each connect, name lookup, datagram, urllib request and
file opened for writing is appended to one log. uvloop connects and resolves in C, where no audit event is raised,
so the probe also notes the event loop's connection and lookup calls. The session: a DM on each platform,
``/remember``, ``/export``, ``/forget`` confirmed, an operator command through the control socket, ``doctor``, a
restart (SIGTERM, start again) and a DM after it. Then every destination must be loopback or a Unix socket, and
nothing may be written outside the data directory and the encoder cache.

Native code resolves, connects and writes below the hook (ONNX Runtime's telemetry did all three, from C++ threads):
what it leaves on disk is caught by the look at ``HOME`` and ``TMPDIR`` after the session; its traffic alone would
need a kernel-level trace (``strace -f -e trace=connect,sendto``), which this test does not run.
"""

# ruff: noqa: F811

from __future__ import annotations

import asyncio
import importlib.util
import ipaddress
import json
import os
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from kith.control.endpoint import Transport, transport_for
from memory.encoders.encoder_files import EncoderFilesUnavailable, locate
from tests.fakes import discord_api as fake_discord
from tests.fakes import slack_api as fake_slack
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.openai_api import FakeOpenAI, Scripted
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi, RecordedMessage, telegram_api  # noqa: F401
from tests.support.fault_bot import API_ENV, GATEWAY_ENV
from tests.support.paths import ROOT
from tests.support.waiting import until

WAIT_S = 60.0  # generous: the machine may be busy; nothing here is a timing claim
ANA = 501
DISCORD_USER = 910_000_000_000_000_001
SLACK_USER = "U0NOOUT01"
CAPTURE = "The transcript and the stored memories"
AUDIT_ENV = "KITH_TEST_AUDIT_LOG"
# ONNX Runtime keeps its telemetry quiet where one of these says it runs in CI: the bot must not see them here.
CI_MARKERS = {"CI", "TF_BUILD", "GITHUB_ACTIONS", "GITLAB_CI", "CIRCLECI", "TRAVIS", "JENKINS_URL",
              "CODEBUILD_BUILD_ID", "BUILDKITE", "TEAMCITY_VERSION", "APPVEYOR", "BITBUCKET_BUILD_NUMBER"}

# Put first on PYTHONPATH, so every Python process of the session runs it before anything else: the model
# process inherits the bot's environment (llm.process adds only the project root, after it).
SITECUSTOMIZE = r'''
import json
import os
import sys

_PATH = os.environ.get("KITH_TEST_AUDIT_LOG")
_WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _install():
    fd = os.open(_PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def plain(value):
        if value is None or isinstance(value, (int, float)):
            return value
        return os.fsdecode(value) if isinstance(value, bytes) else str(value)

    def note(kind, *fields):
        line = json.dumps({"pid": os.getpid(), "who": " ".join(sys.orig_argv[1:]), "kind": kind,
                           "fields": [plain(f) for f in fields]})
        os.write(fd, line.encode("utf-8", "backslashreplace") + b"\n")  # one write: appended whole

    def hook(event, args):
        try:
            if event == "socket.connect":
                sock, address = args
                note("connect", sock.family, *(address if isinstance(address, tuple) else (address,)))
            elif event == "socket.sendto":
                sock, address = args
                note("sendto", sock.family, *(address if isinstance(address, tuple) else (address,)))
            elif event == "socket.getaddrinfo":
                note("lookup", args[0], args[1])
            elif event in ("socket.gethostbyname", "socket.gethostbyaddr", "socket.getnameinfo"):
                note("lookup", args[0], None)
            elif event == "http.client.connect":
                note("http", args[1], args[2])
            elif event == "urllib.Request":
                note("urllib", args[0], None)
            elif event == "open":
                path, mode, flags = args
                if not isinstance(path, int) and ((flags or 0) & _WRITES or any(c in (mode or "") for c in "wax+")):
                    note("write", os.path.abspath(os.fsdecode(path)))
            elif event in ("os.mkdir", "os.symlink", "os.link"):
                note("write", os.path.abspath(os.fsdecode(args[-3] if event != "os.mkdir" else args[0])))
            elif event == "os.rename":
                note("write", os.path.abspath(os.fsdecode(args[1])))
        except Exception as exc:  # a probe that breaks the process under test would prove nothing
            note("probe-error", event, repr(exc))

    sys.addaudithook(hook)
    try:
        import uvloop
    except ImportError:
        return

    class Probed(uvloop.Loop):
        async def getaddrinfo(self, host, port, *args, **kwargs):
            note("loop-lookup", host, port)
            return await super().getaddrinfo(host, port, *args, **kwargs)

        async def create_connection(self, protocol_factory, host=None, port=None, *args, **kwargs):
            sock = kwargs.get("sock")
            if sock is None:
                note("loop-connect", host, port)
            else:
                note("loop-connect", *_peer(sock))
            return await super().create_connection(protocol_factory, host, port, *args, **kwargs)

        async def create_datagram_endpoint(self, protocol_factory, local_addr=None, remote_addr=None, **kwargs):
            if remote_addr is not None:
                note("loop-datagram", *remote_addr)
            return await super().create_datagram_endpoint(protocol_factory, local_addr, remote_addr, **kwargs)

        async def sock_connect(self, sock, address):
            note("loop-connect", *(address if isinstance(address, tuple) else (address,)))
            return await super().sock_connect(sock, address)

        async def create_unix_connection(self, protocol_factory, path=None, **kwargs):
            note("loop-connect", path, None)
            return await super().create_unix_connection(protocol_factory, path, **kwargs)

    def _peer(sock):
        try:
            peer = sock.getpeername()
        except OSError:
            return ("unconnected socket", None)
        return peer if isinstance(peer, tuple) else (peer, None)

    uvloop.Loop = Probed  # uvloop.new_event_loop() builds whatever uvloop.Loop names


if _PATH:
    _install()
'''


@dataclass(frozen=True, slots=True)
class Event:
    who: str
    kind: str
    fields: tuple[Any, ...]


def _is_local(event: Event) -> bool:
    """Whether what ``event`` reaches or looks up stays on this machine: loopback, a Unix socket, or no host at all
    (a lookup for a bind)."""
    fields = event.fields
    if event.kind in ("connect", "sendto"):  # the socket's family, then its address
        if fields[0] == socket.AF_UNIX:
            return True
        host = fields[1]
    elif event.kind == "urllib":
        host = urlsplit(str(fields[0])).hostname
    else:
        host = fields[0]
    if host is None or host in ("", "localhost") or str(host).startswith("/"):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return str(host).rstrip(".").lower().endswith(".localhost")


def _read_events(log: Path) -> list[Event]:
    events = []
    for line in log.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        events.append(Event(record["who"], record["kind"], tuple(record["fields"])))
    return events


def _tree(root: Path) -> set[Path]:
    return set(root.rglob("*")) if root.exists() else set()


def _encoder_installed() -> str | None:
    try:
        locate("all-MiniLM-L6-v2")
    except EncoderFilesUnavailable as exc:
        return str(exc)
    return None


def _capture_route(request: dict[str, Any]) -> Scripted | None:
    """Capture keeps the bees; every other call is echoed."""
    if not str(request["messages"][0]["content"]).startswith(CAPTURE):
        return None
    said = str(request["messages"][-1]["content"])
    memories = ([{"kind": "fact", "text": "keeps bees on the roof", "evidence": ["I keep bees on the roof"]}]
                if "I keep bees on the roof" in said else [])
    return Scripted(text=json.dumps({"memories": memories}))


def _button(message: RecordedMessage, label: str) -> str:
    assert message.reply_markup is not None, message.visible_text
    return next(row[0]["callback_data"] for row in message.reply_markup["inline_keyboard"] if row[0]["text"] == label)


async def test_a_whole_session_connects_only_to_loopback_and_writes_only_its_own_files(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    missing = _encoder_installed()
    if missing:
        pytest.skip(f"the default encoder is not installed: {missing}")
    discord = FakeDiscord()
    slack = FakeSlack()
    await discord.start()
    await slack.start()
    try:
        await _session(telegram_api, discord, slack, fake_llm, tmp_path)
    finally:
        await slack.stop()
        await discord.stop()


async def _session(telegram: FakeTelegramApi, discord: FakeDiscord, slack: FakeSlack, fake_llm: FakeOpenAI,
                   tmp_path: Path) -> None:
    home, tmp, probe = tmp_path / "home", tmp_path / "tmp", tmp_path / "probe"
    for d in (home, tmp, probe):
        d.mkdir()
    (probe / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    audit = tmp_path / "audit.jsonl"
    # The default places: the config where setup writes it, the data and the encoder cache where kith puts them.
    config = home / ".config" / "kith" / "config.toml"
    config.parent.mkdir(parents=True)
    policy = "".join(f'[policy.{p}]\ndm = "open"\n' for p in ("telegram", "discord", "slack"))
    config.write_text(
        f'[llm]\nmodel = "openai/fake-model"\napi_base = "{fake_llm.base_url}"\ntimeout_s = 10.0\nmax_retries = 0\n'
        '[memory]\ncapture = true\n'
        f'[telegram]\nbase_url = "{telegram.base_url}"\npoll_timeout_s = 1\n'
        f'[slack]\napi_url = "{slack.url}/api/"\n'
        f'[delivery]\ndebounce_ms = 50\n{policy}', encoding="utf-8")
    data_dir = home / ".local" / "share" / "kith"
    cache_dir = home / ".cache" / "kith" / "encoders"
    before = _tree(home)
    fake_llm.route = _capture_route
    # Nothing of this test process's own set-up is passed on (no cost-map switch, no cache dir, no tokens, no
    # switch of a library's), nor the variables by which ONNX Runtime tells a CI run and keeps its telemetry quiet.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LITELLM_", "XDG_", "KITH_", "HF_", "TRANSFORMERS_", "CHROMA_", "ORT_", "ANONYMIZED_"))
           and not k.endswith(("_TOKEN", "_SECRET", "_API_KEY")) and k not in CI_MARKERS}
    env.update({
        "HOME": str(home), "TMPDIR": str(tmp), AUDIT_ENV: str(audit),
        "PYTHONPATH": os.pathsep.join(p for p in (str(probe), env.get("PYTHONPATH", "")) if p),
        "TELEGRAM_BOT_TOKEN": FAKE_BOT_TOKEN,
        "DISCORD_BOT_TOKEN": fake_discord.FAKE_DISCORD_TOKEN, API_ENV: discord.api_base,
        GATEWAY_ENV: discord.gateway_url,
        "SLACK_BOT_TOKEN": fake_slack.FAKE_BOT_TOKEN, "SLACK_APP_TOKEN": fake_slack.FAKE_APP_TOKEN,
    })
    discord.add_user(DISCORD_USER, "dana", global_name="Dana")
    discord_dm = discord.open_dm(DISCORD_USER)
    slack.add_user(SLACK_USER, "sam")

    async def start(n: int) -> tuple[asyncio.subprocess.Process, Path]:
        log = tmp_path / f"bot-{n}.log"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.support.fault_bot", "run", cwd=str(ROOT), env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=log.open("wb"))
        await until(lambda: "kith: running on" in log.read_text(errors="replace"), WAIT_S, what="the bot to start")
        return proc, log

    async def command(*args: str) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.support.fault_bot", *args, cwd=str(ROOT), env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), WAIT_S)
        return proc.returncode or 0, out.decode(), err.decode()

    async def stop(proc: asyncio.subprocess.Process) -> None:
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), WAIT_S) == 0

    def said_to_ana() -> list[RecordedMessage]:
        return [m for m in telegram.sent if m.chat_id == ANA]

    bot, log = await start(1)
    try:
        # A DM on each platform: each reaches the model through the model process and is answered.
        telegram.push_text(ANA, ANA, "hello, I keep bees on the roof")
        await until(lambda: discord.connected > 0 and slack.open_sockets > 0, WAIT_S,
                    what="Discord and Slack to connect")
        discord.push_message(discord_dm, DISCORD_USER, "hello from Discord")
        slack.push_dm(SLACK_USER, "hello from Slack")
        await telegram.wait_for_sent(1, timeout=WAIT_S)
        await until(lambda: any(m.content == "echo: hello from Discord" for m in discord.posted), WAIT_S,
                    what="Discord's reply")
        await until(lambda: any(m.text == "echo: hello from Slack" for m in slack.posted), WAIT_S, what="Slack's reply")

        telegram.push_text(ANA, ANA, "/remember My sister lives in Lisbon")
        await until(lambda: len(said_to_ana()) == 2, WAIT_S, what="/remember's answer")
        telegram.push_text(ANA, ANA, "/export")
        await until(lambda: len(telegram.documents) == 1 and len(said_to_ana()) == 3, WAIT_S,
                    what="the export file")
        telegram.push_text(ANA, ANA, "/forget Lisbon")
        await until(lambda: len(said_to_ana()) == 4, WAIT_S, what="the forget plan")
        telegram.push_callback_query(ANA, ANA, _button(said_to_ana()[-1], "Yes, forget them"))
        await until(lambda: len(said_to_ana()) == 5, WAIT_S, what="the forget's answer")
        assert said_to_ana()[-1].visible_text.startswith("Forgotten: 1 memory"), said_to_ana()[-1].visible_text

        code, out, err = await command("memory", "list", "--account", f"telegram:{ANA}", "--notes")
        assert code == 0 and "Lisbon" not in out, out + err
        code, out, err = await command("doctor")
        assert code == 0, out + err
    finally:
        await stop(bot)
    bot, log2 = await start(2)
    try:
        telegram.push_text(ANA, ANA, "are you back?")
        await until(lambda: len(said_to_ana()) == 6, WAIT_S, what="the reply after the restart")
    finally:
        await stop(bot)
    text = log.read_text(errors="replace") + log2.read_text(errors="replace")
    assert "Traceback" not in text, text[-3000:]

    events = _read_events(audit)
    # The probe saw what it must, or its silence would prove nothing: the model process's calls to the fake model
    # (it inherited the hook), the bot's to the platforms through its event loop, the operator command's and
    # doctor's through the bot's control socket.
    seen = sorted({(e.who, e.kind) for e in events})
    model_ports = {e.fields[-1] for e in events if "llm.worker" in e.who and e.kind.endswith("connect")}
    assert fake_llm.port in model_ports, seen
    # uvloop connects and resolves in C: there the probe's own notes are what shows the bot's traffic.
    on_loop = "loop-connect" if importlib.util.find_spec("uvloop") else "connect"
    bot_ports = {e.fields[-1] for e in events if e.who.endswith(" run") and e.kind == on_loop}
    assert {telegram.port, urlsplit(discord.url).port, urlsplit(slack.url).port} <= bot_ports, seen
    # The control channel is the data directory's Unix socket, or loopback TCP where that path is too long (a test
    # runner's deeper temporary directories).
    via_unix = transport_for(data_dir) is Transport.UNIX
    for who in ("memory list", "doctor"):
        assert any(who in e.who and e.kind == "connect" and (
            str(e.fields[-1]).endswith("control.sock") if via_unix else e.fields[0] != socket.AF_UNIX and _is_local(e))
            for e in events), seen
    assert not [e for e in events if e.kind == "probe-error"], [e for e in events if e.kind == "probe-error"]
    leaks = sorted({f"{e.kind} {e.fields!r} from {e.who}" for e in events
                    if e.kind not in ("write", "probe-error") and not _is_local(e)})
    assert leaks == [], "outbound beyond loopback:\n" + "\n".join(leaks)

    allowed = (data_dir, cache_dir, Path("/dev"))
    # The places themselves and their parents may be made; the interpreter's bytecode cache is Python's, not kith's.
    written = sorted({e.fields[0] for e in events if e.kind == "write"
                      and not any(Path(e.fields[0]).is_relative_to(a) or a.is_relative_to(e.fields[0]) for a in allowed)
                      and "__pycache__" not in e.fields[0]})
    assert written == [], "written outside the data directory and the encoder cache:\n" + "\n".join(written)
    new = sorted(str(p) for p in _tree(home) - before
                 if not any(p == a or p.is_relative_to(a) or a.is_relative_to(p) for a in (data_dir, cache_dir)))
    assert new == [], "new under HOME besides the data directory and the encoder cache:\n" + "\n".join(new)
    assert list(tmp.iterdir()) == [], "left in TMPDIR: " + ", ".join(p.name for p in tmp.iterdir())
