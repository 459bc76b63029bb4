"""The long-running commands: ``run`` (every channel) and ``chat`` (the terminal)."""

from __future__ import annotations

import asyncio
import sys

from core.app import build_app
from core.config import Settings
from core.hints import llm_failure_hint
from persona.llm import LLMError

PLATFORM_ENV_HINT = (
    "no platform credentials found; set TELEGRAM_BOT_TOKEN for Telegram, DISCORD_BOT_TOKEN for Discord, "
    "SLACK_BOT_TOKEN and SLACK_APP_TOKEN for Slack (the names are set in the config). Starting the terminal chat."
)


def _hint_once(settings: Settings) -> object:
    shown = False

    def hint(error: LLMError) -> None:
        nonlocal shown
        if not shown:
            shown = True
            print(f"kith: {llm_failure_hint(settings.llm, error)}", file=sys.stderr)

    return hint


async def run_chat(settings: Settings) -> int:
    from channels.terminal import TerminalChannel

    app = await build_app(settings)
    app.core.on_llm_error = _hint_once(settings)  # type: ignore[assignment]
    terminal = TerminalChannel(persona_name=settings.persona.name)
    try:
        await app.start_channels([terminal])
        await terminal.closed.wait()
    finally:
        await app.close()
    return 0


async def run_all(settings: Settings) -> int:
    print(f"kith: {PLATFORM_ENV_HINT}", file=sys.stderr)
    return await run_chat(settings)


def main_sync(coro: object) -> int:  # pragma: no cover - convenience for bench scripts
    return asyncio.run(coro)  # type: ignore[arg-type]
