"""The files ``bot.py setup`` writes: the .env format read as a shell would and written back the same, and an
existing config edited without losing what it does not change."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ground.config import ConfigError
from ground.env_file import EnvFileError, format_env_line, parse_env, update_env_text
from kith.settings import load_settings
from kith.setup.files import edit_config_text

# --- the .env format ---------------------------------------------------------------------------------------

def test_a_hand_written_env_file_reads_as_a_shell_would() -> None:
    text = ("# kith's secrets\n\n"
            "export TELEGRAM_BOT_TOKEN=123:abc\n"
            "OPENAI_API_KEY = 'sk-single $HOME # kept'\n"
            'SLACK_BOT_TOKEN="xoxb-1 \\"quoted\\" \\\\ end" # comment\n'
            "PLAIN=value # a comment\n"
            "EMPTY=\n"
            "HASH=a#b\n")
    assert parse_env(text) == {"TELEGRAM_BOT_TOKEN": "123:abc", "OPENAI_API_KEY": "sk-single $HOME # kept",
                               "SLACK_BOT_TOKEN": 'xoxb-1 "quoted" \\ end', "PLAIN": "value", "EMPTY": "",
                               "HASH": "a#b"}


@pytest.mark.parametrize("line", ["TOKEN sk-secret-value", "1BAD=sk-secret-value", 'K="sk-secret-value',
                                  "K='sk-secret-value", 'K="sk-secret-value" trailing'])
def test_a_bad_env_line_is_named_by_number_never_by_its_secret(line: str, tmp_path: Path) -> None:
    with pytest.raises(EnvFileError) as caught:
        parse_env(f"# first\n{line}\n")
    assert "line 2" in str(caught.value) and "sk-secret" not in str(caught.value)
    (tmp_path / ".env").write_text(f"{line}\n")
    (tmp_path / "config.toml").write_text("")
    with pytest.raises(ConfigError, match=r"\.env: line 1") as caught_config:
        load_settings(tmp_path / "config.toml")
    assert "sk-secret" not in str(caught_config.value)


@pytest.mark.parametrize("value", ["123:abc-DEF_g", "with space", 'quote " and \\ slash', "tab\there", "#hash", "",
                                   "form\x0cfeed", "v\x0btab", "\x1c\x1d\x1e", "next\x85line", "line\u2028para\u2029",
                                   "cr\rlf\n"])
def test_what_setup_writes_reads_back_the_same(value: str) -> None:
    assert parse_env(format_env_line("KEY", value)) == {"KEY": value}
    edited = update_env_text("# mine\nKEY=old\nOTHER=1\nKEY=older\n", {"KEY": value, "NEW": "n", "OTHER": None})
    assert edited.startswith("# mine\n")
    assert parse_env(edited) == {"KEY": value, "NEW": "n"}


def test_every_character_setup_may_write_reads_back_the_same() -> None:
    # Everything str.splitlines() would end a line at, and every other character up to the CJK block.
    for code in [*range(1, 0x3000), 0xFEFF, 0x1F600]:
        value = f"a{chr(code)}b{chr(code)}"
        text = update_env_text("KEY=old\n", {"KEY": value, "NEXT": "n"})
        assert parse_env(text) == {"KEY": value, "NEXT": "n"}, hex(code)


def test_a_crlf_env_file_reads_and_edits_as_lines() -> None:
    text = "# mine\r\nA='x y'\r\nB=\"q\"\r\n"
    assert parse_env(text) == {"A": "x y", "B": "q"}
    assert update_env_text(text, {"B": "r"}) == "# mine\nA='x y'\nB=r\n"


# --- editing an existing config ----------------------------------------------------------------------------

def test_an_edit_keeps_everything_it_does_not_change() -> None:
    mine = ('# mine\n[llm]\nmodel = "ollama/llama3.2"  # was this\nfallbacks = [\n  "ollama/qwen2.5",\n]\n\n'
            '[persona]\nname = "Pip"\n')
    edited = edit_config_text(mine, {"llm": {"model": "openai/gpt-4o-mini", "api_key_env": "OPENAI_API_KEY"},
                                     "telegram": {"token_env": "TG"}})
    assert edited == ('# mine\n[llm]\napi_key_env = "OPENAI_API_KEY"\nmodel = "openai/gpt-4o-mini"\n'
                      'fallbacks = [\n  "ollama/qwen2.5",\n]\n\n[persona]\nname = "Pip"\n\n[telegram]\n'
                      'token_env = "TG"\n')


def test_a_key_it_cannot_edit_safely_is_left_to_the_operator() -> None:
    with pytest.raises(ValueError, match=re.escape('set llm.model = "openai/gpt-4o-mini" by hand')):
        edit_config_text('llm.model = "ollama/llama3.2"\n', {"llm": {"model": "openai/gpt-4o-mini"}})
