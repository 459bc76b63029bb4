# Sourced by .ci/run: PostgreSQL's server, which the tests start a throwaway cluster of (tests/support/postgres.py)
# to run the relational store on both backends. As root on Debian or Ubuntu it is installed with apt-get (the
# distribution's `postgresql` package; its own service is not started); anywhere else one line says what is missing.
ensure_postgres() {
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && return 0
  command -v initdb >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "kith: installing PostgreSQL (apt-get install postgresql) for the tests on PostgreSQL" >&2
    # policy-rc.d 101: install the programs without starting the distribution's own cluster as a service (only
    # where the machine has no policy of its own, which is then left as it was).
    local ours=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && ours=1
    fi
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null 2>&1 ||
       { apt-get update -qq >/dev/null 2>&1 &&
         DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null 2>&1; }; then
      [ -n "$ours" ] && rm -f /usr/sbin/policy-rc.d
      ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && return 0
    fi
    [ -n "$ours" ] && rm -f /usr/sbin/policy-rc.d
  fi
  echo "kith: PostgreSQL's server is not installed, so the tests on PostgreSQL cannot run (as root: apt-get install postgresql)" >&2
  return 1
}
