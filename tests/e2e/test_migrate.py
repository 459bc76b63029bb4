"""``bot.py migrate --to URL`` (issue #36): a lived-in SQLite store copied whole into an empty PostgreSQL database
and back, every person's export the same on each; a copy killed half-way resumes without doubling a row, and kith
refuses to start on the half-copied database meanwhile; a target that holds data is refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from ground import migration
from ground.db import Database
from ground.instance import HalfMigrated
from ground.migration import MigrationError, copy_store
from kith.app.person_export import PersonExport
from kith.app.wiring import build_app, open_database
from kith.operator.migrate_cli import run_migrate
from kith.settings import AppSettings
from memory.store import moving
from memory.store.table_client import TableCollection
from tests.support.lived import Lived, dm
from tests.support.postgres import cluster


def _on(settings: AppSettings, url: str) -> AppSettings:
    return dataclasses.replace(settings, storage=dataclasses.replace(settings.storage, database_url=url))


async def _export(settings: AppSettings, person: str) -> dict[str, Any]:
    app = await build_app(settings, warm_llm=False)
    try:
        document = await PersonExport(app.db, app.memory, app.clock, app.person_data).document(person)
    finally:
        await app.close()
    document.pop("exported_at")
    return document


async def test_a_store_copied_to_postgresql_and_back_exports_every_person_the_same(
        lived: Lived, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings, ana, ben = lived.settings, lived.ana, lived.ben
    await lived.close()
    before = {p: await _export(settings, p) for p in (ana, ben)}

    postgres = cluster().new_database()
    assert run_migrate(settings, postgres) == 0
    printed = capsys.readouterr()
    assert "every table's rows counted equal on both sides" in printed.err
    assert "  messages: " in printed.out
    # The memories came out of embedded Chroma into PostgreSQL's memory tables, where kith then reads them.
    assert "memories from chroma memories: " in printed.out and "memories moved into its tables" in printed.err
    on_postgres = _on(settings, postgres)
    assert {p: await _export(on_postgres, p) for p in (ana, ben)} == before

    back = f"sqlite:///{tmp_path / 'back' / 'kith.db'}"
    assert run_migrate(on_postgres, back) == 0
    assert {p: await _export(_on(settings, back), p) for p in (ana, ben)} == before
    # Ids PostgreSQL hands out itself go on after the copied ones: a new message is stored, not refused.
    app = await build_app(on_postgres, warm_llm=False)
    try:
        await app.core.handle(dm("one more thing", "501", name="Ana"))
    finally:
        await app.close()


async def test_a_copy_killed_half_way_resumes_without_doubling_and_kith_will_not_start_on_it_meanwhile(
        lived: Lived, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = lived.settings
    await lived.close()
    source = Database(settings.storage.resolved_database_url())
    target_url = cluster().new_database()
    target = Database(target_url)
    monkeypatch.setattr(migration, "PAGE_ROWS", 2)
    real = migration._write_page
    written = [0]

    def dies_after_five_pages(*args: Any) -> None:
        if written[0] == 5:
            raise KeyboardInterrupt  # the process stops here, between two committed pages
        written[0] += 1
        real(*args)

    try:
        monkeypatch.setattr(migration, "_write_page", dies_after_five_pages)
        with pytest.raises(KeyboardInterrupt):
            copy_store(source, target)
        with pytest.raises(HalfMigrated):
            open_database(_on(settings, target_url))
        monkeypatch.setattr(migration, "_write_page", real)
        counts = copy_store(source, target)
        assert all(c.source == c.target for c in counts) and sum(c.target for c in counts) > 10
        open_database(_on(settings, target_url)).close()  # finished: kith starts on it
        with pytest.raises(MigrationError, match="finished copy"):
            copy_store(source, target)
    finally:
        source.close()
        target.close()


async def test_a_copy_killed_while_it_moves_the_memories_resumes_and_kith_waits_for_it(
        lived: Lived, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    settings, ana = lived.settings, lived.ana
    await lived.close()
    before = await _export(settings, ana)
    assert before["memories"]
    target_url = cluster().new_database()
    monkeypatch.setattr(moving, "STORE_PAGE", 1)
    real = TableCollection.add
    pages = [0]

    def dies_after_two_pages(self: TableCollection, *args: Any, **kwargs: Any) -> None:
        if pages[0] == 2:
            raise KeyboardInterrupt  # killed between two committed pages of memories
        pages[0] += 1
        real(self, *args, **kwargs)

    monkeypatch.setattr(TableCollection, "add", dies_after_two_pages)
    with pytest.raises(KeyboardInterrupt):
        run_migrate(settings, target_url)
    with pytest.raises(HalfMigrated):  # every table is there, but not every memory: kith will not start on it
        open_database(_on(settings, target_url))
    monkeypatch.setattr(TableCollection, "add", real)
    assert run_migrate(settings, target_url) == 0
    assert "memories from chroma memories: " in capsys.readouterr().out
    assert await _export(_on(settings, target_url), ana) == before


async def test_a_target_that_holds_data_is_refused(lived: Lived) -> None:
    settings = lived.settings
    await lived.close()
    source = Database(settings.storage.resolved_database_url())
    other = cluster().new_database()
    target = open_database(_on(settings, other))
    try:
        target.run_sync(lambda conn: conn.execute(sa.text(
            "INSERT INTO goals (person, number, text, status, created_at, updated_at) "
            "VALUES ('p_x', 1, 'x', 'active', now(), now())")))
        with pytest.raises(MigrationError, match="already holds kith's data"):
            copy_store(source, target)
    finally:
        source.close()
        target.close()
