# Sourced by scripts/_venv.sh and .ci/run: Graphviz's `dot` program, which `bot.py graph draw` runs to lay out a
# person's graph (a system program, not a Python package: pip cannot install it). As root on Debian or Ubuntu it
# is installed with apt-get; anywhere else one line says what is missing, and everything else works without it.
ensure_graphviz() {
  command -v dot >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "kith: installing Graphviz (apt-get install graphviz) for bot.py graph draw" >&2
    # A fresh machine may have no package lists yet: update only when the first try needs it.
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null 2>&1 ||
       { apt-get update -qq >/dev/null 2>&1 &&
         DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null 2>&1; }; then
      command -v dot >/dev/null 2>&1 && return 0
    fi
  fi
  echo "kith: Graphviz's dot is not installed, so bot.py graph draw cannot draw (as root: apt-get install graphviz)" >&2
  return 1
}
