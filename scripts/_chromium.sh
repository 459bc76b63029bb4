# Sourced by .ci/run: the distribution's Chromium and its matching chromedriver, which the memory room's browser
# tests drive (tests/e2e/test_web_*.py, through Selenium). System programs, not Python packages: pip cannot install
# them. As root on Debian or Ubuntu they are installed with apt-get; anywhere else one line says what is missing, and
# the browser tests skip.
ensure_chromium() {
  _chromium_found() {
    command -v chromedriver >/dev/null 2>&1 &&
      { command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; }
  }
  _chromium_found && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "kith: installing Chromium (apt-get install chromium chromium-driver) for the web page's browser tests" >&2
    # A fresh machine may have no package lists yet: update only when the first try needs it.
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1 ||
       { apt-get update -qq >/dev/null 2>&1 &&
         DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1; }; then
      _chromium_found && return 0
    fi
  fi
  echo "kith: Chromium and chromedriver are not installed, so the web page's browser tests skip" \
       "(as root: apt-get install chromium chromium-driver)" >&2
  return 1
}
