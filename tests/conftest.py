"""Shared fixtures: a loopback fake LLM server and settings pointing at it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

from core.config import (
    BudgetSettings,
    HistorySettings,
    LLMSettings,
    MemorySettings,
    PersonaSettings,
    Settings,
    StorageSettings,
)
from tests.fakes.openai_api import FakeOpenAI

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeOpenAI]:
    server = await FakeOpenAI().start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
def make_settings(tmp_path: Path) -> Callable[..., Settings]:
    def make(fake: FakeOpenAI | None = None, **overrides: object) -> Settings:
        # In this process: the model process has tests of its own, and bot.py's end-to-end tests use it.
        llm = LLMSettings(model="openai/fake-model", api_base=fake.base_url if fake else "http://127.0.0.1:9/v1",
                          timeout_s=3.0, max_retries=0, separate_process=False)
        base = Settings(llm=llm, persona=PersonaSettings(), storage=StorageSettings(data_dir=str(tmp_path / "data")),
                        history=HistorySettings(), budget=BudgetSettings(),
                        memory=MemorySettings(embedder="none", capture=False))
        import dataclasses

        return dataclasses.replace(base, **overrides)  # type: ignore[arg-type]

    return make


def write_config(path: Path, fake: FakeOpenAI, data_dir: Path, extra: str = "") -> Path:
    path.write_text(
        f'[llm]\nmodel = "openai/fake-model"\napi_base = "{fake.base_url}"\ntimeout_s = 5.0\nmax_retries = 0\n'
        f'[storage]\ndata_dir = "{data_dir}"\n[memory]\nembedder = "none"\ncapture = false\n{extra}', encoding="utf-8")
    return path
