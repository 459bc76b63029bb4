"""The ``.env`` file beside a config: ``KEY=value`` lines holding the secrets the config names.

The format is the common one (python-dotenv's, Docker Compose's, what ``set -a; . .env`` reads for simple values):
blank lines and ``#`` comments are skipped, ``export KEY=value`` is accepted, a value may be bare (a ``#`` after
whitespace starts a comment), in single quotes (taken literally) or in double quotes (``\\"``, ``\\\\``, ``\\n``,
``\\t`` and ``\\r`` escapes). One value per line: a multi-line value is an error. Lines end at a line feed (with
or without a carriage return before it) and nowhere else, as for a shell: a form feed or a Unicode line separator
inside a quoted value is part of the value.

An error names the line by its number only: the line may hold a secret.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BARE_SAFE = re.compile(r"[A-Za-z0-9_\-.:/+@,=~%]*")
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r"}


class EnvFileError(ValueError):
    """A line is not ``KEY=value``; the message names its number, never its text."""


def parse_env(text: str) -> dict[str, str]:
    """Every ``KEY=value`` of ``text`` in order; a key given twice keeps its last value."""
    values: dict[str, str] = {}
    for number, line in enumerate(_lines(text), start=1):
        parsed = _parse_line(line, number)
        if parsed is not None:
            values[parsed[0]] = parsed[1]
    return values


def _lines(text: str) -> list[str]:
    # Not str.splitlines(): it also ends a line at \v, \f, \x1c-\x1e, \x85, \u2028 and \u2029, which a quoted
    # value may hold (and which format_env_line writes as they are).
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    if lines[-1] == "":
        lines.pop()
    return lines


def _parse_line(line: str, number: int) -> tuple[str, str] | None:
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return None
    if stripped.startswith("export ") or stripped.startswith("export\t"):
        stripped = stripped[len("export"):].lstrip()
    key, eq, rest = stripped.partition("=")
    key = key.strip()
    if not eq or not _KEY.fullmatch(key):
        raise EnvFileError(f"line {number}: expected KEY=value")
    rest = rest.lstrip()
    if rest[:1] == "'":
        end = rest.find("'", 1)
        if end < 0:
            raise EnvFileError(f"line {number}: a single quote is not closed on its line")
        value, tail = rest[1:end], rest[end + 1:]
    elif rest[:1] == '"':
        value, tail = _double_quoted(rest, number)
    else:
        value, tail = re.split(r"\s#", rest, maxsplit=1)[0].rstrip(), ""
    tail = tail.strip()
    if tail and not tail.startswith("#"):
        raise EnvFileError(f"line {number}: text after the closing quote")
    return key, value


def _double_quoted(rest: str, number: int) -> tuple[str, str]:
    out: list[str] = []
    i = 1
    while i < len(rest):
        char = rest[i]
        if char == '"':
            return "".join(out), rest[i + 1:]
        if char == "\\" and i + 1 < len(rest):
            nxt = rest[i + 1]
            out.append(_ESCAPES.get(nxt, "\\" + nxt))
            i += 2
            continue
        out.append(char)
        i += 1
    raise EnvFileError(f"line {number}: a double quote is not closed on its line")


def format_env_line(key: str, value: str) -> str:
    """``KEY=value``, quoted only when the value needs it, so that :func:`parse_env` reads ``value`` back."""
    if not _KEY.fullmatch(key):
        raise ValueError("an environment variable's name is letters, digits and _, not starting with a digit")
    if "\0" in value:
        raise ValueError(f"the value of {key} holds a NUL character")
    if _BARE_SAFE.fullmatch(value):
        return f"{key}={value}"
    escaped = (value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
               .replace("\t", "\\t"))
    return f'{key}="{escaped}"'


def update_env_text(text: str, changes: Mapping[str, str | None]) -> str:
    """``text`` with each key of ``changes`` set to its value (``None``: removed). Other lines, comments
    included, stay as they are; a key already there is changed where it is, a new one is added at the end."""
    pending = dict(changes)
    done: set[str] = set()
    lines: list[str] = []
    for number, line in enumerate(_lines(text), start=1):
        parsed = _parse_line(line, number)
        key = parsed[0] if parsed else None
        if key is None or key not in pending:
            lines.append(line)
            continue
        if key not in done and pending[key] is not None:
            lines.append(format_env_line(key, pending[key] or ""))
        done.add(key)  # a later line for the same key would override this one: dropped
    lines.extend(format_env_line(key, value) for key, value in pending.items() if key not in done and value is not None)
    return "\n".join(lines) + "\n" if lines else ""
