"""Two bots on one PostgreSQL database (issue #36): the second waits as a standby, saying so, and polls nothing; the
active one SIGKILLed, the standby takes over within 10 s and answers what came meanwhile, each message once. Real
``bot.py run`` processes (each with its own data directory, as on two machines) on the test session's PostgreSQL
cluster, against the fake Bot API."""

# ruff: noqa: F811

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.telegram_api import FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.config_file import write_config
from tests.support.postgres import cluster
from tests.support.telegram_app import start_telegram_bot
from tests.support.waiting import until

ANA = 7_401
TAKE_OVER_S = 10.0


def _config(tmp_path: Path, name: str, fake: FakeOpenAI, tg: FakeTelegramApi, url: str) -> Path:
    """A bot of its own data directory (another machine's) on the shared database ``url``."""
    path = write_config(tmp_path / f"{name}.toml", fake, tmp_path / name, extra=(
        f'[telegram]\nbase_url = "{tg.base_url}"\npoll_timeout_s = 1\n[policy.telegram]\ndm = "open"\n'
        '[heartbeat]\nenabled = false\n'))
    text = path.read_text(encoding="utf-8").replace("[storage]\n", f'[storage]\ndatabase_url = "{url}"\n', 1)
    path.write_text(text, encoding="utf-8")
    return path


class Lines:
    """A process's standard error, line by line, as it comes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.lines: list[str] = []
        assert process.stderr is not None
        self._task = asyncio.get_running_loop().create_task(self._read(process.stderr))

    async def _read(self, stream: asyncio.StreamReader) -> None:
        async for line in stream:
            self.lines.append(line.decode("utf-8", "replace").rstrip())

    def has(self, words: str) -> bool:
        return any(words in line for line in self.lines)

    async def close(self) -> None:
        await asyncio.wait_for(self._task, 30)


async def _end(first: asyncio.subprocess.Process, second: asyncio.subprocess.Process | None) -> None:
    """The killed bot reaped (killed now if the test ended first), the standby stopped as an operator stops it."""
    if first.returncode is None:
        first.send_signal(signal.SIGKILL)
        await first.wait()
    if second is not None and second.returncode is None:
        second.send_signal(signal.SIGTERM)
        await asyncio.wait_for(second.wait(), 30)


async def test_a_standby_waits_then_takes_over_within_ten_seconds_of_a_kill_and_nothing_is_answered_twice(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    url = cluster().new_database()
    first_cfg = _config(tmp_path, "first", fake_llm, telegram_api, url)
    second_cfg = _config(tmp_path, "second", fake_llm, telegram_api, url)
    first = await start_telegram_bot(first_cfg)
    first_err = Lines(first)
    second: asyncio.subprocess.Process | None = None
    try:
        await until(lambda: first_err.has("running on telegram"), 60, what="the first bot to start")
        second = await start_telegram_bot(second_cfg)
        second_err = Lines(second)
        await until(lambda: second_err.has("waiting as its standby"), 60, what="the second bot to wait")
        telegram_api.push_text(ANA, ANA, "hello while the first is active")
        await telegram_api.wait_for_sent(1, timeout=30)
        await asyncio.sleep(1.5)  # long polls of both would have met by now
        assert not second_err.has("running on telegram")  # the standby polls nothing

        first.send_signal(signal.SIGKILL)
        await first.wait()
        killed = time.monotonic()
        telegram_api.push_text(ANA, ANA, "hello while nobody is active")
        await until(lambda: second_err.has("running on telegram"), 30, what="the standby to take over")
        took = time.monotonic() - killed
        await telegram_api.wait_for_sent(2, timeout=30)
        await asyncio.sleep(1.0)  # time for anything doubled to show up
        assert took <= TAKE_OVER_S, f"the standby took {took:.1f} s to take over"
        assert second_err.has("this kith is now the active one")
        assert sorted(m.visible_text for m in telegram_api.sent) == [
            "echo: hello while nobody is active", "echo: hello while the first is active"]
    finally:
        await _end(first, second)
    await first_err.close()
    assert not any("Traceback" in line for line in second_err.lines), second_err.lines


CHATS = 8
PER_CHAT = 5


async def test_the_active_bot_killed_under_load_loses_nothing_and_doubles_only_in_the_documented_window(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    """Forty messages from eight people arrive steadily; the active bot is SIGKILLed half-way. The standby answers
    every one, each chat's replies in the order its messages came. A reply may go out twice only where
    docs/delivery.md says: the platform took it but the killed bot had not marked it sent, at most one per chat."""
    url = cluster().new_database()
    first = await start_telegram_bot(_config(tmp_path, "first", fake_llm, telegram_api, url))
    first_err = Lines(first)
    second: asyncio.subprocess.Process | None = None
    pushed: list[tuple[int, str]] = []
    try:
        await until(lambda: first_err.has("running on telegram"), 60, what="the first bot to start")
        second = await start_telegram_bot(_config(tmp_path, "second", fake_llm, telegram_api, url))
        second_err = Lines(second)
        await until(lambda: second_err.has("waiting as its standby"), 60, what="the second bot to wait")
        killed_after: list[tuple[int, str]] = []
        for n in range(PER_CHAT):
            for chat in range(CHATS):
                who = ANA + 100 + chat
                text = f"message {n} from {chat}"
                telegram_api.push_text(who, who, text)
                pushed.append((who, text))
                await asyncio.sleep(0.03)
            if n == PER_CHAT // 2 and first.returncode is None:
                first.send_signal(signal.SIGKILL)
                await first.wait()
                killed_after = list(pushed)
        await until(lambda: second_err.has("running on telegram"), 30, what="the standby to take over")

        def answered(replies: list[str]) -> list[str]:
            # Messages a chat sent while no bot was active reach the standby together, and are answered as one
            # turn (as any messages sent in a row are): the echo quotes each, a line apiece.
            return [line for reply in dict.fromkeys(replies) for line in reply.removeprefix("echo: ").split("\n")]

        def all_answered() -> bool:
            said = {line for line in answered([m.visible_text for m in telegram_api.sent])}
            return all(text in said for _who, text in pushed)

        try:
            await until(all_answered, 60, what="every message to be answered")
        except AssertionError:
            sent = [m.visible_text for m in telegram_api.sent]
            raise AssertionError(f"sent: {sent}") from None
        await asyncio.sleep(1.0)  # time for anything doubled to show up
        for chat in range(CHATS):
            who = ANA + 100 + chat
            replies = telegram_api.texts_to(who)
            assert answered(replies) == [text for w, text in pushed if w == who], replies  # all, once, in order
            doubled = [r for r in dict.fromkeys(replies) if replies.count(r) > 1]
            assert len(doubled) <= 1, replies  # one reply in flight per chat at the kill, at most
            assert all((who, r.removeprefix("echo: ")) in killed_after for r in doubled), doubled
    finally:
        await _end(first, second)
    await first_err.close()
