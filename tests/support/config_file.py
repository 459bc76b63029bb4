"""A kith.toml for a bot a test starts, pointed at the fake model."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.openai_api import FakeOpenAI


def write_config(path: Path, fake: FakeOpenAI, data_dir: Path, extra: str = "") -> Path:
    path.write_text(
        f'[llm]\nmodel = "openai/fake-model"\napi_base = "{fake.base_url}"\ntimeout_s = 5.0\nmax_retries = 0\n'
        f'[storage]\ndata_dir = "{data_dir}"\n[memory]\nembedder = "none"\ncapture = false\n{extra}', encoding="utf-8")
    return path
