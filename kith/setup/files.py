"""What ``bot.py setup`` writes: ``config.toml`` (no secret in it) and ``.env`` beside it (the secrets, mode 600).

A new config takes its sections, and the comments above each key it sets, from ``config.example.toml``; it holds
only the keys setup set, so every other key keeps kith's default as that changes. An existing config is edited
in place: the keys setup sets change where they are (or are added to their section), everything else, comments
included, stays. The same holds for an existing ``.env``. Nothing is written before the operator has seen what
changes (:class:`Plan`), and each file is written whole or not at all.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import tempfile
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ground.config import ConfigError
from ground.env_file import parse_env, update_env_text
from ground.private_files import write_private_atomically
from kith.settings import env_file_beside, load_settings

EXAMPLE = Path(__file__).resolve().parents[2] / "config.example.toml"
HEADER = ("# kith configuration, written by `bot.py setup`. Keys not here keep their defaults, documented in\n"
          "# config.example.toml. No secret is in this file: the variables it names hold them, in the environment or\n"
          "# in .env beside this file.\n")

_TABLE = re.compile(r"^\s*\[\s*([A-Za-z0-9_.-]+)\s*\]\s*(#.*)?$")
_ANY_TABLE = re.compile(r"^\s*\[")
_KEY = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*=")

Changes = Mapping[str, Mapping[str, str]]  # table -> key -> string value


def toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string


def _comments_above(example: list[str], table: str, key: str) -> list[str]:
    """The comment lines right above ``key`` in ``table`` of the example, without their blank lines."""
    start = _table_start(example, table)
    if start is None:
        return []
    end = _table_end(example, start)
    for i in range(start + 1, end):
        match = _KEY.match(example[i])
        if match and match.group(1) == key:
            j = i
            while j > start + 1 and example[j - 1].lstrip().startswith("#"):
                j -= 1
            return example[j:i]
    return []


def _table_start(lines: list[str], table: str) -> int | None:
    for i, line in enumerate(lines):
        match = _TABLE.match(line)
        if match and match.group(1) == table:
            return i
    return None


def _table_end(lines: list[str], start: int) -> int:
    return next((j for j in range(start + 1, len(lines)) if _ANY_TABLE.match(lines[j])), len(lines))


def new_config_text(changes: Changes, example_text: str = "") -> str:
    """A config holding only ``changes``, each key under the example's comments for it."""
    example = example_text.splitlines(keepends=True)
    parts = [HEADER]
    for table, values in changes.items():
        parts.append(f"\n[{table}]\n")
        for key, value in values.items():
            parts.extend(_comments_above(example, table, key))
            parts.append(f"{key} = {toml_string(value)}\n")
    return "".join(parts)


def edit_config_text(text: str, changes: Changes) -> str:
    """``text`` with ``changes`` made in place. ValueError when the result would not say what was asked (a key
    written in a form this edit does not change, such as a multi-line string or a dotted key)."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    for table, values in changes.items():
        pending = dict(values)
        start = _table_start(lines, table)
        if start is None:
            if lines and lines[-1].strip():
                lines.append("\n")
            lines.append(f"[{table}]\n")
            lines.extend(f"{key} = {toml_string(value)}\n" for key, value in pending.items())
            continue
        for i in range(start + 1, _table_end(lines, start)):
            match = _KEY.match(lines[i])
            if match and match.group(1) in pending:
                indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
                lines[i] = f"{indent}{match.group(1)} = {toml_string(pending.pop(match.group(1)))}\n"
        # A new key goes right under the header: after the last key could be inside a multi-line array.
        lines[start + 1:start + 1] = [f"{key} = {toml_string(value)}\n" for key, value in pending.items()]
    result = "".join(lines)
    _check_says(result, changes)
    return result


def _check_says(text: str, changes: Changes) -> None:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"editing the existing config would break it ({exc}): set {_names(changes)} by hand") from None
    for table, values in changes.items():
        section: object = data
        for part in table.split("."):
            section = section.get(part, {}) if isinstance(section, dict) else {}
        for key, value in values.items():
            if not isinstance(section, dict) or section.get(key) != value:
                raise ValueError(f"cannot set {table}.{key} in the existing config by editing it: set "
                                 f"{_names(changes)} by hand")


def _names(changes: Changes) -> str:
    return ", ".join(f"{table}.{key} = {toml_string(value)}" for table, values in changes.items()
                     for key, value in values.items())


@dataclass(frozen=True)
class Plan:
    """The files setup would write, what they hold now, and the lines to show the operator before writing."""

    config: Path
    config_before: str | None  # None: no file yet
    config_after: str
    env: Path
    env_before: str | None
    env_after: str

    @property
    def config_changes(self) -> bool:
        return self.config_before != self.config_after

    @property
    def env_changes(self) -> bool:
        return (self.env_before or "") != self.env_after

    def config_diff(self) -> list[str]:
        """The config's changes as a unified diff (the config holds no secret)."""
        return [line.rstrip("\n") for line in difflib.unified_diff(
            (self.config_before or "").splitlines(keepends=True), self.config_after.splitlines(keepends=True),
            fromfile=f"{self.config} (now)", tofile=f"{self.config} (after setup)", n=1)]

    def env_summary(self) -> list[str]:
        """Each changed variable by name: added, changed or removed. Never a value."""
        before = parse_env(self.env_before or "")
        after = parse_env(self.env_after)
        lines = [f"{key}: added" for key in after if key not in before]
        lines += [f"{key}: changed" for key in after if key in before and before[key] != after[key]]
        lines += [f"{key}: removed" for key in before if key not in after]
        return lines


def make_plan(config: Path, changes: Changes, secrets: Mapping[str, str | None]) -> Plan:
    """What writing ``changes`` to ``config`` and ``secrets`` to the ``.env`` beside it would do."""
    config_before = _read(config)
    env = env_file_beside(config)
    env_before = _read(env)
    if config_before is None:
        example = _read(EXAMPLE) or ""
        config_after = new_config_text(changes, example)
    else:
        config_after = edit_config_text(config_before, changes)
    # Only what changes: removing a variable .env does not hold, or setting one to the value it has, is no change.
    before = parse_env(env_before or "")
    env_changes = {k: v for k, v in secrets.items() if (k in before if v is None else before.get(k) != v)}
    env_after = update_env_text(env_before or "", env_changes) if env_changes else (env_before or "")
    return Plan(config, config_before, config_after, env, env_before, env_after)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def check_loads(plan: Plan) -> None:
    """ConfigError when kith could not start on the planned files, found before anything is written. The config
    is loaded from a scratch copy (it holds no secret); the planned secrets are put only into this process's
    environment, as loading a ``.env`` would, never into a second file, and the environment is as it was
    afterwards. OSError when the scratch copy cannot be written."""
    planned = parse_env(plan.env_after)
    with environment_restored(planned), tempfile.TemporaryDirectory() as scratch:
        for key, value in planned.items():
            if not os.environ.get(key):  # as loading applies a .env: a variable already set wins
                os.environ[key] = value
        copy = Path(scratch) / "config.toml"  # nothing beside it: no .env is read for it
        copy.write_text(plan.config_after, encoding="utf-8")
        try:
            load_settings(copy)
        except ConfigError as exc:
            raise ConfigError(str(exc).replace(str(copy), str(plan.config))) from None


@contextlib.contextmanager
def environment_restored(keys: Iterable[str]) -> Iterator[None]:
    """This process's environment, for ``keys``, as it was before the block, whatever the block set."""
    saved = {key: os.environ.get(key) for key in keys}
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class WriteFailed(Exception):
    """A file of the plan could not be written: which, why in a few words, and what was written before it."""

    def __init__(self, path: Path, reason: str, written: list[Path]) -> None:
        super().__init__(f"cannot write {path} ({reason})")
        self.path = path
        self.reason = reason
        self.written = written


def write_plan(plan: Plan) -> None:
    """The ``.env`` first, then the config: stopped between the two, the old config still names only
    variables that are set. Each file is written whole or not at all; WriteFailed when one cannot be."""
    files = [(path, text) for path, text, changes in ((plan.env, plan.env_after, plan.env_changes),
                                                      (plan.config, plan.config_after, plan.config_changes))
             if changes]
    encoded: list[tuple[Path, bytes]] = []
    for path, text in files:  # both before either is written: a text that cannot be written stops both
        try:
            encoded.append((path, text.encode("utf-8")))
        except UnicodeEncodeError:
            raise WriteFailed(path, "it would hold a character that is not text", []) from None
    written: list[Path] = []
    for path, data in encoded:
        try:
            write_private_atomically(path, data)
        except OSError as exc:
            raise WriteFailed(path, exc.strerror or type(exc).__name__, written) from None
        written.append(path)
