from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ground import config
from ground.config import ConfigError
from kith.settings import PLATFORMS, AppSettings, load_settings
from tests.support.paths import ROOT


def test_example_config_documents_exactly_the_defaults() -> None:
    loaded = load_settings(ROOT / "config.example.toml")
    assert dataclasses.replace(loaded, source="<defaults>") == AppSettings()


def test_no_config_file_runs_on_local_defaults() -> None:
    s = load_settings(None)
    assert s.llm.model.startswith("ollama/")
    assert s.llm.api_base == "http://localhost:11434"
    assert s.llm.api_key() is None


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "kith.toml"
    p.write_text(text, encoding="utf-8")
    return p


def test_unknown_key_is_named_with_the_file(tmp_path: Path) -> None:
    p = _write(tmp_path, '[llm]\nmodle = "x"\n')
    with pytest.raises(ConfigError) as err:
        load_settings(p)
    assert str(err.value) == f"{p}: llm.modle: unknown key"


def test_unknown_section_is_refused(tmp_path: Path) -> None:
    p = _write(tmp_path, "[lmm]\n")
    with pytest.raises(ConfigError, match=r"lmm: unknown key"):
        load_settings(p)


def test_wrong_type_names_key_and_expected_type(tmp_path: Path) -> None:
    p = _write(tmp_path, '[llm]\ntimeout_s = "soon"\n')
    with pytest.raises(ConfigError) as err:
        load_settings(p)
    assert "llm.timeout_s: expected a number, got a string" in str(err.value)
    assert str(p) in str(err.value)


def test_boolean_is_not_an_integer(tmp_path: Path) -> None:
    p = _write(tmp_path, "[history]\nwindow_messages = true\n")
    with pytest.raises(ConfigError, match=r"history\.window_messages: expected an integer"):
        load_settings(p)


def test_missing_required_value_in_persona_example(tmp_path: Path) -> None:
    p = _write(tmp_path, '[[persona.examples]]\nuser = "hi"\n')
    with pytest.raises(ConfigError, match=r"persona.examples\[0\].reply: required value missing"):
        load_settings(p)


def test_missing_environment_variable_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KITH_TEST_KEY", raising=False)
    p = _write(tmp_path, '[llm]\nmodel = "openai/gpt-4o-mini"\napi_base = ""\napi_key_env = "KITH_TEST_KEY"\n')
    with pytest.raises(ConfigError, match="environment variable KITH_TEST_KEY is not set"):
        load_settings(p)
    monkeypatch.setenv("KITH_TEST_KEY", "sk-test")
    assert load_settings(p).llm.api_key() == "sk-test"


def test_invalid_toml_is_one_clear_line(tmp_path: Path) -> None:
    p = _write(tmp_path, "[llm\nmodel=")
    with pytest.raises(ConfigError) as err:
        load_settings(p)
    assert "not valid TOML" in str(err.value) and "\n" not in str(err.value)


def test_values_are_read(tmp_path: Path) -> None:
    p = _write(tmp_path, '[llm]\nfallbacks = ["openai/b"]\nmax_retries = 5\n[persona]\nname = "Ada"\n'
               '[[persona.examples]]\nuser = "hi"\nreply = "hello!"\n[storage]\ndata_dir = "/tmp/k"\n')
    s = load_settings(p)
    assert s.llm.fallbacks == ["openai/b"] and s.llm.max_retries == 5
    assert s.persona.name == "Ada" and s.persona.examples[0].reply == "hello!"
    assert s.storage.resolved_database_url() == "sqlite:////tmp/k/kith.db"


def test_a_platform_section_is_read_as_strictly_as_the_others(tmp_path: Path) -> None:
    p = _write(tmp_path, '[telegram]\nmode = "webhook"\nwebhook_port = 9000\n[slack]\nhttp_port = 3001\n'
               '[discord]\nready_timeout_s = 5\n')
    s = load_settings(p)
    assert s.telegram.mode == "webhook" and s.telegram.webhook_port == 9000
    assert s.slack.http_port == 3001 and s.discord.ready_timeout_s == 5.0
    p = _write(tmp_path, '[slack]\nbot_token = "xoxb"\n')
    with pytest.raises(ConfigError) as err:
        load_settings(p)
    assert str(err.value) == f"{p}: slack.bot_token: unknown key"
    p = _write(tmp_path, '[discord]\nready_timeout_s = "soon"\n')
    with pytest.raises(ConfigError) as err:
        load_settings(p)
    assert str(err.value) == f"{p}: discord.ready_timeout_s: expected a number, got a string"


def test_a_policy_for_a_platform_no_channel_serves_is_refused(tmp_path: Path) -> None:
    p = _write(tmp_path, '[policy.telegarm]\ndm = "open"\n')
    with pytest.raises(ConfigError) as err:
        load_settings(p)
    assert str(err.value) == f"{p}: policy.telegarm: unknown platform (known: console, discord, slack, telegram)"


def test_each_platform_section_is_named_as_its_platform() -> None:
    """The wiring adds one section per platform, named as the platform and its [policy.<platform>] table are."""
    added = {f.name for f in dataclasses.fields(AppSettings)} - {f.name for f in dataclasses.fields(config.Settings)}
    assert added == PLATFORMS - {"console"}
