"""bot.py as a person runs it: a subprocess talking to the loopback fake LLM server."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.bot_process import run_bot
from tests.support.config_file import write_config
from tests.support.paths import ROOT


def test_help_imports_no_heavy_library() -> None:
    code = ("import sys, runpy; sys.argv=['bot.py','--help']\n"
            "try: runpy.run_path('bot.py', run_name='__main__')\n"
            "except SystemExit: pass\n"
            "heavy=[m for m in ('litellm','chromadb','telegram','discord','slack_bolt') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    # How fast it is, is measured in bench/core_overhead.py; here: what it loads.
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert "HEAVY []" in result.stdout
    assert "chat" in result.stdout and "doctor" in result.stdout


async def test_scripted_chat_keeps_history_across_restarts(fake_llm, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "kith.toml", fake_llm, tmp_path / "data")
    fake_llm.reply("Nice to meet you, Ana.")
    fake_llm.reply("Noted: Miso the cat.")
    code, out, err = await run_bot("--config", str(cfg), "chat", stdin="I'm Ana\nMy cat is Miso\n")
    assert code == 0, err
    assert out.splitlines() == ["Nice to meet you, Ana.", "Noted: Miso the cat."]

    fake_llm.reply("Your cat is Miso.")
    code, out, err = await run_bot("--config", str(cfg), "chat", stdin="what is my cat called?\n")
    assert code == 0, err
    assert out.strip() == "Your cat is Miso."
    seen = [m["content"] for m in fake_llm.requests[-1]["messages"][1:]]
    assert seen == ["I'm Ana", "Nice to meet you, Ana.", "My cat is Miso", "Noted: Miso the cat.",
                    "what is my cat called?"]


async def test_an_unknown_command_is_answered_as_unknown_not_sent_to_the_model(fake_llm, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "kith.toml", fake_llm, tmp_path / "data")
    fake_llm.reply("That path does sound full.")
    code, out, err = await run_bot("--config", str(cfg), "chat", stdin="/frobnicate now\n/usr/bin is full\n")
    assert code == 0, err
    assert out.splitlines() == ["I don't know the command /frobnicate. /help lists the ones I do.",
                                "That path does sound full."]
    assert [r["messages"][-1]["content"] for r in fake_llm.requests] == ["/usr/bin is full"]


async def test_unreachable_model_says_what_to_set(tmp_path: Path) -> None:
    cfg = tmp_path / "kith.toml"
    cfg.write_text(f'[llm]\nmodel = "openai/fake"\napi_base = "http://127.0.0.1:9/v1"\ntimeout_s = 2.0\n'
                   f'max_retries = 0\n[storage]\ndata_dir = "{tmp_path / "data"}"\n')
    code, out, err = await run_bot("--config", str(cfg), "chat", stdin="hello?\n")
    assert code == 0
    assert out.strip() == "I can't reach my model right now. Please try again in a moment."
    assert "cannot reach the model openai/fake at http://127.0.0.1:9/v1" in err
    assert "set [llm] model, api_base and api_key_env" in err
    assert "Traceback" not in err


async def test_the_terminal_chat_logs_to_a_file_not_over_the_conversation(tmp_path: Path) -> None:
    cfg = tmp_path / "kith.toml"
    data = tmp_path / "data"
    cfg.write_text(f'[llm]\nmodel = "openai/fake"\napi_base = "http://127.0.0.1:9/v1"\ntimeout_s = 2.0\n'
                   f'max_retries = 0\n[storage]\ndata_dir = "{data}"\n[memory]\nembedder = "none"\n')
    # `run` with no platform token falls back to the terminal chat, as `chat` is.
    code, out, err = await run_bot("--config", str(cfg), "run", stdin="hello?\n")
    assert code == 0
    log = data / "logs" / "kith.log"
    assert " INFO " not in out + err and " WARNING " not in out + err
    assert f"kith: logging to {log}" in err
    assert "INFO kith.scheduler: scheduler started" in log.read_text(encoding="utf-8")
    assert (log.stat().st_mode & 0o777) == 0o600
    # The model could not be reached: one line says so, and the end counts the warnings the file holds.
    assert err.splitlines()[-1].startswith("kith: ") and f"this session; see {log}" in err.splitlines()[-1]

    code, _out, err = await run_bot("--config", str(cfg), "-v", "chat", stdin="")
    assert code == 0 and " INFO " in err  # -v keeps the log on the terminal too


async def test_config_error_is_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "kith.toml"
    cfg.write_text("[llm]\ntimeout = 3\n")
    code, _out, err = await run_bot("--config", str(cfg), "chat")
    assert code == 2
    assert err.strip() == f"kith: config error: {cfg}: llm.timeout: unknown key"


async def test_doctor_reports_each_check(fake_llm, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "kith.toml", fake_llm, tmp_path / "data")
    fake_llm.reply("ok")
    code, out, err = await run_bot("--config", str(cfg), "doctor")
    lines = out.splitlines()
    assert code == 0, out + err
    assert lines[0] == f"ok    config: {cfg}"
    assert lines[1].startswith("ok    data directory:")
    assert any(line.startswith("ok    model: openai/fake-model answered") for line in lines)

    fake_llm.fail(500)
    code, out, _ = await run_bot("--config", str(cfg), "doctor")
    assert code == 1
    assert any(line.startswith("FAIL  model: cannot reach the model openai/fake-model") for line in out.splitlines())


async def test_doctor_asks_a_local_model_directly_and_warns_about_optional_parts(tmp_path: Path) -> None:
    from aiohttp import web

    asked: list[dict[str, object]] = []
    pulled = {"llama3.2"}

    async def chat(request: web.Request) -> web.Response:  # Ollama's own chat API
        body = await request.json()
        asked.append(body)
        if body["model"] not in pulled:
            return web.json_response({"error": f"model '{body['model']}' not found"}, status=404)
        return web.json_response({"model": body["model"], "message": {"role": "assistant", "content": "ok"},
                                  "done": True})

    app = web.Application()
    app.router.add_post("/api/chat", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        cfg = tmp_path / "kith.toml"
        cfg.write_text(f'[llm]\nmodel = "ollama/llama3.2"\napi_base = "http://127.0.0.1:{port}"\n'
                       f'[storage]\ndata_dir = "{tmp_path / "data"}"\n'
                       f'[memory]\nembedder = "onnx:{tmp_path / "no-such-model"}"\n')
        code = ("import sys, runpy; sys.argv=['bot.py','--config',sys.argv[1],'doctor']\n"
                "try: runpy.run_path('bot.py', run_name='__main__')\n"
                "except SystemExit as e: print('EXIT', e.code)\n"
                "print('LITELLM', 'litellm' in sys.modules)")
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code, str(cfg), cwd=str(ROOT),
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out_b, err_b = await asyncio.wait_for(proc.communicate(), 60)
        out, err = out_b.decode(), err_b.decode()
        lines = out.splitlines()
        assert any(line.startswith("ok    model: ollama/llama3.2 answered in") for line in lines), out + err
        assert asked and asked[0]["stream"] is False  # one real call, over Ollama's API
        assert "LITELLM False" in lines  # and litellm, seconds to import, was not needed for it
        embedder = next(line for line in lines if "embedder:" in line)
        assert embedder.startswith("warn  embedder:") and "no-such-model" in embedder
        assert "EXIT 0" in lines  # an optional part missing is a warning, not a failure
        assert " INFO " not in err  # an operator command's output is not interleaved with the log

        pulled.clear()
        code_, out, _err = await run_bot("--config", str(cfg), "doctor")
        assert code_ == 1
        assert any(line.startswith("FAIL  model: the model ollama/llama3.2") and "ollama pull" in line
                   for line in out.splitlines())
    finally:
        await runner.cleanup()


async def test_a_second_bot_on_the_same_data_refuses_to_start(fake_llm, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "kith.toml", fake_llm, tmp_path / "data")
    fake_llm.reply("Hello, I'm here.")
    first = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "bot.py"), "--config", str(cfg), "chat", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, cwd=str(ROOT))  # unread: never a full pipe
    assert first.stdin is not None and first.stdout is not None
    try:
        first.stdin.write(b"hi\n")
        await first.stdin.drain()
        assert (await asyncio.wait_for(first.stdout.readline(), 60)).decode().strip() == "Hello, I'm here."

        code, out, err = await run_bot("--config", str(cfg), "run", stdin="anyone there?\n")
        assert code == 1 and out == ""
        assert f"another kith is already running on {tmp_path / 'data'}" in err and "Traceback" not in err
        assert len(fake_llm.requests) == 1  # the second never got as far as the model
    finally:
        first.stdin.close()
        assert await asyncio.wait_for(first.wait(), 60) == 0

    fake_llm.reply("Back again.")  # the lock went with the first process
    code, out, err = await run_bot("--config", str(cfg), "chat", stdin="and now?\n")
    assert (code, out.strip()) == (0, "Back again."), err


DATA_COMMANDS = [("run",), ("chat",), ("memory", "list", "--account", "telegram:42"), ("people", "list")]


async def test_a_data_directory_that_cannot_be_created_is_one_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    data = tmp_path / "a-file" / "data"
    cfg = tmp_path / "kith.toml"
    cfg.write_text(f'[storage]\ndata_dir = "{data}"\n')
    for command in DATA_COMMANDS:
        code, out, err = await run_bot("--config", str(cfg), *command, stdin="hello?\n")
        assert (code, out) == (1, ""), command
        assert err.splitlines() == [f"kith: cannot create the data directory {data}: Not a directory; "
                                    "set [storage] data_dir to a directory kith can write in"], command


def _read_only_data_dir(base: Path) -> tuple[Path, Path]:
    """A config in ``base`` (readable by anyone) naming ``base/data``, which nobody but root may write in."""
    base.chmod(0o755)
    data = base / "data"
    data.mkdir()
    data.chmod(0o555)
    cfg = base / "kith.toml"
    cfg.write_text(f'[storage]\ndata_dir = "{data}"\n')
    cfg.chmod(0o644)
    return data, cfg


def _as_nobody() -> tuple[str, ...]:
    """A command prefix that runs the bot as an ordinary user: nothing for one, nobody's ids for root."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")  # root writes through permission bits: the bot must not run as root
    prefix = (setpriv, "--reuid=65534", "--regid=65534", "--clear-groups") if setpriv else ()
    if not prefix or subprocess.run([*prefix, sys.executable, "-c", ""], capture_output=True).returncode:
        pytest.skip("running as root, with no way to run the bot as nobody here")
    return prefix


async def test_a_read_only_data_directory_is_one_line_naming_it() -> None:
    prefix = _as_nobody()
    with tempfile.TemporaryDirectory() as where:
        data, cfg = _read_only_data_dir(Path(where))
        for command in DATA_COMMANDS:
            code, out, err = await run_bot("--config", str(cfg), *command, stdin="hello?\n", prefix=prefix,
                                            env={"HOME": where})
            assert (code, out) == (1, ""), command
            assert err.splitlines() == [f"kith: cannot write in the data directory {data}: Permission denied; "
                                        "set [storage] data_dir to a directory kith can write in"], (command, err)
