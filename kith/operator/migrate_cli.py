"""``bot.py migrate --to URL``: the relational store copied whole into another database (SQLite to PostgreSQL, or
back), with a progress bar and every table's rows counted on both sides (:mod:`ground.migration`).

It runs with no bot on the data directory (it holds its lock) and copies into an empty database, or finishes a copy
that was interrupted. Memories kept in the database's own tables move with it. Memories in embedded Chroma move into
the target's memory tables when the target is where ``[memory] store`` would keep them (PostgreSQL, by default), as
part of the same resumable copy; a Chroma server named by ``chroma_url`` stays where it is.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from ground.instance import DataDirLock, HalfMigrated, Role
from kith.settings import AppSettings

if TYPE_CHECKING:
    from ground.db import Database


def add_migrate_parser(subparsers: Any) -> argparse.ArgumentParser:
    text = "copy the relational store into another database (SQLite to PostgreSQL, or back), resumably"
    parser: argparse.ArgumentParser = subparsers.add_parser("migrate", help=text, description=text)
    parser.add_argument("--to", required=True, metavar="URL",
                        help='the target database, empty: e.g. "postgresql+psycopg://kith@db/kith", or '
                             '"sqlite:////path/kith.db"')
    return parser


def run_migrate(settings: AppSettings, target_url: str) -> int:
    # The database's libraries load here, not with the parser: every other command's start stays light.
    from ground.db import Database
    from ground.migration import refuse_half_migrated
    from kith.app.schema import create_schema

    source_url = settings.storage.resolved_database_url()
    if target_url == source_url:
        print("kith: --to names the database kith already uses", file=sys.stderr)
        return 2
    lock = DataDirLock(settings.storage.data_path())
    if not lock.try_acquire(Role.COMMAND):
        print(f"kith: {settings.storage.data_path()} is in use (a bot or another command): stop it first",
              file=sys.stderr)
        return 1
    try:
        source = Database(source_url)
        try:
            source.run_sync(refuse_half_migrated)
            create_schema(source)
            target = Database(target_url)
            try:
                return _copy(settings, source, target, target_url)
            finally:
                target.close()
        finally:
            source.close()
    except HalfMigrated as exc:
        print(f"kith: the source {exc}", file=sys.stderr)
        return 1
    finally:
        lock.release()


def _copy(settings: AppSettings, source: Database, target: Database, target_url: str) -> int:
    from ground.migration import MigrationError, copy_store
    from kith.operator.progress import progress_text
    from memory.store import MOVED_INTO, CollectionCount, move_from_chroma, moves_from_chroma, place_of

    started = time.monotonic()
    last = [0.0]

    def on_rows(table: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 1.0 or done >= total:
            last[0] = now
            print(f"kith: {table}: {progress_text(done, total, now - started, 'rows')}", file=sys.stderr)

    ms = settings.memory
    moves_memories = moves_from_chroma(ms, source, target)
    memories: list[CollectionCount] = []

    def copy_memories() -> None:
        memories.extend(move_from_chroma(ms, settings.storage.data_path(), target,
                                         on_records=lambda name, done, total: on_rows(f"chroma {name}", done, total)))
        wrong = [c for c in memories if c.source != c.target]
        if wrong:
            raise MigrationError("records differ after the copy: " + ", ".join(
                f"chroma {c.name} {c.source} → {c.target}" for c in wrong))

    try:
        counts = copy_store(source, target, on_rows=on_rows, then=copy_memories if moves_memories else None,
                            then_writes=MOVED_INTO if moves_memories else ())
    except MigrationError as exc:
        print(f"kith: migrate: {exc}", file=sys.stderr)
        return 1
    copied = [c for c in counts if c.source and c.source == c.target]
    print(f"kith: copied {sum(c.target for c in counts):,} rows of {len(copied)} tables in "
          f"{time.monotonic() - started:.1f} s; every table's rows counted equal on both sides", file=sys.stderr)
    for c in copied:
        print(f"  {c.table}: {c.target:,}")
    for m in memories:
        print(f"  memories from chroma {m.name}: {m.target:,}")
    shown = target_url.split("@")[-1]
    where = ("memories moved into its tables" if moves_memories
             else "memories in Chroma stay there" if place_of(ms, source) == "chroma"
             else "memories moved with the tables")
    print(f"kith: to run on it, set [storage] database_url to that URL ({shown}); {where}", file=sys.stderr)
    return 0
