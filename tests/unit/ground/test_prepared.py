"""Prepared statements store and read exactly what SQLAlchemy's own execution does, on a real SQLite file."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.db import UtcDateTime
from ground.prepared import Prepared

meta = sa.MetaData()
notes = sa.Table(
    "notes", meta,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("owner", sa.String(32), nullable=False),
    sa.Column("text", sa.Text, nullable=True),
    sa.Column("at", UtcDateTime(), nullable=True),
    sa.Column("pinned", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("blob", sa.LargeBinary, nullable=True),
    sa.UniqueConstraint("owner", "text"),
)
stamped = sa.Table(
    "stamped", meta,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("label", sa.String(32), nullable=False, default="unnamed"),  # a Python-side default
)
pairs = sa.Table(
    "pairs", meta,
    sa.Column("a", sa.String(8), primary_key=True),
    sa.Column("b", sa.String(8), primary_key=True),
)

docs = sa.Table(
    "docs", meta,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("data", sa.JSON, nullable=True),
)
wide = sa.Table("wide", meta, sa.Column("id", sa.BigInteger, primary_key=True), sa.Column("v", sa.String(8)))

INSERT = Prepared(notes.insert())
DOCS = Prepared(docs.insert())
BY_OWNER = Prepared(sa.select(notes).where(notes.c.owner == sa.bindparam("owner")).order_by(notes.c.id))
IN_LIST = Prepared(sa.select(notes.c.id, notes.c.text).where(
    notes.c.owner == sa.bindparam("owner"), notes.c.text.in_(sa.bindparam("texts", expanding=True)))
    .order_by(notes.c.id))
PIN = Prepared(notes.update().where(notes.c.owner == sa.bindparam("who")).values(pinned=True))
NEWEST = Prepared(sa.select(sa.select(sa.func.max(notes.c.id)).where(notes.c.owner == sa.bindparam("owner"))
                            .scalar_subquery()))


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[Connection]:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'prepared.db'}")
    meta.create_all(engine)
    with engine.connect() as connection:
        yield connection
    engine.dispose()


def test_a_prepared_insert_stores_what_core_stores(conn: Connection) -> None:
    at = datetime(2026, 3, 1, 9, 30, tzinfo=timezone(timedelta(hours=2)))
    row = {"owner": "ana", "text": "née 🌱 \u200b", "at": at, "pinned": True, "blob": b"\x00\xff"}
    with conn.begin():
        first = INSERT.insert(conn, row)
        second = int(conn.execute(notes.insert(), {**row, "text": "via core"}).inserted_primary_key[0])
    assert second == first + 1
    stored = conn.execute(sa.select(notes).order_by(notes.c.id)).all()
    assert [tuple(r)[1:] for r in stored] == [
        ("ana", "née 🌱 \u200b", at.astimezone(UTC), True, b"\x00\xff"),
        ("ana", "via core", at.astimezone(UTC), True, b"\x00\xff")]
    # The raw column too: the same text on disk either way, so Core's own queries compare and sort it alike.
    raw = conn.exec_driver_sql("SELECT at FROM notes").scalars().all()
    assert raw[0] == raw[1]


def test_rows_read_back_as_core_reads_them(conn: Connection) -> None:
    with conn.begin():
        INSERT.insert(conn, {"owner": "ana", "text": None, "at": datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)})
        INSERT.insert(conn, {"owner": "ana", "text": "two", "at": None, "pinned": True})
    with conn.begin():
        ours = BY_OWNER.all(conn, {"owner": "ana"})
        core = conn.execute(BY_OWNER.statement, {"owner": "ana"}).all()
        assert [tuple(r) for r in ours] == [tuple(r) for r in core]
        assert ours[0].at == datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC) and ours[0].at.tzinfo is not None
        assert ours[1].pinned is True and ours[0].pinned is False  # server default, read as a bool
        assert BY_OWNER.first(conn, {"owner": "ana"}).id == core[0].id
        assert BY_OWNER.first(conn, {"owner": "bo"}) is None
        assert BY_OWNER.all(conn, {"owner": "bo"}) == []


def test_in_lists_of_any_length(conn: Connection) -> None:
    with conn.begin():
        INSERT.insert_many(conn, [{"owner": "ana", "text": t} for t in ("a", "b", "c")])
        assert [r.text for r in IN_LIST.all(conn, {"owner": "ana", "texts": ["c", "a"]})] == ["a", "c"]
        assert [r.text for r in IN_LIST.all(conn, {"owner": "ana", "texts": ["b"]})] == ["b"]
        assert [r.text for r in IN_LIST.all(conn, {"owner": "ana", "texts": ["a", "b", "c", "z"]})] == ["a", "b", "c"]
        assert IN_LIST.all(conn, {"owner": "ana", "texts": []}) == []  # the dialect's empty set, through Core
        either = sa.bindparam("names", expanding=True)  # one list used twice
        twice = Prepared(sa.select(notes.c.text).where(sa.or_(notes.c.owner.in_(either), notes.c.text.in_(either)))
                         .order_by(notes.c.id))
        assert [r.text for r in twice.all(conn, {"names": ["b", "zed"]})] == ["b"]
        assert [r.text for r in twice.all(conn, {"names": ["ana"]})] == ["a", "b", "c"]


def test_in_lists_core_renders_itself_still_work(conn: Connection) -> None:
    pairs_in = Prepared(sa.select(notes.c.text).where(
        sa.tuple_(notes.c.owner, notes.c.text).in_(sa.bindparam("pairs", expanding=True))).order_by(notes.c.id))
    literal_in = Prepared(sa.select(notes.c.text).where(
        notes.c.text.in_(sa.bindparam("texts", expanding=True, literal_execute=True))).order_by(notes.c.id))
    literal_limit = Prepared(sa.select(notes.c.text).order_by(notes.c.id)  # a number Core writes into the SQL
                             .limit(sa.bindparam("n", type_=sa.Integer, literal_execute=True)))
    spaced_in = Prepared(sa.select(notes.c.text).where(  # a name SQLAlchemy escapes in the SQL it writes
        notes.c.text.in_(sa.bindparam("the texts", expanding=True))).order_by(notes.c.id))
    with conn.begin():
        INSERT.insert_many(conn, [{"owner": "ana", "text": "a"}, {"owner": "bo", "text": "b"}])
        assert [r.text for r in pairs_in.all(conn, {"pairs": [("bo", "b"), ("ana", "x")]})] == ["b"]
        assert [r.text for r in literal_in.all(conn, {"texts": ["a", "b"]})] == ["a", "b"]
        assert [r.text for r in spaced_in.all(conn, {"the texts": ["b"]})] == ["b"]
        assert [r.text for r in literal_limit.all(conn, {"n": 1})] == ["a"]


def test_writes_report_the_rows_they_touched(conn: Connection) -> None:
    with conn.begin():
        INSERT.insert_many(conn, [{"owner": "ana", "text": "a"}, {"owner": "ana", "text": "b"},
                                  {"owner": "bo", "text": "c"}])
        assert PIN.run(conn, {"who": "ana"}) == 2
        assert PIN.run(conn, {"who": "cy"}) == 0
    with conn.begin():
        assert [r.pinned for r in BY_OWNER.all(conn, {"owner": "ana"})] == [True, True]
        assert [r.pinned for r in BY_OWNER.all(conn, {"owner": "bo"})] == [False]


def test_unnamed_columns_read_by_position(conn: Connection) -> None:
    with conn.begin():
        assert NEWEST.first(conn, {"owner": "ana"})[0] is None
        last = INSERT.insert(conn, {"owner": "ana", "text": "x"})
        assert NEWEST.first(conn, {"owner": "ana"})[0] == last


def test_a_broken_constraint_is_sqlalchemys_error_without_the_text(conn: Connection) -> None:
    with conn.begin():
        INSERT.insert(conn, {"owner": "ana", "text": "a private thought"})
    with pytest.raises(sa.exc.IntegrityError) as caught, conn.begin():
        INSERT.insert(conn, {"owner": "ana", "text": "a private thought"})
    assert "a private thought" not in str(caught.value)  # error text reaches logs; memory content must not
    with conn.begin():  # a savepoint rolls back to a transaction that goes on, as with Core
        INSERT.insert(conn, {"owner": "cy", "text": "before"})
        with pytest.raises(sa.exc.IntegrityError), conn.begin_nested():
            INSERT.insert_many(conn, [{"owner": "bo", "text": "b"}, {"owner": "ana", "text": "a private thought"}])
        INSERT.insert(conn, {"owner": "cy", "text": "after"})
    with conn.begin():
        assert BY_OWNER.all(conn, {"owner": "bo"}) == []
        assert [r.text for r in BY_OWNER.all(conn, {"owner": "cy"})] == ["before", "after"]


def test_a_value_of_the_wrong_type_is_a_statement_error_without_the_value(conn: Connection) -> None:
    with pytest.raises(sa.exc.StatementError) as caught, conn.begin():
        INSERT.insert(conn, {"owner": "ana", "text": "t", "pinned": "secret-yes"})
    assert "secret-yes" not in str(caught.value)


def test_a_missing_parameter_is_an_error_not_a_null(conn: Connection) -> None:
    with pytest.raises(sa.exc.StatementError, match="owner"), conn.begin():
        BY_OWNER.all(conn, {})


def test_python_side_defaults_still_apply(conn: Connection) -> None:
    insert = Prepared(stamped.insert())
    with conn.begin():
        first = insert.insert(conn, {})
        insert.insert(conn, {"label": "given"})
    assert conn.execute(sa.select(stamped.c.label).order_by(stamped.c.id)).scalars().all() == ["unnamed", "given"]
    assert first == 1


def test_a_rollback_undoes_prepared_writes(conn: Connection) -> None:
    with pytest.raises(RuntimeError), conn.begin():
        INSERT.insert(conn, {"owner": "ana", "text": "gone"})
        raise RuntimeError("crash mid-transaction")
    with conn.begin():
        assert BY_OWNER.all(conn, {"owner": "ana"}) == []


def test_a_write_with_no_transaction_begun_is_committed_as_core_would(conn: Connection) -> None:
    INSERT.insert(conn, {"owner": "ana", "text": "commit as you go"})  # Core begins the transaction here
    conn.commit()
    with conn.engine.connect() as other:
        assert other.execute(sa.select(notes.c.text)).scalars().all() == ["commit as you go"]


def test_none_goes_through_the_type_as_with_core(conn: Connection) -> None:
    """A JSON column stores None as JSON's null, a NOT NULL column's type may turn None into a value."""
    with conn.begin():
        DOCS.run(conn, {"id": 1, "data": None})
        conn.execute(docs.insert(), {"id": 2, "data": None})
        raw = conn.exec_driver_sql("SELECT data, typeof(data) FROM docs ORDER BY id").all()
        assert raw[0] == raw[1] == ("null", "text")


def test_each_engine_s_own_type_settings_apply(tmp_path: Path) -> None:
    engines = [sa.create_engine(f"sqlite:///{tmp_path / f'{n}.db'}", json_serializer=serializer)
               for n, serializer in (("escaped", json.dumps),
                                     ("unicode", functools.partial(json.dumps, ensure_ascii=False)))]
    stored = []
    for engine in engines:
        meta.create_all(engine)
        with engine.begin() as connection:
            DOCS.run(connection, {"id": 1, "data": "é"})
            stored.append(connection.exec_driver_sql("SELECT data FROM docs").scalar())
        engine.dispose()
    assert stored == ['"\\u00e9"', '"é"']


def test_insert_returns_an_id_only_where_the_table_has_one(conn: Connection) -> None:
    insert = Prepared(pairs.insert())
    with pytest.raises(TypeError):
        insert.insert(conn, {"a": "x", "b": "y"})
    with conn.begin():
        assert insert.run(conn, {"a": "x", "b": "y"}) == 1
    assert conn.execute(sa.select(pairs)).all() == [("x", "y")]
    with pytest.raises(TypeError):  # BIGINT PRIMARY KEY is no alias of SQLite's rowid
        Prepared(wide.insert()).insert(conn, {"id": 1000, "v": "x"})
