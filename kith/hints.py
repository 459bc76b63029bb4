"""Operator-facing explanations: one clear line saying what to set, never a stack trace."""

from __future__ import annotations

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
    return (f"cannot reach the model {settings.model}{where} ({error.kind}): start it (e.g. `ollama serve`) or "
            "set [llm] model, api_base and api_key_env in your config")
