"""``bot.py doctor``: one clear line per check, and an exit code that says whether all passed."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from core.config import ConfigError, Settings, load_settings
from core.private_files import looser_than_owner


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    warn: bool = False  # passed, with something the operator should look at

    def line(self) -> str:
        return f"{('warn' if self.warn else 'ok  ') if self.ok else 'FAIL'}  {self.name}: {self.detail}"


async def check_data_dir(settings: Settings) -> CheckResult:
    path = settings.storage.data_path()
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".doctor-", delete=True):
            pass
    except OSError as exc:
        return CheckResult("data directory", False, f"{path} is not writable ({exc.strerror}); "
                           "set [storage] data_dir")
    loose = looser_than_owner(path)
    if loose:
        return CheckResult("data directory", True, f"{path} is writable, but {len(loose)} of its paths can be read by "
                           f"other users (e.g. {loose[0]}); run chmod -R go-rwx {path}", warn=True)
    return CheckResult("data directory", True, f"{path} is writable and readable by its owner only")


async def check_database(settings: Settings) -> CheckResult:
    from core.app import open_database

    try:
        db = open_database(settings)
        db.close()
    except Exception as exc:
        return CheckResult("database", False, f"cannot open ({type(exc).__name__}); set [storage] database_url")
    return CheckResult("database", True, settings.storage.resolved_database_url().split("://")[0] + " opens")


async def check_llm(settings: Settings) -> CheckResult:
    from core.hints import llm_failure_hint
    from persona.llm import LLMClient, LLMError

    client = LLMClient(settings.llm)
    try:
        reply = await client.complete([{"role": "user", "content": "Reply with the word ok."}], max_tokens=5,
                                      max_retries=0, timeout_s=min(settings.llm.timeout_s, 30), purpose="doctor")
    except LLMError as exc:
        return CheckResult("model", False, llm_failure_hint(settings.llm, exc))
    return CheckResult("model", True, f"{settings.llm.model} answered in {reply.elapsed_ms:.0f} ms")


async def check_telegram(settings: Settings) -> CheckResult:
    if not settings.telegram.token():
        return CheckResult("telegram", True, f"off (set {settings.telegram.token_env} to enable)")
    from channels.telegram import check_token

    ok, detail = await check_token(settings.telegram)
    return CheckResult("telegram", ok, detail)


async def check_chroma(settings: Settings) -> CheckResult:
    from memory.store import check_chroma as check

    return await check(settings)


async def check_embedder(settings: Settings) -> CheckResult:
    from memory.embedders import check_embedder as check

    return await check(settings)


async def check_slack(settings: Settings) -> CheckResult:
    if not settings.slack.bot_token():
        return CheckResult("slack", True, f"off (set {settings.slack.bot_token_env} to enable)")
    from channels.slack import check_token

    ok, detail = await check_token(settings.slack)
    return CheckResult("slack", ok, detail)


async def check_discord(settings: Settings) -> CheckResult:
    if not settings.discord.token():
        return CheckResult("discord", True, f"off (set {settings.discord.token_env} to enable)")
    from channels.discord import check_token

    ok, detail = await check_token(settings.discord)
    return CheckResult("discord", ok, detail)


Check = Callable[[Settings], Awaitable[CheckResult]]
CHECKS: list[Check] = [check_data_dir, check_database, check_llm, check_chroma, check_embedder, check_telegram,
                       check_slack, check_discord]


async def run_doctor(config_path: str | None, checks: list[Check] | None = None) -> int:
    try:
        settings = load_settings(config_path)
    except ConfigError as exc:
        print(CheckResult("config", False, str(exc)).line())
        return 1
    print(CheckResult("config", True, settings.source if config_path else "defaults (no config file)").line())
    failed = 0
    for check in checks or CHECKS:
        result = await check(settings)
        print(result.line())
        sys.stdout.flush()
        failed += not result.ok
    return 1 if failed else 0


__all__ = ["CHECKS", "CheckResult", "run_doctor"]
