"""The real calls ``bot.py setup`` makes: is Ollama running here and with which models, does the chosen model
answer, does each platform accept its token. Each returns what to tell the operator; none raises for a failure
the operator can fix by answering again.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp

from channels.discord.settings import DiscordSettings
from channels.slack.settings import SlackSettings
from channels.telegram.settings import TelegramSettings
from ground.config import LLMSettings
from ground.tunables import SETUP_OLLAMA_LOOK_TIMEOUT_S
from kith.setup.files import environment_restored
from llm.probe import DEFAULT_OLLAMA_BASE, OLLAMA_PROVIDERS

OLLAMA_PORT = 11434


def ollama_base(host: str | None) -> str:
    """Ollama's URL from its own ``OLLAMA_HOST`` convention (``host``, ``host:port`` or a URL; empty: local)."""
    if not host:
        return DEFAULT_OLLAMA_BASE
    url = host if "://" in host else f"http://{host}"
    parts = urlsplit(url)
    hostname = parts.hostname or "localhost"
    if hostname == "0.0.0.0":  # a listening address; this machine is reached on loopback
        hostname = "127.0.0.1"
    if ":" in hostname:
        hostname = f"[{hostname}]"
    return f"{parts.scheme}://{hostname}:{parts.port or OLLAMA_PORT}{parts.path.rstrip('/')}"


def is_ollama(llm: LLMSettings) -> bool:
    return llm.model.partition("/")[0] in OLLAMA_PROVIDERS


@dataclass(frozen=True)
class OllamaFound:
    base: str
    running: bool
    models: tuple[str, ...] = ()  # as `ollama list` names them, ":latest" dropped


async def look_for_ollama(base: str) -> OllamaFound:
    """Ask the Ollama at ``base`` for its models (GET /api/tags)."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=SETUP_OLLAMA_LOOK_TIMEOUT_S)) as session, \
                session.get(f"{base.rstrip('/')}/api/tags") as response:
            if response.status != 200:
                return OllamaFound(base, running=False)
            body = await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return OllamaFound(base, running=False)
    models = body.get("models") if isinstance(body, dict) else None
    names = [m.get("name") or m.get("model") for m in models or [] if isinstance(m, dict)]
    return OllamaFound(base, running=True,
                       models=tuple(str(n).removesuffix(":latest") for n in names if isinstance(n, str) and n))


@contextlib.contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` set in this process's environment for a check (the model code reads its key there), then
    the environment as it was: nothing typed during setup outlives it unless it is written."""
    with environment_restored(values):
        os.environ.update({k: v for k, v in values.items() if v})
        yield


async def check_model(llm: LLMSettings) -> tuple[bool, str]:
    """One real call, as ``doctor`` makes it: (answered, the line to show)."""
    from kith.operator.doctor import check_llm
    from kith.settings import AppSettings

    result = await check_llm(AppSettings(llm=llm))
    return result.ok, result.detail


async def check_telegram(settings: TelegramSettings, token: str) -> tuple[bool, str]:
    from channels.telegram.channel import check_token

    return await check_token(settings, token)


async def check_discord(settings: DiscordSettings, token: str) -> tuple[bool, str]:
    from channels.discord.channel import check_token

    return await check_token(settings, token)


async def check_slack(settings: SlackSettings, bot_token: str, second: str) -> tuple[bool, str]:
    """``second`` is the app-level token in Socket Mode, the signing secret in HTTP mode."""
    from channels.slack.channel import check_token

    if settings.mode == "http":
        return await check_token(settings, bot_token, signing_secret=second)
    return await check_token(settings, bot_token, app_token=second)
