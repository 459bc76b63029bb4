"""Shared fixtures: a loopback fake LLM server and settings pointing at it, a fresh database, a clock; and each
test's marker, from the folder it is in."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

from delivery.inbound import InboundJournal
from ground.config import (
    BudgetSettings,
    HistorySettings,
    LLMSettings,
    MemorySettings,
    PersonaSettings,
    StorageSettings,
)
from ground.db import Database
from kith.settings import AppSettings
from tests.fakes.openai_api import FakeOpenAI
from tests.support.clock import FakeClock
from tests.support.database import open_db
from tests.support.postgres import cluster, stop_cluster

TESTS = Path(__file__).resolve().parent
KINDS = ("unit", "e2e", "process")  # the folders under tests/ and the markers pyproject.toml registers


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with the kind its folder holds, so ``-m "not process"`` is the inner loop without any
    real process started."""
    for item in items:
        kind = item.path.resolve().relative_to(TESTS).parts[0]
        if kind not in KINDS:
            raise pytest.UsageError(f"{item.nodeid}: a test lives in tests/unit, tests/e2e or tests/process")
        item.add_marker(kind)


@pytest.fixture(scope="session", autouse=True)
def encoder_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The built sentence encoder is cached for this test session only (kith and the processes tests start)."""
    cache = tmp_path_factory.mktemp("xdg-cache")
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(cache)
    yield cache / "kith" / "encoders"
    if previous is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = previous


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeOpenAI]:
    server = await FakeOpenAI().start()
    try:
        yield server
    finally:
        await server.stop()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module that sets ``BACKENDS = ("sqlite", "postgres")`` runs each of its tests that use the database (the
    ``db`` fixture, or kith built by ``make_settings``) on each backend."""
    if "backend" in metafunc.fixturenames:
        only = metafunc.definition.get_closest_marker("backends")  # a test of one backend's own path
        metafunc.parametrize("backend", only.args if only is not None else getattr(metafunc.module, "BACKENDS",
                                                                                    ("sqlite",)))


@pytest.fixture
def backend() -> str:
    """The relational store a test runs on: "sqlite" unless its module's ``BACKENDS`` says more."""
    return "sqlite"


@pytest.fixture(scope="session", autouse=True)
def _postgres_cluster() -> Iterator[None]:
    """The throwaway PostgreSQL cluster, started by the first test that needs it, stopped at the end."""
    yield
    stop_cluster()


def database_url(backend: str) -> str:
    """A new, empty database on ``backend`` ("" for SQLite: kith's file under its data directory)."""
    return cluster().new_database() if backend == "postgres" else ""


@pytest.fixture
def db(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> Iterator[Database]:
    """A new kith database under ``tmp_path`` (or on the test cluster, for ``backend`` "postgres"), closed after the
    test.

    It has every table, unless the test module sets ``DB_TABLES`` to the only ones it needs: the
    outbox's and the delivery worker's tests create just the outbox's, so they show it needs no other.
    """
    database = open_db(tmp_path, *getattr(request.module, "DB_TABLES", ()), url=database_url(backend))
    yield database
    database.close()


@pytest.fixture
def journal(db: Database) -> InboundJournal:
    """The journal a channel notes each platform event in before acknowledging it, on the test's ``db``."""
    return InboundJournal(db)


@pytest.fixture
def clock() -> FakeClock:
    """A clock that moves only when the test says, starting at the tests' fixed moment ``T0``."""
    return FakeClock()


@pytest.fixture
def make_settings(tmp_path: Path, backend: str) -> Callable[..., AppSettings]:
    url = database_url(backend)  # one database per test: every app the test builds shares it, as on one machine

    def make(fake: FakeOpenAI | None = None, **overrides: object) -> AppSettings:
        # In this process: the model process has tests of its own, and bot.py's end-to-end tests use it.
        llm = LLMSettings(model="openai/fake-model", api_base=fake.base_url if fake else "http://127.0.0.1:9/v1",
                          timeout_s=3.0, max_retries=0, separate_process=False)
        base = AppSettings(llm=llm, persona=PersonaSettings(),
                           storage=StorageSettings(data_dir=str(tmp_path / "data"), database_url=url),
                           history=HistorySettings(), budget=BudgetSettings(),
                           memory=MemorySettings(embedder="none", capture=False))
        import dataclasses

        return dataclasses.replace(base, **overrides)  # type: ignore[arg-type]

    return make
