"""A throwaway PostgreSQL cluster for the tests: the distribution's server, started once per test session in a
temporary directory as an unprivileged user, listening on 127.0.0.1 only, stopped at the session's end.

Every test that asks gets a database of its own (``new_database``), so tests never see each other's rows. Where
the server is not installed the tests that need it skip, saying why, unless ``CI`` is set: there ``.ci/run``
installs it, and its absence is a failure, never a quiet skip.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

USER = "kith"
# Durability is not under test here: the cluster is thrown away, and these make it fast.
FAST = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"


def server_bin() -> Path | None:
    """The directory of the newest installed PostgreSQL server's programs (Debian keeps them per version)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Cluster:
    directory: Path
    port: int
    bin: Path
    _names: itertools.count[int]

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{USER}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """The URL of a new, empty database."""
        import psycopg

        name = f"kith_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user={USER} dbname=postgres", autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        _as_owner(self.directory, [str(self.bin / "pg_ctl"), "-D", str(self.directory / "data"), "-m", "immediate",
                                   "stop"], check=False)
        shutil.rmtree(self.directory, ignore_errors=True)


def _as_owner(directory: Path, argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    """``argv`` as the user that owns ``directory`` (PostgreSQL refuses to run as root)."""
    if os.geteuid() == 0:
        argv = ["runuser", "-u", _unprivileged(), "--", *argv]
    return subprocess.run(argv, check=check, capture_output=True, timeout=120)


def _unprivileged() -> str:
    import pwd

    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("no unprivileged user to run PostgreSQL as")


def start_cluster() -> Cluster:
    bin_dir = server_bin()
    if bin_dir is None:
        raise FileNotFoundError("PostgreSQL's server is not installed (apt-get install postgresql)")
    directory = Path(tempfile.mkdtemp(prefix="kith-pg-"))
    if os.geteuid() == 0:
        import pwd

        owner = pwd.getpwnam(_unprivileged())
        os.chown(directory, owner.pw_uid, owner.pw_gid)
    port = _free_port()
    _as_owner(directory, [str(bin_dir / "initdb"), "-D", str(directory / "data"), "-U", USER, "--auth=trust",
                          "-E", "UTF8", "--no-locale", "-N"])
    _as_owner(directory, [str(bin_dir / "pg_ctl"), "-D", str(directory / "data"), "-l", str(directory / "log"),
                          "-w", "-o", f"-c listen_addresses=127.0.0.1 -p {port} -k {directory} {FAST}", "start"])
    return Cluster(directory, port, bin_dir, itertools.count(1))


_cluster: Cluster | None = None
_failure: str = ""


def cluster() -> Cluster:
    """The session's cluster, started on first use; a skip (a failure under CI) where there is none."""
    global _cluster, _failure
    if _cluster is None and not _failure:
        try:
            _cluster = start_cluster()
        except (OSError, subprocess.SubprocessError, RuntimeError) as exc:
            _failure = f"no PostgreSQL to test against: {exc}"
    if _cluster is None:
        if os.environ.get("CI"):
            pytest.fail(_failure)
        pytest.skip(_failure)
    return _cluster


def stop_cluster() -> None:
    global _cluster
    if _cluster is not None:
        _cluster.stop()
        _cluster = None
