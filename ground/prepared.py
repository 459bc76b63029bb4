"""Statements on every message's path, compiled once and run on SQLite's own connection.

Each message runs about fourteen small indexed statements. Through SQLAlchemy's execution path
(parameter processing, execution context, result object) they took over a third of kith's CPU per
message in ``bench.telegram_e2e``, three quarters of it outside SQLite; run this way, kith's CPU per
message there fell by about a fifth. A ``Prepared`` statement is still written in SQLAlchemy Core and
compiled by it, with the dialect's own bind and result processors, so it stores and reads what
``conn.execute`` would; on pysqlite, inside a transaction the caller began, it then runs straight on
the driver's connection. Anything else goes through ``conn.execute``, the portable path: another
database or driver, no transaction begun, a schema translation, Python-side defaults, RETURNING,
an empty, tuple or literal ``IN`` list.

What the direct path does not do: engine events and ``echo`` do not see its statements, and its
rows are named tuples (attributes by column key, and positions), not ``sa.Row``.
"""

from __future__ import annotations

import collections
import re
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql.compiler import SQLCompiler

Params = Mapping[str, Any]
Processor = Callable[[Any], Any]
_REQUIRED = object()  # a bind parameter the caller must give
_EXPANDING = re.compile(r"\(__\[POSTCOMPILE_(\w+)\]\)")


@dataclass(frozen=True, slots=True)
class _Plan:
    """One compiled form: SQL split around its expanding (``IN``) parameters, and how to fill it."""
    parts: tuple[str, ...]  # the SQL around each expanding parameter, in order
    expanding: frozenset[str]  # their names (one may appear more than once)
    binds: tuple[tuple[str, Any, Processor | None], ...]  # (name, default, processor) in order
    row: type[tuple[Any, ...]] | None  # for a statement that returns rows
    results: tuple[tuple[int, Processor], ...]  # (column index, processor)


class Prepared:
    """A Core statement run with SQLAlchemy's compilation but without its per-execution machinery.

    ``first`` and ``all`` read; ``run`` writes and returns the rows it touched;
    ``insert`` returns the new row's id; ``insert_many`` writes several rows. Errors are
    SQLAlchemy's own classes (``sa.exc.IntegrityError``, ``sa.exc.StatementError`` and the rest),
    with the parameters left out of their text.
    """

    def __init__(self, statement: sa.Executable) -> None:
        self.statement = statement
        self._takes_values = isinstance(statement, sa.sql.dml.ValuesBase)  # columns set from the params' keys
        key = list(statement.table.primary_key.columns) if isinstance(statement, sa.Insert) else []
        # SQLite's lastrowid is the new row's id only where the key is one INTEGER column (BIGINT is no rowid).
        self._has_row_id = len(key) == 1 and type(key[0].type) is sa.Integer
        # Per dialect object, as engines' options (a JSON serializer, say) shape its processors.
        self._plans: weakref.WeakKeyDictionary[Dialect, dict[frozenset[str], _Plan | None]] = \
            weakref.WeakKeyDictionary()

    def first(self, conn: Connection, params: Params) -> Any:
        rows = self._rows(conn, params, one=True)
        if rows is None:
            return conn.execute(self.statement, params).first()
        return rows[0] if rows else None

    def all(self, conn: Connection, params: Params) -> list[Any]:
        rows = self._rows(conn, params, one=False)
        return conn.execute(self.statement, params).all() if rows is None else rows

    def run(self, conn: Connection, params: Params) -> int:
        cursor = self._execute(conn, params)
        return conn.execute(self.statement, params).rowcount if cursor is None else cursor.rowcount

    def insert(self, conn: Connection, params: Params) -> int:
        if not self._has_row_id:
            raise TypeError("insert() returns an integer primary key this statement's table does not have; use run()")
        cursor = self._execute(conn, params)
        if cursor is None:
            return int(conn.execute(self.statement, params).inserted_primary_key[0])
        return int(cursor.lastrowid)

    def insert_many(self, conn: Connection, rows: Sequence[Params]) -> None:
        if not rows:
            return
        plan = self._plan(conn, rows[0]) if len({frozenset(r) for r in rows}) == 1 else None
        if plan is None or plan.expanding:
            conn.execute(self.statement, list(rows))
            return
        sql, values = plan.parts[0], []
        for row in rows:
            bound = _bound(plan, row)
            assert bound is not None  # only an empty IN list gives none, and this statement has no IN list
            values.append(bound[1])
        _call(conn, sql, values, lambda driver: driver.executemany(sql, values))

    def _rows(self, conn: Connection, params: Params, *, one: bool) -> list[Any] | None:
        plan = self._plan(conn, params)
        if plan is None or plan.row is None:
            return None
        cursor = _run_plan(conn, plan, params)
        if cursor is None:
            return None
        raw = cursor.fetchmany(1) if one else cursor.fetchall()
        cursor.close()
        make, results = plan.row, plan.results
        if not results:
            return [make(*r) for r in raw]
        out = []
        for r in raw:
            values = list(r)
            for index, process in results:
                values[index] = process(values[index])
            out.append(make(*values))
        return out

    def _execute(self, conn: Connection, params: Params) -> Any:
        plan = self._plan(conn, params)
        return None if plan is None else _run_plan(conn, plan, params)

    def _plan(self, conn: Connection, params: Params) -> _Plan | None:
        dialect = conn.dialect
        # pysqlite only: another SQLite driver's connection may not be the sqlite3 module's (aiosqlite).
        # Outside a transaction Core would begin one (and commit-as-you-go would commit it); the driver would not.
        if dialect.driver != "pysqlite" or not conn.in_transaction() \
                or conn.get_execution_options().get("schema_translate_map"):
            return None
        plans = self._plans.get(dialect)
        if plans is None:
            plans = self._plans[dialect] = {}
        key = frozenset(params) if self._takes_values else frozenset()
        try:
            return plans[key]
        except KeyError:
            plan = plans[key] = _compile(self.statement, dialect, sorted(params))
            return plan


def _run_plan(conn: Connection, plan: _Plan, params: Params) -> Any:
    bound = _bound(plan, params)
    if bound is None:
        return None
    sql, values = bound
    return _call(conn, sql, values, lambda driver: driver.execute(sql, values))


def _bound(plan: _Plan, params: Params) -> tuple[str, list[Any]] | None:
    """The SQL with each ``IN`` list written out, and the values in order; ``None`` for an empty
    list (its SQL is the dialect's own, so Core renders it)."""
    values: list[Any] = []
    pieces = [plan.parts[0]]
    rest = iter(plan.parts[1:])
    for name, default, process in plan.binds:
        value = params[name] if name in params else _default(name, default, plan)
        if name in plan.expanding:
            items = list(value)
            if not items:
                return None
            values.extend(item if process is None else _processed(process, item, plan) for item in items)
            pieces.append("(" + ", ".join("?" * len(items)) + ")" + next(rest))
        else:
            values.append(value if process is None else _processed(process, value, plan))
    return (pieces[0] if len(pieces) == 1 else "".join(pieces)), values


def _processed(process: Processor, value: Any, plan: _Plan) -> Any:
    try:
        return process(value)
    except Exception as exc:  # a value of the wrong type: Core's StatementError, without the value
        raise sa.exc.StatementError(f"a parameter could not be converted ({type(exc).__name__})",
                                    "".join(plan.parts), None, exc, hide_parameters=True) from exc


def _default(name: str, default: Any, plan: _Plan) -> Any:
    if default is _REQUIRED:
        missing = sa.exc.InvalidRequestError(f"A value is required for bind parameter {name!r}")
        raise sa.exc.StatementError(str(missing), "".join(plan.parts), None, missing, hide_parameters=True) from None
    return default


def _call(conn: Connection, sql: str, values: Any, call: Callable[[Any], Any]) -> Any:
    dialect = conn.dialect
    try:
        return call(conn.connection.driver_connection)
    except dialect.loaded_dbapi.Error as exc:
        raise sa.exc.DBAPIError.instance(sql, values, exc, dialect.loaded_dbapi.Error, hide_parameters=True,
                                         dialect=dialect) from exc


def _compile(statement: sa.Executable, dialect: Dialect, keys: list[str]) -> _Plan | None:
    """The plan for ``statement`` given parameters ``keys``; ``None`` where Core must run it."""
    compiled = statement.compile(dialect=dialect, column_keys=keys)
    assert isinstance(compiled, SQLCompiler)
    if not compiled.positional or compiled.positiontup is None or compiled.insert_prefetch \
            or compiled.update_prefetch or compiled.effective_returning or compiled.escaped_bind_names:
        return None  # Python-side defaults, RETURNING, names Core must escape: its own execution does those
    binds = []
    for name in compiled.positiontup:
        bind = compiled.binds[name]
        if bind.callable is not None or (bind.expanding and isinstance(bind.type, sa.types.TupleType)):
            return None
        process = bind.type.dialect_impl(dialect).bind_processor(dialect)
        binds.append((name, _REQUIRED if bind.required else bind.value, process))
    parts = _EXPANDING.split(compiled.string)
    expanding = parts[1::2]
    if "__[POSTCOMPILE_" in "".join(parts[0::2]) or any(not compiled.binds[name].expanding for name in expanding):
        return None  # a literal value Core writes into the SQL itself
    row: type[tuple[Any, ...]] | None = None
    results: list[tuple[int, Processor]] = []
    if isinstance(statement, sa.Select):
        columns = list(statement.selected_columns)
        # Named tuples give the columns' keys as attributes, as sa.Row does (renamed where not identifiers).
        keys = [str(k) for k in statement.selected_columns.keys()]
        row = collections.namedtuple("Row", keys, rename=True)  # type: ignore[misc]
        for index, column in enumerate(columns):
            process = column.type.dialect_impl(dialect).result_processor(dialect, None)
            if process is not None:
                results.append((index, process))
    return _Plan(tuple(parts[0::2]), frozenset(expanding), tuple(binds), row, tuple(results))


__all__ = ["Prepared"]
