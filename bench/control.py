"""The round trip of a small operator command through a running bot, and the same command with no bot.

Starts ``bot.py run`` (the terminal chat: no platform credentials, a model address that answers nothing,
which no command here needs) on a temporary data directory, then runs ``bot.py people list`` and
``bot.py pairing list`` as a person would, each a process of its own, ``--runs`` times each. Reports the
client process's wall time, the work itself (the bot's own log line for the request, ``ms=``) and the part
beyond the work (interpreter start, argument parsing, connecting, relaying): target p95 <= 300 ms. Then
stops the bot and times the same commands holding the data directory themselves, for comparison.

    .venv/bin/python -m bench.control [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import percentile, verdict

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = (("people", "list"), ("pairing", "list"))
TARGET_BEYOND_P95_MS = 300.0
START_WAIT_S = 120.0


def _config(where: Path) -> Path:
    cfg = where / "kith.toml"
    cfg.write_text('[llm]\nmodel = "openai/bench"\napi_base = "http://127.0.0.1:9/v1"\n'
                   f'[storage]\ndata_dir = "{where / "data"}"\n[memory]\nembedder = "none"\n', encoding="utf-8")
    return cfg


def _env() -> dict[str, str]:
    drop = ("TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "KITH_CONFIG")
    return {k: v for k, v in os.environ.items() if k not in drop}


def _text_of(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _time_command(cfg: Path, command: tuple[str, ...]) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(ROOT / "bot.py"), "--config", str(cfg), *command], cwd=ROOT,
                          env=_env(), capture_output=True, text=True, timeout=120)
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise SystemExit(f"bot.py {' '.join(command)} failed: {done.stderr.strip()}")
    return elapsed


def _work_ms(logs: tuple[Path, ...], name: str) -> list[float]:
    text = "".join(_text_of(log) for log in logs)
    return [float(ms) for ms in re.findall(rf"control command command={re.escape(name)} exit=0 ms=([\d.]+)", text)]


def _line(label: str, values: list[float]) -> str:
    return f"  {label:<22} p50 {percentile(values, 50):7.1f} ms  p95 {percentile(values, 95):7.1f} ms  n={len(values)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="runs of each command [30]")
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory(prefix="kith-bench-") as where:
        cfg = _config(Path(where))
        log = Path(where) / "bot.log"
        # With no platform, run falls back to the terminal chat, which logs to its file, not standard error.
        chat_log = Path(where) / "data" / "logs" / "kith.log"
        with log.open("wb") as log_file:
            bot = subprocess.Popen([sys.executable, str(ROOT / "bot.py"), "--config", str(cfg), "run"], cwd=ROOT,
                                   env=_env(), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log_file)
        try:
            deadline = time.monotonic() + START_WAIT_S
            while "control channel listening" not in _text_of(log) + _text_of(chat_log):
                if time.monotonic() > deadline or bot.poll() is not None:
                    raise SystemExit(f"the bot did not start:\n{log.read_text(errors='replace')[-2000:]}")
                time.sleep(0.1)
            through: dict[str, list[float]] = {}
            for command in COMMANDS:
                _time_command(cfg, command)  # warm the disk cache once
                through[".".join(command)] = [_time_command(cfg, command) for _ in range(runs)]
        finally:
            assert bot.stdin is not None
            bot.stdin.close()  # the end of input ends the chat
            bot.wait(timeout=60)
        local = {".".join(command): [_time_command(cfg, command) for _ in range(max(3, runs // 5))]
                 for command in COMMANDS}
        print(f"operator commands: {runs} runs each through a running bot, then with no bot running")
        worst_beyond = 0.0
        for name, walls in through.items():
            work = _work_ms((log, chat_log), name)[-len(walls):]  # the warm-up's line came first
            beyond = [wall - ms for wall, ms in zip(walls, work, strict=True)]
            worst_beyond = max(worst_beyond, percentile(beyond, 95))
            print(f"{name}")
            print(_line("client wall (via bot)", walls))
            print(_line("work in the bot", work))
            print(_line("beyond the work", beyond))
            print(_line("no bot (holds lock)", local[name]))
        print(f"beyond the work, worst p95: {worst_beyond:.1f} ms (target <= {TARGET_BEYOND_P95_MS:.0f} ms) "
              f"{verdict(worst_beyond, TARGET_BEYOND_P95_MS)}")


if __name__ == "__main__":
    main()
