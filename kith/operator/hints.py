"""Operator-facing explanations: one clear line saying what to set, never a stack trace."""

from __future__ import annotations

import urllib.parse

from ground.config import LLMSettings
from llm.client import LLMError


def llm_failure_hint(settings: LLMSettings, error: LLMError) -> str:
    where = f" at {settings.api_base}" if settings.api_base else ""
    if error.kind == "auth":
        env = settings.api_key_env or "api_key_env"
        return (f"the model {settings.model}{where} refused the API key: check the environment variable {env} "
                "(named by [llm] api_key_env)")
    if error.kind == "model_not_found":
        return (f"the model {settings.model}{where} does not exist there: set [llm] model "
                "(e.g. \"ollama/llama3.2\" after `ollama pull llama3.2`)")
    if error.kind == "timeout":
        return (f"the model {settings.model}{where} did not answer within {settings.timeout_s:g} s: "
                "raise [llm] timeout_s or check the server")
    local = settings.model.startswith(("ollama/", "ollama_chat/")) or _is_loopback(settings.api_base)
    what_to_do = ("start it (e.g. `ollama serve`)" if local
                  else "check the network and the provider's status")
    return (f"cannot reach the model {settings.model}{where} ({error.kind}): {what_to_do}, or "
            "set [llm] model, api_base and api_key_env in your config (`scripts/run setup` asks for them)")


def _is_loopback(api_base: str) -> bool:
    host = urllib.parse.urlsplit(api_base).hostname or ""
    return host in ("localhost", "::1") or host.startswith("127.")
