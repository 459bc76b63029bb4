"""The operator's one-line hint when the model cannot be reached says what fits where the model is."""

from __future__ import annotations

from ground.config import LLMSettings
from kith.operator.hints import llm_failure_hint
from llm.client import LLMError


def test_a_local_model_is_to_be_started_a_hosted_one_checked() -> None:
    down = LLMError("unavailable")
    local = llm_failure_hint(LLMSettings(model="ollama/llama3.2"), down)
    served = llm_failure_hint(LLMSettings(model="openai/qwen", api_base="http://127.0.0.1:8000/v1"), down)
    hosted = llm_failure_hint(LLMSettings(model="openai/gpt-4o-mini", api_base=""), down)
    assert "ollama serve" in local and "ollama serve" in served
    assert "ollama serve" not in hosted and "provider's status" in hosted
    assert all("scripts/run setup" in hint for hint in (local, served, hosted))
