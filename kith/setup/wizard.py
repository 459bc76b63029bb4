"""``bot.py setup``: a first run that asks for the model and the platforms, checks each with one real call,
writes ``config.toml`` and the ``.env`` beside it, and says what to run next.

The model: a local Ollama (found at ``$OLLAMA_HOST`` or localhost; its installed models are offered, or what
to install and pull is said) or a hosted provider with its key. Then Telegram, Discord and Slack, each token
checked as ``doctor`` checks it. Keys and tokens are read without echo on a terminal and go only to ``.env``
(mode 600); the config names their variables. An existing config is the starting point, and nothing is
written before its changes are shown and accepted.

``bot.py run`` with no config anywhere and a person at the terminal offers this first (:func:`offer_setup`).
"""

from __future__ import annotations

import dataclasses
import getpass
import logging
import os
import sys
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ground import loop
from ground.config import ConfigError, LLMSettings
from ground.private_files import write_private_atomically
from kith.settings import AppSettings, default_config_path, env_file_beside, load_settings, read_env_file
from kith.setup.checks import (
    OllamaFound,
    check_discord,
    check_model,
    check_slack,
    check_telegram,
    environment,
    is_ollama,
    look_for_ollama,
    ollama_base,
)
from kith.setup.files import WriteFailed, check_loads, make_plan, write_plan
from kith.setup.voice import ask_voice

log = logging.getLogger("kith.setup")

OLLAMA_DOWNLOAD = "https://ollama.com/download"
SUGGESTED_OLLAMA_MODEL = "llama3.2"


class SetupStopped(Exception):
    """Standard input ended before an answer: nothing is written."""


class Dialogue:
    """Questions on a terminal or from piped lines. Piped answers are echoed after their question, so the
    transcript reads as a conversation; a secret's never is."""

    def __init__(self, stdin: TextIO | None = None, stdout: TextIO | None = None) -> None:
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.interactive = self.stdin.isatty()

    def say(self, text: str = "") -> None:
        print(text, file=self.stdout, flush=True)

    def _line(self, prompt: str, *, echo: bool = True) -> str:
        self.stdout.write(prompt)
        self.stdout.flush()
        line = self.stdin.readline()
        if not line:
            raise SetupStopped
        answer = line.strip()
        if not self.interactive:
            self.stdout.write(f"{answer if echo else ''}\n")
        return answer

    def ask(self, prompt: str, default: str = "") -> str:
        return self._line(f"{prompt} [{default}]: " if default else f"{prompt}: ") or default

    def secret(self, prompt: str) -> str:
        """A key or token, asked again while it holds a character no key has (a paste can bring one along)."""
        while True:
            answer = self._secret_once(prompt)
            unwanted = unwanted_in_secret(answer)
            if unwanted is None:
                return answer
            self.say(f"  That has {unwanted} in it, which no key or token has: please enter it again.")

    def _secret_once(self, prompt: str) -> str:
        if self.interactive:
            try:
                return getpass.getpass(f"{prompt}: ", stream=self.stdout).strip()
            except EOFError:
                raise SetupStopped from None
        return self._line(f"{prompt}: ", echo=False)

    def yes(self, prompt: str, default: bool) -> bool:
        while True:
            answer = self._line(f"{prompt} [{'Y/n' if default else 'y/N'}] ").lower()
            if not answer:
                return default
            if answer in ("y", "yes"):
                return True
            if answer in ("n", "no"):
                return False
            self.say("  Please answer y or n.")

    def choose(self, prompt: str, options: list[str], default: int | None) -> int:
        for number, option in enumerate(options, start=1):
            self.say(f"  {number}) {option}")
        while True:
            answer = self._line(f"{prompt} [{default + 1}]: " if default is not None else f"{prompt}: ")
            if not answer and default is not None:
                return default
            if answer.isdigit() and 1 <= int(answer) <= len(options):
                return int(answer) - 1
            self.say(f"  Please answer with a number from 1 to {len(options)}.")


_UNWANTED = {"Cc": "a control character", "Cf": "an invisible formatting character", "Cs": "a byte that is not text",
             "Zl": "a line separator", "Zp": "a paragraph separator"}


def unwanted_in_secret(text: str) -> str | None:
    """What kind of character ``text`` holds that no key or token has, in words (never which, nor where: the text
    is a secret); None when it has none."""
    for char in text:
        kind = _UNWANTED.get(unicodedata.category(char))
        if kind is not None:
            return kind
    return None


@dataclass
class Answers:
    """What setup will write: config keys by table, and secrets by variable (None: remove it from .env)."""

    config: dict[str, dict[str, str]] = field(default_factory=dict)
    secrets: dict[str, str | None] = field(default_factory=dict)
    platforms: list[str] = field(default_factory=list)  # connected, for the closing words


# --- the model ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Hosted:
    label: str
    provider: str  # litellm's prefix
    default_model: str
    key_env: str
    asks_base: bool = False  # an OpenAI-compatible server: its URL, and a key only if it wants one


HOSTED = (
    Hosted("OpenAI", "openai", "gpt-4o-mini", "OPENAI_API_KEY"),
    Hosted("Anthropic", "anthropic", "claude-3-5-haiku-latest", "ANTHROPIC_API_KEY"),
    Hosted("OpenRouter", "openrouter", "openai/gpt-4o-mini", "OPENROUTER_API_KEY"),
    Hosted("another OpenAI-compatible server (vLLM, LM Studio, llama.cpp ...)", "openai", "", "LLM_API_KEY",
           asks_base=True),
)


@dataclass(frozen=True)
class Option:
    label: str
    pick: Callable[[], tuple[LLMSettings, dict[str, str]] | None]  # None: look again


def _say_ollama(d: Dialogue, found: OllamaFound) -> None:
    if not found.running:
        d.say(f"No Ollama answers at {found.base}. To run a model on this machine: install Ollama "
              f"({OLLAMA_DOWNLOAD}), start it (`ollama serve`, or open the app), then "
              f"`ollama pull {SUGGESTED_OLLAMA_MODEL}`; or use a hosted provider below.")
    elif not found.models:
        d.say(f"Ollama runs at {found.base} but has no model yet: run `ollama pull {SUGGESTED_OLLAMA_MODEL}` "
              "(about 2 GB), then look again; or use a hosted provider below.")
    else:
        d.say(f"Ollama runs at {found.base} with {len(found.models)} "
              f"model{'s' if len(found.models) != 1 else ''}.")


def _model_name(provider: str, name: str) -> str:
    return name if name.startswith(f"{provider}/") else f"{provider}/{name}"


def _ask_hosted(d: Dialogue, hosted: Hosted, current: LLMSettings) -> tuple[LLMSettings, dict[str, str]]:
    same = current.model.partition("/")[0] == hosted.provider and not is_ollama(current)
    base = ""
    if hosted.asks_base:
        while not base.startswith(("http://", "https://")):
            base = d.ask("The server's base URL, e.g. http://localhost:8000/v1",
                         current.api_base if same and current.api_base else "")
            if not base.startswith(("http://", "https://")):
                d.say("  Please give a URL starting with http:// or https://.")
    name = ""
    while not name:
        name = d.ask(f"Model name at {hosted.label.split(' (')[0]}",
                     current.model.partition("/")[2] if same else hosted.default_model)
    key_env = current.api_key_env if same and current.api_key_env else hosted.key_env  # the config's own name
    have = os.environ.get(key_env, "")
    while True:
        hint = "Enter keeps the one already set" if have else "Enter for none" if hosted.asks_base else ""
        key = d.secret(f"API key ({key_env}; not shown as you type{'; ' + hint if hint else ''})") or have
        if key or hosted.asks_base:
            break
        d.say(f"  {hosted.label} needs an API key.")
    llm = dataclasses.replace(current, model=_model_name(hosted.provider, name), api_base=base,
                              api_key_env=key_env if key else "")
    return llm, ({key_env: key} if key else {})


def ask_model(d: Dialogue, current: LLMSettings, fresh: bool) -> tuple[LLMSettings, dict[str, str]]:
    """The model to configure and the secret it needs, checked with one real call (or kept unchecked)."""
    configured = not fresh and is_ollama(current) and current.api_base
    base = current.api_base if configured else ollama_base(os.environ.get("OLLAMA_HOST"))
    d.say("\n1. The model")
    while True:
        found = loop.run(look_for_ollama(base))
        _say_ollama(d, found)
        options, default = _model_options(d, found, current, fresh)
        picked = options[d.choose("Which model should kith use?", [o.label for o in options], default)].pick()
        if picked is None:
            continue
        llm, secret = picked
        d.say(f"Asking {llm.model} one short question ...")
        with environment(secret):
            ok, detail = loop.run(check_model(llm))
        if ok:
            d.say(f"  ok: {detail}")
            return llm, secret
        d.say(f"  failed: {detail}")
        if not d.yes("Choose again?", default=True):
            d.say(f"  Keeping {llm.model} unchecked: `scripts/run doctor` checks it again.")
            return llm, secret


def _model_options(d: Dialogue, found: OllamaFound, current: LLMSettings,
                   fresh: bool) -> tuple[list[Option], int | None]:
    options: list[Option] = []
    default: int | None = None
    for name in found.models:
        model = f"ollama/{name}"
        if (not fresh and current.model in (model, f"ollama_chat/{name}")) or \
                (fresh and default is None and name.partition(":")[0] == SUGGESTED_OLLAMA_MODEL):
            default = len(options)
        options.append(Option(f"Ollama on this machine: {name}",
                              lambda model=model: (dataclasses.replace(current, model=model, api_base=found.base,
                                                                       api_key_env=""), {})))
    if not found.models:
        options.append(Option("Ollama on this machine: look again", lambda: None))
    elif fresh and default is None:
        default = 0
    for hosted in HOSTED:
        options.append(Option(hosted.label, lambda hosted=hosted: _ask_hosted(d, hosted, current)))
    keep = "keep" if not fresh else "keep the default"
    options.append(Option(f"{keep}: {current.model}" + (f" at {current.api_base}" if current.api_base else ""),
                          lambda: (current, {})))
    if not fresh and default is None:
        default = len(options) - 1
    return options, default


# --- the platforms -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Platform:
    table: str
    label: str
    env_keys: tuple[str, ...]  # the settings fields naming the variables, in the order they are asked
    prompts: tuple[str, ...]
    check: Callable[..., Any]


def _platforms(settings: AppSettings) -> list[tuple[Platform, Any]]:
    slack_second = ("signing_secret_env", "Signing secret (Basic Information)") if settings.slack.mode == "http" \
        else ("app_token_env", "App-level token (xapp-..., scope connections:write)")
    return [
        (Platform("telegram", "Telegram", ("token_env",), ("Bot token from @BotFather",), check_telegram),
         settings.telegram),
        (Platform("discord", "Discord", ("token_env",),
                  ("Bot token (Developer Portal > Bot; enable the Message Content intent there)",), check_discord),
         settings.discord),
        (Platform("slack", "Slack", ("bot_token_env", slack_second[0]),
                  ("Bot token (xoxb-...)", slack_second[1]), check_slack), settings.slack),
    ]


def ask_platforms(d: Dialogue, settings: AppSettings, stored: Mapping[str, str], answers: Answers) -> None:
    """Which platforms to connect; each token is checked before it is kept. Saying no to one whose tokens are
    in .env takes them out of it."""
    d.say("\n2. Platforms (with none, kith talks with you in this terminal)")
    for platform, section in _platforms(settings):
        names = [getattr(section, key) for key in platform.env_keys]
        have = [os.environ.get(name, "") for name in names]
        if not d.yes(f"Connect {platform.label}?", default=all(have)):
            answers.secrets.update({name: None for name in names if name in stored})
            continue
        while True:
            tokens = []
            for name, prompt, current in zip(names, platform.prompts, have, strict=True):
                hint = "; Enter keeps the one already set" if current else ""
                tokens.append(d.secret(f"  {prompt} ({name}; not shown as you type{hint})") or current)
            if all(tokens):
                ok, detail = loop.run(platform.check(section, *tokens))
                d.say(f"  {'ok' if ok else 'failed'}: {detail}")
                if ok:
                    answers.config[platform.table] = dict(zip(platform.env_keys, names, strict=True))
                    answers.secrets.update(dict(zip(names, tokens, strict=True)))
                    answers.platforms.append(platform.label)
                    break
            else:
                d.say("  failed: a token is missing")
            if not d.yes("  Try again?", default=True):
                d.say(f"  {platform.label} is not connected.")
                break


# --- the whole dialogue ------------------------------------------------------------------------------------

def _current(path: Path) -> AppSettings | None:
    """The existing config's settings (its .env applied); None when there is no file yet."""
    if not path.is_file():
        return None
    return load_settings(path, require_environment=False)


def _dialogue(d: Dialogue, path: Path, next_step: str) -> int:
    existing = _current(path)
    settings = existing or AppSettings()
    stored = read_env_file(env_file_beside(path))
    d.say(f"kith setup: a few questions, then {path} and the .env beside it (keys and tokens, readable by you "
          "only). Ctrl-C stops without writing anything.")
    if existing is not None:
        d.say(f"{path} exists: what you do not change stays, and you will see every change before it is written.")
    answers = Answers()
    llm, secret = ask_model(d, settings.llm, fresh=existing is None)
    answers.config["llm"] = {"model": llm.model, "api_base": llm.api_base, "api_key_env": llm.api_key_env}
    answers.secrets.update(secret)
    ask_platforms(d, settings, stored, answers)
    voice = ask_voice(d, settings.media)
    if voice is not None:
        media, secret = voice
        answers.config["media"] = {"transcription_model": media.transcription_model,
                                   "transcription_api_base": media.transcription_api_base,
                                   "transcription_api_key_env": media.transcription_api_key_env}
        answers.secrets.update(secret)
    if existing is not None:
        answers.config = _differing(existing, answers.config)
    return _write(d, path, answers, next_step)


def _differing(settings: AppSettings, config: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, str]]:
    """Of ``config``, what an existing file does not already say (in itself or by default): an edit shows only
    real changes."""
    changed = {table: {key: value for key, value in values.items() if getattr(getattr(settings, table), key) != value}
               for table, values in config.items()}
    return {table: values for table, values in changed.items() if values}


def _write(d: Dialogue, path: Path, answers: Answers, next_step: str) -> int:
    d.say("\n4. Files")
    try:
        plan = make_plan(path, answers.config, answers.secrets)
    except ValueError as exc:
        d.say(f"Nothing written: {exc}")
        return 1
    except OSError as exc:
        d.say(f"Nothing written: cannot read {exc.filename or path} ({_why(exc)})")
        return 1
    if not plan.config_changes and not plan.env_changes:
        d.say(f"{path} and its .env already say this: nothing to write.")
    else:
        try:
            check_loads(plan)
        except ConfigError as exc:
            d.say(f"Nothing written: kith could not start on this config: {exc}")
            return 1
        except (OSError, ValueError) as exc:  # a full or read-only temporary directory, say
            d.say(f"Nothing written: cannot try the config before writing it ({_why(exc)})")
            return 1
        if plan.config_before is not None or plan.env_before is not None:
            if plan.config_changes:
                d.say("The config changes so:")
                for line in plan.config_diff():
                    d.say(f"  {line}")
            if plan.env_changes:
                d.say(f"{plan.env} changes so (values not shown):")
                for line in plan.env_summary():
                    d.say(f"  {line}")
            if not d.yes("Write these changes?", default=False):
                d.say("Nothing written.")
                return 0
        try:
            write_plan(plan)
        except WriteFailed as exc:
            if not exc.written:
                d.say(f"Nothing written: {exc}.")
            else:  # the .env, whose new variables the old config does not name yet
                d.say(f"Written: {' and '.join(map(str, exc.written))}, but not {exc.path} ({exc.reason}): run setup "
                      "again once it can be written.")
            return 1
        written = [str(plan.config)] if plan.config_changes else []
        written += [f"{plan.env} (readable by you only)"] if plan.env_changes else []
        d.say(f"Written: {' and '.join(written)}.")
    if answers.platforms:
        d.say(f"On {', '.join(answers.platforms)}, the first message kith gets from you is answered with a pairing "
              "code: approve it with `scripts/run pairing approve CODE --owner`.")
    d.say(next_step)
    return 0


def _why(exc: Exception) -> str:
    return getattr(exc, "strerror", None) or type(exc).__name__


def _next_step(path: Path, explicit: str | None) -> str:
    if explicit:
        return f"Next: scripts/run --config {explicit}    (`scripts/run --config {explicit} doctor` checks it all)"
    if path != default_config_path():
        return "Next: scripts/run    (with KITH_CONFIG as now; `scripts/run doctor` checks it all)"
    return "Next: scripts/run    (`scripts/run doctor` checks it all; `scripts/run setup` changes these answers)"


def run_setup(explicit: str | None, d: Dialogue | None = None, *, next_step: str | None = None) -> int:
    """``bot.py setup``; ``explicit`` is ``--config``. Exit code: 0 done (or nothing to do), 1 not written,
    2 the existing config does not load, 130 stopped."""
    d = d or Dialogue()
    path = Path(explicit or os.environ.get("KITH_CONFIG") or default_config_path()).expanduser()
    root = logging.getLogger()
    level = root.level
    if level < logging.ERROR:
        root.setLevel(logging.ERROR)  # a failed check's log line would repeat the line the dialogue shows
    try:
        return _dialogue(d, path, next_step or _next_step(path, explicit))
    except ConfigError as exc:
        d.say(f"kith: {exc}: fix it (or move it away) and run setup again")
        return 2
    except (SetupStopped, KeyboardInterrupt):
        d.say("\nSetup stopped: nothing written.")
        return 130
    finally:
        root.setLevel(level)


DECLINED_MARK = "setup-declined"  # beside where the config would be: the offer was answered no


def declined_mark() -> Path:
    return default_config_path().parent / DECLINED_MARK


def offer_setup() -> int | None:
    """Before ``bot.py run`` with no config anywhere and a person at the terminal: offer setup. None: go on
    (on the config setup wrote, or the defaults); else the exit code to stop with.

    Asked once: a no is remembered (:func:`declined_mark`), so every later start says one line instead of
    asking again; ``bot.py setup`` still works any time."""
    d = Dialogue()
    if declined_mark().exists():
        d.say(f"kith has no config ({default_config_path()}): starting on the defaults; "
              "`scripts/run setup` sets kith up.")
        return None
    d.say(f"kith has no config yet ({default_config_path()}), so it would start on the defaults: the model "
          f"{LLMSettings().model} and this terminal only.")
    try:
        wanted = d.yes("Set it up now (a few questions)?", default=True)
    except (SetupStopped, KeyboardInterrupt):
        return 130
    if not wanted:
        try:
            write_private_atomically(declined_mark(), b"")
        except OSError as exc:  # not remembered: the next start asks again, nothing else changes
            log.warning("cannot remember the declined setup error=%s", type(exc).__name__)
        d.say("Starting on the defaults; `scripts/run setup` sets kith up any time (this is not asked again).")
        return None
    code = run_setup(None, d, next_step="Starting kith.")
    return code or None
