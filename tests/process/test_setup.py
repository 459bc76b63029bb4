"""``bot.py setup`` as a newcomer meets it: the real command in a subprocess, answering its questions, against
loopback fakes of Ollama, an OpenAI-compatible server and the Telegram Bot API; and ``bot.py run`` offering it.
The files it writes, read and edited on their own, are tests/unit/kith/test_setup_files.py.
"""

from __future__ import annotations

import errno
import io
import os
import stat
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ground.env_file import parse_env
from kith.settings import load_settings
from kith.setup import files as setup_files
from kith.setup.wizard import Dialogue, run_setup
from tests.fakes.ollama_api import FakeOllama
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi
from tests.support.ports import free_port
from tests.support.setup_session import Session, environment_as_it_was, newcomer_env  # noqa: F401 (autouse)

RIGHT_KEY = "sk-FAKE-right-key-for-kith-tests"
WRONG_KEY = "sk-FAKE-wrong-key-for-kith-tests"


@pytest.fixture
async def ollama() -> AsyncIterator[FakeOllama]:
    async with FakeOllama(("llama3.2:latest", "qwen2.5:0.5b")) as fake:
        yield fake


def _config_dir(home: Path) -> Path:
    return home / ".config" / "kith"


async def test_a_local_ollama_is_found_its_models_offered_and_the_choice_checked(ollama: FakeOllama,
                                                                                 tmp_path: Path) -> None:
    home = tmp_path / "home"
    s = await Session.start("setup", env=newcomer_env(home, OLLAMA_HOST=f"127.0.0.1:{ollama.port}"))
    try:
        menu = await s.answer("Which model should kith use? [1]: ", "2")  # llama3.2 offered first, by default
        assert f"Ollama runs at {ollama.url} with 2 models." in menu
        assert "1) Ollama on this machine: llama3.2\n" in menu and "2) Ollama on this machine: qwen2.5:0.5b\n" in menu
        checked = await s.answer("Connect Telegram? [y/N] ", "n")
        assert "ok: ollama/qwen2.5:0.5b answered in" in checked
        await s.answer("Connect Discord? [y/N] ", "")
        await s.answer("Connect Slack? [y/N] ", "")
        await s.answer("Transcribe voice notes? [y/N] ", "n")
        await s.expect("Next: scripts/run")
        assert await s.end() == 0
    finally:
        await s.kill()
    assert [c["model"] for c in ollama.chats] == ["qwen2.5:0.5b"]  # one real call, to the model chosen

    config = _config_dir(home) / "config.toml"
    settings = load_settings(config)
    assert (settings.llm.model, settings.llm.api_base, settings.llm.api_key_env) == \
        ("ollama/qwen2.5:0.5b", ollama.url, "")
    assert not (_config_dir(home) / ".env").exists()  # no secret, no file
    text = config.read_text()
    assert "# Any litellm model:" in text  # the example's own words above each key it sets
    assert "[recall]" not in text  # and only what setup set: the rest keeps kith's defaults


async def test_with_no_model_pulled_it_says_what_to_pull_and_looks_again(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with FakeOllama() as ollama:
        s = await Session.start("setup", env=newcomer_env(home, OLLAMA_HOST=ollama.url))
        try:
            menu = await s.answer("Which model should kith use?: ", "1")
            assert f"Ollama runs at {ollama.url} but has no model yet: run `ollama pull llama3.2`" in menu
            assert "1) Ollama on this machine: look again" in menu
            ollama.models.append("llama3.2:latest")  # the newcomer pulls it in another terminal meanwhile
            again = await s.answer("Which model should kith use? [1]: ", "")
            assert "with 1 model." in again
            assert "ok: ollama/llama3.2 answered" in await s.answer("Connect Telegram? [y/N] ", "n")
        finally:
            await s.kill()
    assert ollama.tag_requests == 2


async def test_with_no_ollama_running_it_says_how_to_install_and_start_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    s = await Session.start("setup", env=newcomer_env(home, OLLAMA_HOST=f"127.0.0.1:{free_port()}"))
    try:
        menu = await s.expect("Which model should kith use?: ")
        assert "No Ollama answers at http://127.0.0.1:" in menu
        assert "install Ollama (https://ollama.com/download), start it (`ollama serve`" in menu
        assert "`ollama pull llama3.2`" in menu
        assert await s.end() == 130  # standard input ended: stopped ...
    finally:
        await s.kill()
    assert "Setup stopped: nothing written." in s.seen
    assert not (home / ".config").exists()  # ... and nothing written


async def _choose_compatible_server(s: Session, fake: FakeOpenAI, key: str) -> str:
    await s.answer("Which model should kith use?: ", "5")
    await s.answer("The server's base URL, e.g. http://localhost:8000/v1: ", fake.base_url)
    await s.answer("Model name at another OpenAI-compatible server: ", "fake-model")  # no default for this one
    return await s.answer("not shown as you type; Enter for none): ", key)


async def test_a_hosted_key_is_checked_kept_in_env_and_read_from_there(fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    fake_llm.required_key = RIGHT_KEY
    home = tmp_path / "home"
    env = newcomer_env(home, OLLAMA_HOST=f"127.0.0.1:{free_port()}")
    s = await Session.start("setup", env=env)
    try:
        await _choose_compatible_server(s, fake_llm, WRONG_KEY)
        refused = await s.answer("Choose again? [Y/n] ", "y")
        assert f"failed: the model openai/fake-model at {fake_llm.base_url} refused the API key" in refused
        await _choose_compatible_server(s, fake_llm, RIGHT_KEY)
        assert "ok: openai/fake-model answered" in await s.answer("Connect Telegram? [y/N] ", "n")
        await s.answer("Connect Discord? [y/N] ", "n")
        await s.answer("Connect Slack? [y/N] ", "n")
        await s.answer("Transcribe voice notes? [y/N] ", "n")
        assert await s.end() == 0
    finally:
        await s.kill()
    assert WRONG_KEY not in s.seen and RIGHT_KEY not in s.seen  # a key is never shown back
    assert fake_llm.authorizations == [f"Bearer {WRONG_KEY}", f"Bearer {RIGHT_KEY}"]

    folder = _config_dir(home)
    dotenv = folder / ".env"
    assert stat.S_IMODE(dotenv.stat().st_mode) == 0o600
    assert parse_env(dotenv.read_text()) == {"LLM_API_KEY": RIGHT_KEY}
    config = (folder / "config.toml").read_text()
    assert "sk-" not in config and 'api_key_env = "LLM_API_KEY"' in config
    settings = load_settings(folder / "config.toml")
    assert (settings.llm.model, settings.llm.api_base, settings.llm.api_key()) == \
        ("openai/fake-model", fake_llm.base_url, RIGHT_KEY)  # LLM_API_KEY is not set here: read from .env

    # kith itself finds the config where setup put it and the key in .env: doctor's one call is let in.
    s = await Session.start("doctor", env=env)
    assert await s.end() == 0
    assert "ok    model: openai/fake-model answered" in s.seen, s.seen
    assert fake_llm.authorizations[-1] == f"Bearer {RIGHT_KEY}"
    # A variable set in the environment wins over .env.
    s = await Session.start("doctor", env={**env, "LLM_API_KEY": WRONG_KEY})
    assert await s.end() == 1
    assert "FAIL  model: the model openai/fake-model" in s.seen and "refused the API key" in s.seen
    assert fake_llm.authorizations[-1] == f"Bearer {WRONG_KEY}"


async def test_voice_notes_are_offered_their_model_checked_with_silence_and_its_key_kept_in_env(
        fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = newcomer_env(home, OLLAMA_HOST=f"127.0.0.1:{free_port()}")
    s = await Session.start("setup", env=env)
    try:
        await _choose_compatible_server(s, fake_llm, RIGHT_KEY)
        await s.answer("Connect Telegram? [y/N] ", "n")
        await s.answer("Connect Discord? [y/N] ", "n")
        await s.answer("Connect Slack? [y/N] ", "n")
        await s.answer("Transcribe voice notes? [y/N] ", "y")
        await s.answer("Which transcription model?: ", "3")
        await s.answer("The server's base URL, e.g. http://localhost:8000/v1: ", fake_llm.base_url)
        await s.answer("Model name at that server [whisper-1]: ", "")
        await s.answer("not shown as you type; Enter for none): ", "sk-whisper-0123456789")
        said = await s.expect("Next: scripts/run")
        assert "ok: openai/whisper-1 answered" in said
        assert await s.end() == 0
    finally:
        await s.kill()
    assert "sk-whisper-0123456789" not in s.seen
    [(model, name, audio)] = fake_llm.transcription_requests  # one real call, with silence: nobody's voice
    assert (model, name) == ("whisper-1", "check.wav") and audio.startswith(b"RIFF")
    folder = _config_dir(home)
    assert parse_env((folder / ".env").read_text()) == {"LLM_API_KEY": RIGHT_KEY,
                                                       "TRANSCRIPTION_API_KEY": "sk-whisper-0123456789"}
    media = load_settings(folder / "config.toml").media
    assert (media.transcription_model, media.transcription_api_base, media.transcription_api_key_env) == \
        ("openai/whisper-1", fake_llm.base_url, "TRANSCRIPTION_API_KEY")


@pytest.mark.parametrize("stray", ["\x0c", "\u2028", "\u200b", "\x1b"])
async def test_a_pasted_key_with_a_stray_character_is_asked_again(fake_llm: FakeOpenAI, tmp_path: Path,
                                                                  stray: str) -> None:
    fake_llm.required_key = RIGHT_KEY
    home = tmp_path / "home"
    s = await Session.start("setup", env=newcomer_env(home, OLLAMA_HOST=f"127.0.0.1:{free_port()}"))
    try:
        await _choose_compatible_server(s, fake_llm, RIGHT_KEY[:8] + stray + RIGHT_KEY[8:])
        refused = await s.answer("not shown as you type; Enter for none): ", RIGHT_KEY)
        assert "which no key or token has: please enter it again." in refused
        assert "ok: openai/fake-model answered" in await s.answer("Connect Telegram? [y/N] ", "n")
        await s.answer("Connect Discord? [y/N] ", "n")
        await s.answer("Connect Slack? [y/N] ", "n")
        await s.answer("Transcribe voice notes? [y/N] ", "n")
        assert await s.end() == 0
    finally:
        await s.kill()
    assert fake_llm.authorizations == [f"Bearer {RIGHT_KEY}"]  # the stray one was never tried
    assert parse_env((_config_dir(home) / ".env").read_text()) == {"LLM_API_KEY": RIGHT_KEY}


def _setup_in_process(config: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """Setup with a compatible server that does not answer (kept unchecked), a key, and no platform."""
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{free_port()}")
    answers = ["5", f"http://127.0.0.1:{free_port()}/v1", "m", RIGHT_KEY, "n", "n", "n", "n", "n"]
    out = io.StringIO()
    code = run_setup(str(config), Dialogue(io.StringIO("\n".join(answers) + "\n"), out))
    return code, out.getvalue()


@pytest.mark.parametrize("unwritable", [".env", "config.toml"])
def test_a_file_setup_cannot_write_is_one_line_that_says_what_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unwritable: str
) -> None:
    # The file cannot be created (a read-only or full disk says so the same way): its temporary name is taken.
    (tmp_path / f".{unwritable}.{os.getpid()}.tmp").mkdir()
    code, said = _setup_in_process(tmp_path / "config.toml", monkeypatch)
    assert code == 1
    last = said.rstrip("\n").splitlines()[-1]
    why = os.strerror(errno.EISDIR)
    if unwritable == ".env":
        assert last == f"Nothing written: cannot write {tmp_path / '.env'} ({why})."
        assert not (tmp_path / ".env").exists()
    else:
        assert last == (f"Written: {tmp_path / '.env'}, but not {tmp_path / 'config.toml'} ({why}): run setup again "
                        "once it can be written.")
        assert parse_env((tmp_path / ".env").read_text()) == {"LLM_API_KEY": RIGHT_KEY}
    assert not (tmp_path / "config.toml").exists()
    assert RIGHT_KEY not in said


def test_a_config_it_cannot_read_or_try_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "dir" / "config.toml").mkdir(parents=True)
    code, said = _setup_in_process(tmp_path / "dir" / "config.toml", monkeypatch)
    assert code == 1
    assert said.rstrip("\n").splitlines()[-1] == \
        f"Nothing written: cannot read {tmp_path / 'dir' / 'config.toml'} ({os.strerror(errno.EISDIR)})"
    (tmp_path / "not-a-directory").write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "not-a-directory"))  # a scratch space kith cannot use
    code, said = _setup_in_process(tmp_path / "config.toml", monkeypatch)
    assert code == 1
    assert said.rstrip("\n").splitlines()[-1] == \
        f"Nothing written: cannot try the config before writing it ({os.strerror(errno.ENOTDIR)})"
    assert not (tmp_path / "config.toml").exists() and not (tmp_path / ".env").exists()


def test_trying_the_config_before_writing_puts_no_secret_in_another_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch_space = tmp_path / "tmp"
    scratch_space.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch_space))
    seen: list[str] = []
    real_load = setup_files.load_settings

    def load_and_look(path: Path) -> object:
        seen.extend(f.read_text(errors="replace") for f in scratch_space.rglob("*") if f.is_file())
        return real_load(path)

    monkeypatch.setattr(setup_files, "load_settings", load_and_look)
    code, _said = _setup_in_process(tmp_path / "config.toml", monkeypatch)
    assert code == 0 and seen  # the config was tried from a scratch copy ...
    assert not any(RIGHT_KEY in text for text in seen)  # ... with the key nowhere but the .env setup writes
    assert parse_env((tmp_path / ".env").read_text()) == {"LLM_API_KEY": RIGHT_KEY}
    assert not any(scratch_space.iterdir())


async def _telegram_pass(s: Session, token_first: str | None = None) -> str:
    """Choose qwen, connect Telegram (a bad token first, if given), no Discord, no Slack: what was said."""
    said = await s.answer("Which model should kith use? [1]: ", "2")  # the configured llama3.2 is the default
    said += await s.answer("Connect Telegram? [y/N] ", "y")
    if token_first is not None:
        said += await s.answer("(TELEGRAM_BOT_TOKEN; not shown as you type): ", token_first)
        said += await s.answer("Try again? [Y/n] ", "")
    said += await s.answer("(TELEGRAM_BOT_TOKEN; not shown as you type): ", FAKE_BOT_TOKEN)
    said += await s.answer("Connect Discord? [y/N] ", "n")
    said += await s.answer("Connect Slack? [y/N] ", "n")
    said += await s.answer("Transcribe voice notes? [y/N] ", "n")
    return said


async def test_a_bad_token_is_asked_again_and_an_existing_config_changes_only_when_accepted(
        ollama: FakeOllama, tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = tmp_path / "mine" / "kith.toml"
    config.parent.mkdir()
    before = (f'# my own notes: kept\n[llm]\nmodel = "ollama/llama3.2"\napi_base = "{ollama.url}"\n\n'
              f'[storage]\ndata_dir = "{tmp_path / "data"}"\n\n[telegram]\nbase_url = "{{tg}}"\n')
    async with FakeTelegramApi() as telegram:
        before = before.replace("{tg}", telegram.base_url)
        config.write_text(before)
        env = newcomer_env(home)
        s = await Session.start("--config", str(config), "setup", env=env)
        try:
            said = await _telegram_pass(s, token_first="7000000001:not-the-token")
            assert f"{config} exists: what you do not change stays" in said
            assert "failed: Telegram rejected the token in TELEGRAM_BOT_TOKEN" in said
            assert "ok: @kith_test_bot (id 7000000001)" in said
            shown = await s.answer("Write these changes? [y/N] ", "")
            assert '-model = "ollama/llama3.2"' in shown and '+model = "ollama/qwen2.5:0.5b"' in shown
            assert "TELEGRAM_BOT_TOKEN: added" in shown and FAKE_BOT_TOKEN not in s.seen
            await s.expect("Nothing written.")
            assert await s.end() == 0
        finally:
            await s.kill()
        assert config.read_text() == before  # said no: not a byte changed
        assert not (config.parent / ".env").exists()

        s = await Session.start("--config", str(config), "setup", env=env)
        try:
            await _telegram_pass(s)
            await s.answer("Write these changes? [y/N] ", "y")
            await s.expect(f"Next: scripts/run --config {config}")
            assert await s.end() == 0
        finally:
            await s.kill()
    after = config.read_text()
    assert after.startswith("# my own notes: kept\n") and f'base_url = "{telegram.base_url}"' in after
    assert FAKE_BOT_TOKEN not in after and "api_key_env" not in after  # only what changed was added
    dotenv = config.parent / ".env"
    assert stat.S_IMODE(dotenv.stat().st_mode) == 0o600
    assert parse_env(dotenv.read_text()) == {"TELEGRAM_BOT_TOKEN": FAKE_BOT_TOKEN}
    assert load_settings(config).llm.model == "ollama/qwen2.5:0.5b"


async def test_run_with_no_config_offers_setup_at_a_terminal_only(fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    fake_llm.required_key = RIGHT_KEY
    home = tmp_path / "home"
    (home / ".local").mkdir(parents=True)
    (home / ".local" / "share").write_text("")  # the default data directory cannot be made: run stops at once
    env = newcomer_env(home, OLLAMA_HOST=f"127.0.0.1:{free_port()}")

    s = await Session.start("run", env=env)  # piped, as a service runs it: no question, on as before
    assert await s.end() == 1
    assert "Set it up" not in s.seen and "kith: cannot create the data directory" in s.seen

    s = await Session.start("run", env=env, tty=True)
    try:
        await s.answer("Set it up now (a few questions)? [Y/n] ", "y")
        await _choose_compatible_server(s, fake_llm, RIGHT_KEY)
        await s.answer("Connect Telegram? [y/N] ", "n")
        await s.answer("Connect Discord? [y/N] ", "n")
        await s.answer("Connect Slack? [y/N] ", "n")
        await s.answer("Transcribe voice notes? [y/N] ", "n")
        await s.expect("Starting kith.")
        assert await s.end() == 1  # it went on to start, on the config just written (and met the data directory)
    finally:
        await s.kill()
    assert RIGHT_KEY not in s.seen  # typed at a terminal, not echoed
    assert f"kith: cannot create the data directory {home / '.local' / 'share' / 'kith'}" in \
        s.seen.rsplit("Starting kith.", 1)[1]
    assert load_settings(_config_dir(home) / "config.toml").llm.model == "openai/fake-model"


async def test_a_declined_offer_is_not_asked_again_at_the_next_start(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".local").mkdir(parents=True)
    (home / ".local" / "share").write_text("")  # the default data directory cannot be made: run stops at once
    env = newcomer_env(home, OLLAMA_HOST=f"127.0.0.1:{free_port()}")
    s = await Session.start("run", env=env, tty=True)
    try:
        await s.answer("Set it up now (a few questions)? [Y/n] ", "n")
        assert await s.end() == 1  # on to start on the defaults (and met the data directory)
    finally:
        await s.kill()
    assert "not asked again" in s.seen and not (_config_dir(home) / "config.toml").exists()

    s = await Session.start("run", env=env, tty=True)
    try:
        assert await s.end() == 1  # no question: a waiting prompt would hang here
    finally:
        await s.kill()
    assert "Set it up" not in s.seen and "`scripts/run setup` sets kith up" in s.seen
    assert "kith: cannot create the data directory" in s.seen
