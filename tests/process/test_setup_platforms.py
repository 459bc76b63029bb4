"""``bot.py setup``'s Discord and Slack questions, answered in the real command against loopback fakes of
Discord's REST API and Slack's Web API: a token is checked with one real call, asked again with a one-line
reason when refused, and kept only in the ``.env`` beside the config.

kith has no setting for Discord's URL (Discord has one address), so the process is started as
``tests.support.fault_bot``, which points discord.py at the fake; Slack's is the config's ``slack.api_url``.
"""

from __future__ import annotations

import asyncio
import re
import stat
import sys
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ground.env_file import parse_env
from kith.settings import load_settings
from tests.fakes.discord_api import API_PREFIX, FAKE_DISCORD_TOKEN, FakeDiscord
from tests.fakes.ollama_api import FakeOllama
from tests.fakes.slack_api import BOT_NAME, BOT_USER_ID, FAKE_APP_TOKEN, FAKE_BOT_TOKEN, TEAM_ID, FakeSlack
from tests.support.fault_bot import API_ENV
from tests.support.paths import ROOT
from tests.support.ports import free_port
from tests.support.setup_session import Session, environment_as_it_was, newcomer_env  # noqa: F401 (autouse)

WRONG_DISCORD_TOKEN = "MTAwMDAwMDAwMDAwMDAwMDA5.wrong.not-the-bot-token"
WRONG_BOT_TOKEN = "xoxb-wrong_bot_token_for_kith_tests"
WRONG_APP_TOKEN = "xapp-1-A0KITH-3000-not-the-app-token"
USER_TOKEN = "xoxp-a_person_s_own_token_not_the_bot_s"
SIGNING_SECRET = "0123456789abcdef0123456789abcdef"
KEEP_MODEL = "Which model should kith use? [1]: "  # the configured (or suggested) llama3.2 is the default
TRY_AGAIN = "Try again? [Y/n] "


@pytest.fixture
async def ollama() -> AsyncIterator[FakeOllama]:
    async with FakeOllama(("llama3.2:latest",)) as fake:
        yield fake


@pytest.fixture
async def discord_rest() -> AsyncIterator[FakeDiscord]:
    """The fake Discord, for a process to be pointed at (this process's discord.py is left alone)."""
    fake = await FakeDiscord().start()
    try:
        yield fake
    finally:
        await fake.stop()


async def _setup(config: Path, env: dict[str, str]) -> Session:
    """``bot.py --config CONFIG setup`` over pipes, discord.py pointed wherever ``env`` says."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.support.fault_bot", "--config", str(config), "setup",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        cwd=str(ROOT), env=env, start_new_session=True)
    return Session(proc)


def _existing_config(path: Path, ollama: FakeOllama, extra: str) -> str:
    """A config already on the llama3.2 the fake Ollama has, plus ``extra``: its text."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = f'[llm]\nmodel = "ollama/llama3.2"\napi_base = "{ollama.url}"\n\n{extra}'
    path.write_text(text)
    return text


async def _refused(s: Session, reason: str, *, pattern: bool = False) -> None:
    """The check's answer is one line, right after the last secret (whose echo is an empty line), then the
    offer to try again, taken. ``reason`` is the line's text, or with ``pattern`` a regular expression."""
    said = await s.answer(TRY_AGAIN, "")
    line = reason if pattern else re.escape(reason)
    assert re.fullmatch(rf"\n  failed: {line}\n  {re.escape(TRY_AGAIN)}", said), said


async def _on_to_slack(s: Session) -> None:
    """Keep the model, skip Telegram and Discord, and say yes to Slack."""
    await s.answer(KEEP_MODEL, "")
    await s.answer("Connect Telegram? [y/N] ", "n")
    await s.answer("Connect Discord? [y/N] ", "n")
    await s.answer("Connect Slack? [y/N] ", "y")


def _files_holding(root: Path, secret: str) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes())


# --- Discord -----------------------------------------------------------------------------------------------

async def test_discord_asks_again_after_a_rejected_token_and_keeps_the_accepted_one_only_in_env(
        ollama: FakeOllama, discord_rest: FakeDiscord, tmp_path: Path) -> None:
    config = tmp_path / "mine" / "kith.toml"
    s = await _setup(config, newcomer_env(tmp_path / "home", OLLAMA_HOST=ollama.url,
                                          **{API_ENV: discord_rest.api_base}))
    try:
        await s.answer(KEEP_MODEL, "")
        await s.answer("Connect Telegram? [y/N] ", "n")
        await s.answer("Connect Discord? [y/N] ", "y")
        await s.answer("(DISCORD_BOT_TOKEN; not shown as you type): ", WRONG_DISCORD_TOKEN)
        await _refused(s, "Discord rejected the token in DISCORD_BOT_TOKEN")
        await s.answer("(DISCORD_BOT_TOKEN; not shown as you type): ", FAKE_DISCORD_TOKEN)
        accepted = await s.answer("Connect Slack? [y/N] ", "n")
        assert accepted == f"\n  ok: @kith_test_bot (id {discord_rest.bot_id})\nConnect Slack? [y/N] ", accepted
        await s.answer("Transcribe voice notes? [y/N] ", "n")
        said = await s.expect(f"Next: scripts/run --config {config}")
        assert "On Discord, the first message kith gets from you is answered with a pairing code" in said
        assert await s.end() == 0
    finally:
        await s.kill()
    # Both tries were real calls to the fake: the token Discord refused, then the one it took.
    assert [(c.name, c.status) for c in discord_rest.calls] == [("get_me", 401), ("get_me", 200)]
    # Neither token is shown back or logged (the process's stderr is in what it said).
    assert FAKE_DISCORD_TOKEN not in s.seen and WRONG_DISCORD_TOKEN not in s.seen

    dotenv = config.parent / ".env"
    assert stat.S_IMODE(dotenv.stat().st_mode) == 0o600
    assert parse_env(dotenv.read_text()) == {"DISCORD_BOT_TOKEN": FAKE_DISCORD_TOKEN}
    assert _files_holding(tmp_path, FAKE_DISCORD_TOKEN) == [dotenv]  # not the config, nor any other file
    assert _files_holding(tmp_path, WRONG_DISCORD_TOKEN) == []
    assert tomllib.loads(config.read_text())["discord"] == {"token_env": "DISCORD_BOT_TOKEN"}  # names the variable
    assert load_settings(config).discord.token() == FAKE_DISCORD_TOKEN  # and kith finds the token by it


# --- Slack -------------------------------------------------------------------------------------------------

async def test_slack_socket_mode_asks_again_until_slack_takes_both_tokens_and_keeps_them_only_in_env(
        ollama: FakeOllama, tmp_path: Path) -> None:
    config = tmp_path / "mine" / "kith.toml"
    async with FakeSlack() as slack:
        # The config's own variable names: setup asks for those and writes those.
        before = _existing_config(config, ollama, f'[slack]\napi_url = "{slack.api_url}"\nbot_token_env = '
                                                  '"KITH_SLACK_BOT"\napp_token_env = "KITH_SLACK_APP"\n')
        s = await _setup(config, newcomer_env(tmp_path / "home"))
        try:
            await _on_to_slack(s)
            # The app-level token where the bot token goes: not an xoxb- token, refused before any call to Slack,
            # naming the config's own variable.
            await s.answer("  Bot token (xoxb-...) (KITH_SLACK_BOT; not shown as you type): ", FAKE_APP_TOKEN)
            await s.answer("  App-level token (xapp-..., scope connections:write) (KITH_SLACK_APP; "
                           "not shown as you type): ", FAKE_APP_TOKEN)
            await _refused(s, ".*KITH_SLACK_BOT.*", pattern=True)
            for bot, app, reason in (
                    (WRONG_BOT_TOKEN, FAKE_APP_TOKEN, "Slack rejected the token in KITH_SLACK_BOT (invalid_auth)"),
                    (FAKE_BOT_TOKEN, WRONG_APP_TOKEN,
                     f"@{BOT_NAME} in team {TEAM_ID} (user {BOT_USER_ID}), but Slack rejected the app-level token "
                     "in KITH_SLACK_APP (invalid_auth)")):
                await s.answer("(KITH_SLACK_BOT; not shown as you type): ", bot)
                await s.answer("(KITH_SLACK_APP; not shown as you type): ", app)
                await _refused(s, reason)
            await s.answer("(KITH_SLACK_BOT; not shown as you type): ", FAKE_BOT_TOKEN)
            await s.answer("(KITH_SLACK_APP; not shown as you type): ", FAKE_APP_TOKEN)
            shown = await s.answer("Transcribe voice notes? [y/N] ", "n")
            shown += await s.answer("Write these changes? [y/N] ", "y")
            assert f"\n  ok: @{BOT_NAME} in team {TEAM_ID} (user {BOT_USER_ID}), Socket Mode\n" in shown, shown
            assert "KITH_SLACK_BOT: added" in shown and "KITH_SLACK_APP: added" in shown
            await s.expect(f"Next: scripts/run --config {config}")
            assert await s.end() == 0
        finally:
            await s.kill()
    calls = [(c.method, c.token) for c in slack.calls]
    assert calls[-5:] == [("auth.test", WRONG_BOT_TOKEN), ("auth.test", FAKE_BOT_TOKEN),
                          ("apps.connections.open", WRONG_APP_TOKEN), ("auth.test", FAKE_BOT_TOKEN),
                          ("apps.connections.open", FAKE_APP_TOKEN)]
    assert calls[:-5] in ([], [("auth.test", FAKE_APP_TOKEN)])  # the xapp- one: refused by Slack, or unsent
    for secret in (FAKE_BOT_TOKEN, FAKE_APP_TOKEN, WRONG_BOT_TOKEN, WRONG_APP_TOKEN):
        assert secret not in s.seen

    dotenv = config.parent / ".env"
    assert stat.S_IMODE(dotenv.stat().st_mode) == 0o600
    assert parse_env(dotenv.read_text()) == {"KITH_SLACK_BOT": FAKE_BOT_TOKEN, "KITH_SLACK_APP": FAKE_APP_TOKEN}
    assert config.read_text() == before  # it already named both variables: nothing in it changed
    assert _files_holding(tmp_path, FAKE_BOT_TOKEN) == [dotenv] and _files_holding(tmp_path, FAKE_APP_TOKEN) == [dotenv]
    settings = load_settings(config).slack
    assert (settings.bot_token(), settings.app_token()) == (FAKE_BOT_TOKEN, FAKE_APP_TOKEN)


async def test_slack_refuses_a_working_token_that_is_not_a_bot_token(ollama: FakeOllama, tmp_path: Path) -> None:
    config = tmp_path / "mine" / "kith.toml"
    # auth.test answers a user token as it answers a bot token (it is a valid token): this fake Slack takes it.
    async with FakeSlack(bot_token=USER_TOKEN) as slack:
        before = _existing_config(config, ollama, f'[slack]\napi_url = "{slack.api_url}"\n')
        s = await _setup(config, newcomer_env(tmp_path / "home"))
        try:
            # All answers at once, then the end of input: a refusal right after the bot token (before the
            # app-level token is asked) reads as well as one after both.
            assert s.proc.stdin is not None
            s.proc.stdin.write("\n".join(("", "n", "n", "y", USER_TOKEN, FAKE_APP_TOKEN, "")).encode())
            assert await s.end() == 130  # input ends at some later question: stopped, nothing written
        finally:
            await s.kill()
    assert USER_TOKEN not in s.seen
    after_token = s.seen.partition("(SLACK_BOT_TOKEN; not shown as you type): ")[2]
    failed = [line for line in after_token.splitlines() if line.startswith("  failed: ")]
    assert len(failed) == 1 and "xoxb-" in failed[0], s.seen
    assert f"\n  {TRY_AGAIN}" in after_token
    assert config.read_text() == before and not (config.parent / ".env").exists()


async def test_slack_http_mode_asks_for_the_signing_secret_instead_of_an_app_token(
        ollama: FakeOllama, tmp_path: Path) -> None:
    config = tmp_path / "mine" / "kith.toml"
    async with FakeSlack() as slack:
        before = _existing_config(config, ollama, f'[slack]\nmode = "http"\napi_url = "{slack.api_url}"\n')
        s = await _setup(config, newcomer_env(tmp_path / "home"))
        try:
            await _on_to_slack(s)
            await s.answer("  Bot token (xoxb-...) (SLACK_BOT_TOKEN; not shown as you type): ", FAKE_BOT_TOKEN)
            await s.answer("  Signing secret (Basic Information) (SLACK_SIGNING_SECRET; not shown as you type): ", "")
            await _refused(s, "a token is missing")  # no secret: not checked, asked again
            await s.answer("(SLACK_BOT_TOKEN; not shown as you type): ", FAKE_BOT_TOKEN)
            await s.answer("(SLACK_SIGNING_SECRET; not shown as you type): ", SIGNING_SECRET)
            shown = await s.answer("Transcribe voice notes? [y/N] ", "n")
            shown += await s.answer("Write these changes? [y/N] ", "y")
            assert f"\n  ok: @{BOT_NAME} in team {TEAM_ID} (user {BOT_USER_ID}), HTTP events on 127.0.0.1:3000\n" \
                in shown, shown
            await s.expect(f"Next: scripts/run --config {config}")
            assert await s.end() == 0
        finally:
            await s.kill()
    assert "SLACK_APP_TOKEN" not in s.seen and "App-level token" not in s.seen  # Socket Mode's token is not asked
    assert [c.method for c in slack.calls] == ["auth.test"]  # the bot token checked once; the empty try never
    assert FAKE_BOT_TOKEN not in s.seen and SIGNING_SECRET not in s.seen

    dotenv = config.parent / ".env"
    assert parse_env(dotenv.read_text()) == {"SLACK_BOT_TOKEN": FAKE_BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET}
    assert config.read_text() == before
    assert _files_holding(tmp_path, SIGNING_SECRET) == [dotenv]
    settings = load_settings(config).slack
    assert (settings.bot_token(), settings.signing_secret()) == (FAKE_BOT_TOKEN, SIGNING_SECRET)


# --- an unreachable platform -------------------------------------------------------------------------------

async def test_an_unreachable_platform_is_one_line_and_nothing_of_it_is_written(
        ollama: FakeOllama, tmp_path: Path) -> None:
    config = tmp_path / "mine" / "kith.toml"
    discord_port, slack_port = free_port(), free_port()
    slack_api = f"http://127.0.0.1:{slack_port}/api/"
    before = _existing_config(config, ollama, f'[slack]\napi_url = "{slack_api}"\n')
    env = newcomer_env(tmp_path / "home", **{API_ENV: f"http://127.0.0.1:{discord_port}{API_PREFIX}"})
    s = await _setup(config, env)
    try:
        await s.answer(KEEP_MODEL, "")
        await s.answer("Connect Telegram? [y/N] ", "n")
        await s.answer("Connect Discord? [y/N] ", "y")
        await s.answer("(DISCORD_BOT_TOKEN; not shown as you type): ", FAKE_DISCORD_TOKEN)
        said = await s.answer(TRY_AGAIN, "n")
        assert said == f"\n  failed: cannot reach Discord (ClientConnectorError)\n  {TRY_AGAIN}", said
        said = await s.answer("Connect Slack? [y/N] ", "y")
        assert said == "n\n  Discord is not connected.\nConnect Slack? [y/N] ", said  # "n": the answer's echo
        await s.answer("(SLACK_BOT_TOKEN; not shown as you type): ", FAKE_BOT_TOKEN)
        await s.answer("(SLACK_APP_TOKEN; not shown as you type): ", FAKE_APP_TOKEN)
        said = await s.answer(TRY_AGAIN, "n")
        assert said == f"\n  failed: cannot reach the Web API at {slack_api} (ClientConnectorError)\n  {TRY_AGAIN}", \
            said
        said = await s.answer("Transcribe voice notes? [y/N] ", "n")
        said += await s.expect(f"Next: scripts/run --config {config}")
        assert "  Slack is not connected.\n" in said
        assert "already say this: nothing to write." in said
        assert await s.end() == 0
    finally:
        await s.kill()
    assert "Traceback" not in s.seen
    assert FAKE_DISCORD_TOKEN not in s.seen and FAKE_BOT_TOKEN not in s.seen and FAKE_APP_TOKEN not in s.seen
    assert config.read_text() == before  # no [discord], no token variable: not a byte changed
    assert not (config.parent / ".env").exists()
    for secret in (FAKE_DISCORD_TOKEN, FAKE_BOT_TOKEN, FAKE_APP_TOKEN):
        assert _files_holding(tmp_path, secret) == []
