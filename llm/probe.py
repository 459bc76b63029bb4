"""One real call to the configured model over plain HTTP, for ``doctor`` and ``setup``, without litellm.

Importing litellm takes seconds, so the check of a local model (Ollama's own API) or of an
OpenAI-compatible server named by ``api_base`` asks it directly: one chat request with a tiny
answer. Any other provider returns ``None`` here and is checked through litellm, whose provider
knowledge a hand-written request would only repeat. Failures are :class:`LLMError` with the same
``kind`` litellm's path gives, so the operator sees the same hint either way.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import aiohttp

from ground.config import LLMSettings
from llm.client import LLMError

OLLAMA_PROVIDERS = ("ollama", "ollama_chat")
OPENAI_COMPATIBLE = ("openai", "hosted_vllm")
DEFAULT_OLLAMA_BASE = "http://localhost:11434"


def _request(settings: LLMSettings, messages: Sequence[dict[str, str]],
             max_tokens: int) -> tuple[str, dict[str, Any]] | None:
    """(url, JSON body) of a direct call, or None when the provider is not one asked directly."""
    provider, _, name = settings.model.partition("/")
    if not name:
        return None
    if provider in OLLAMA_PROVIDERS:
        base = (settings.api_base or DEFAULT_OLLAMA_BASE).rstrip("/")
        return f"{base}/api/chat", {"model": name, "messages": list(messages), "stream": False,
                                    "options": {"num_predict": max_tokens}}
    if provider in OPENAI_COMPATIBLE and settings.api_base:
        return f"{settings.api_base.rstrip('/')}/chat/completions", {"model": name, "messages": list(messages),
                                                                     "max_tokens": max_tokens}
    return None


def can_probe_directly(settings: LLMSettings) -> bool:
    return _request(settings, [], 1) is not None


async def probe_directly(settings: LLMSettings, messages: Sequence[dict[str, str]], *, timeout_s: float,
                         max_tokens: int = 5) -> float:
    """Milliseconds the model took to answer ``messages``; LLMError if it did not. Only for providers
    :func:`can_probe_directly` accepts."""
    request = _request(settings, messages, max_tokens)
    if request is None:
        raise ValueError(f"{settings.model} is not probed directly")
    url, body = request
    headers = {}
    key = settings.api_key()
    if key:
        headers["Authorization"] = f"Bearer {key}"
    started = time.perf_counter()
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session, \
                session.post(url, json=body, headers=headers) as response:
            text = await response.text()
            status = response.status
    except TimeoutError:
        raise LLMError("timeout", retryable=False) from None
    except aiohttp.ClientError as exc:
        raise LLMError("unavailable", type(exc).__name__, retryable=False) from None
    if status in (401, 403):
        raise LLMError("auth", str(status), retryable=False)
    if status == 404 and "model" in text.lower():
        raise LLMError("model_not_found", str(status), retryable=False)
    if status != 200:
        raise LLMError("unavailable", f"HTTP {status}", retryable=False)
    return (time.perf_counter() - started) * 1000
