"""``bot.py doctor``: one clear line per check, and an exit code that says whether all passed.

The store checks (database, Chroma, embedder) never open a store beside a running bot: with a bot on
the data directory they are run by the bot, on its own open stores, over the control channel; with none
doctor holds the data directory's lock while it opens them (:mod:`kith.control`).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

from ground.checks import CheckResult
from ground.config import ConfigError
from ground.instance import DataDirUnusable, usable_data_dir
from ground.private_files import looser_than_owner
from ground.tunables import DOCTOR_MODEL_TIMEOUT_S
from kith.control.dispatch import call_for_data
from kith.operator.hints import llm_failure_hint
from kith.operator.store_checks import STORE_CHECKS, check_chroma, check_database, check_embedder
from kith.settings import AppSettings, load_settings
from llm.client import LLMError
from llm.probe import can_probe_directly, probe_directly
from memory.encoders import EntailmentUnavailable, load_entailment
from memory.encoders import check_reranker as reranker_check
from persona.instructions import PROBE_PROMPT


async def check_data_dir(settings: AppSettings) -> CheckResult:
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


async def check_llm(settings: AppSettings) -> CheckResult:
    """One real call. A local or OpenAI-compatible server is asked over plain HTTP (importing litellm
    would take most of doctor's time); other providers through litellm."""
    messages = [{"role": "user", "content": PROBE_PROMPT}]
    timeout_s = min(settings.llm.timeout_s, DOCTOR_MODEL_TIMEOUT_S)
    try:
        if can_probe_directly(settings.llm):
            elapsed_ms = await probe_directly(settings.llm, messages, timeout_s=timeout_s)
        else:
            from llm.client import LLMClient

            reply = await LLMClient(settings.llm).complete(messages, max_tokens=5, max_retries=0,
                                                           timeout_s=timeout_s, purpose="doctor")
            elapsed_ms = reply.elapsed_ms
    except LLMError as exc:
        return CheckResult("model", False, llm_failure_hint(settings.llm, exc))
    return CheckResult("model", True, f"{settings.llm.model} answered in {elapsed_ms:.0f} ms")


async def check_telegram(settings: AppSettings) -> CheckResult:
    if not settings.telegram.token():
        return CheckResult("telegram", True, f"off (set {settings.telegram.token_env} to enable)")
    from channels.telegram.channel import check_token

    ok, detail = await check_token(settings.telegram)
    return CheckResult("telegram", ok, detail)


async def check_entailment(settings: AppSettings) -> CheckResult:
    path = settings.memory.entailment_model
    if not path:
        return CheckResult("entailment", True, "off: receipts are checked by the support rules alone "
                           "(set [memory] entailment_model to a local NLI model's directory for a further check)")
    try:
        await asyncio.to_thread(load_entailment, path, settings.memory.entailment_threshold)
    except EntailmentUnavailable as exc:
        # Optional: the support rules are the guarantee, so kith runs without it.
        return CheckResult("entailment", True, f"{exc}; receipts stay on the support rules alone", warn=True)
    return CheckResult("entailment", True, f"{path} loads: a further check of receipts")


async def check_slack(settings: AppSettings) -> CheckResult:
    if not settings.slack.bot_token():
        return CheckResult("slack", True, f"off (set {settings.slack.bot_token_env} to enable)")
    from channels.slack.channel import check_token

    ok, detail = await check_token(settings.slack)
    return CheckResult("slack", ok, detail)


async def check_discord(settings: AppSettings) -> CheckResult:
    if not settings.discord.token():
        return CheckResult("discord", True, f"off (set {settings.discord.token_env} to enable)")
    from channels.discord.channel import check_token

    ok, detail = await check_token(settings.discord)
    return CheckResult("discord", ok, detail)


async def check_reranker(settings: AppSettings) -> CheckResult:
    return await reranker_check(settings.memory.reranker)


Check = Callable[[AppSettings], Awaitable[CheckResult]]
CHECKS: list[Check] = [check_data_dir, check_database, check_llm, check_chroma, check_embedder, check_entailment,
                       check_reranker, check_telegram, check_slack, check_discord]


def _store_results(settings: AppSettings) -> dict[str, CheckResult]:
    """The store checks' results from the data directory's host: the running bot, or this process holding the
    lock. Empty when the data directory cannot hold a lock (the checks then run here and report why)."""
    try:
        usable_data_dir(settings.storage.data_path())
    except DataDirUnusable:
        return {}

    def say(line: str) -> None:
        print(f"kith: {line}", file=sys.stderr)

    code, data = call_for_data(settings, "doctor.stores", say)
    if code != 0 or not isinstance(data, list):
        return {name: CheckResult(name, False, "the data directory's host did not answer") for name in STORE_CHECKS}
    return {r["name"]: CheckResult(str(r["name"]), bool(r["ok"]), str(r["detail"]), bool(r.get("warn")))
            for r in data
            if isinstance(r, dict) and r.get("name") in STORE_CHECKS}


async def run_doctor(config_path: str | None, checks: list[Check] | None = None) -> int:
    try:
        settings = load_settings(config_path)
    except ConfigError as exc:
        print(CheckResult("config", False, str(exc)).line())
        return 1
    print(CheckResult("config", True, settings.source if config_path else "defaults (no config file)").line())
    checks = checks or CHECKS
    stores: dict[str, Any] = {}
    if any(_name_of(check) in STORE_CHECKS for check in checks):
        stores = await asyncio.to_thread(_store_results, settings)
    failed = 0
    for check in checks:
        result = stores.get(_name_of(check)) or await check(settings)
        print(result.line())
        sys.stdout.flush()
        failed += not result.ok
    return 1 if failed else 0


def _name_of(check: Check) -> str:
    return getattr(check, "__name__", "").removeprefix("check_")


__all__ = ["CHECKS", "CheckResult", "run_doctor"]
