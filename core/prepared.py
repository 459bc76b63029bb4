"""Statements on every message's path, compiled once and run on SQLite's own connection.

Each message runs about fourteen small indexed statements. Through SQLAlchemy's execution path
(parameter processing, execution context, result object) they took over a third of kith's CPU per
message in ``bench.telegram_e2e``, three quarters of it outside SQLite; run this way, kith's CPU per
message there fell by about a fifth. A ``Prepared`` statement is
still written in SQLAlchemy Core and compiled by it, with the dialect's own bind and result
processors, so it stores and reads exactly what ``conn.execute`` would; on SQLite it then runs
straight on the driver's connection, inside the caller's transaction. On any other database it is
plain ``conn.execute``: that path stays the portable one.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql.compiler import SQLCompiler

Params = Mapping[str, Any]
_REQUIRED = object()  # a bind parameter the caller must give
_EXPANDING = re.compile(r"\(__\[POSTCOMPILE_(\w+)\]\)")


@dataclass(frozen=True, slots=True)
class _Plan:
    """One compiled form: SQL split around its expanding (``IN``) parameters, and how to fill it."""
    parts: tuple[str, ...]  # len(expanding) + 1 pieces of SQL
    expanding: tuple[str, ...]  # in order of appearance
    binds: tuple[tuple[str, Any, Callable[[Any], Any] | None], ...]  # (name, default, processor) in order
    row: type[tuple[Any, ...]] | None  # for a statement that returns rows
    results: tuple[tuple[int, Callable[[Any], Any]], ...]  # (column index, processor)


class Prepared:
    """A Core statement run with SQLAlchemy's compilation but without its per-execution machinery.

    ``first``, ``all`` and ``scalar`` read; ``run`` writes and returns the rows it touched;
    ``insert`` returns the new row's id; ``insert_many`` writes several rows. Rows carry the
    statement's column names as attributes, as ``sa.Row`` does. Errors are SQLAlchemy's own
    (``sa.exc.IntegrityError`` and the rest), with the parameters left out of their text.
    """

    def __init__(self, statement: sa.Executable) -> None:
        self.statement = statement
        self._takes_values = isinstance(statement, sa.sql.dml.ValuesBase)  # columns set from the params' keys
        key = list(statement.table.primary_key.columns) if isinstance(statement, sa.Insert) else []
        # SQLite's lastrowid is the new row's id only where one integer column is the whole key.
        self._has_row_id = len(key) == 1 and isinstance(key[0].type, sa.Integer)
        self._plans: dict[tuple[type, str, frozenset[str]], _Plan | None] = {}

    def first(self, conn: Connection, params: Params) -> Any:
        rows = self._rows(conn, params, one=True)
        if rows is None:
            return conn.execute(self.statement, params).first()
        return rows[0] if rows else None

    def all(self, conn: Connection, params: Params) -> list[Any]:
        rows = self._rows(conn, params, one=False)
        return conn.execute(self.statement, params).all() if rows is None else rows

    def scalar(self, conn: Connection, params: Params) -> Any:
        row = self.first(conn, params)
        return None if row is None else row[0]

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
        sql = plan.parts[0]
        values = [self._values(plan, r) for r in rows]
        self._call(conn, sql, values, lambda driver: driver.executemany(sql, values))

    def _rows(self, conn: Connection, params: Params, *, one: bool) -> list[Any] | None:
        plan = self._plan(conn, params)
        if plan is None or plan.row is None:
            return None
        cursor = self._run_plan(conn, plan, params)
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
        return None if plan is None else self._run_plan(conn, plan, params)

    def _run_plan(self, conn: Connection, plan: _Plan, params: Params) -> Any:
        if not plan.expanding:
            sql, values = plan.parts[0], self._values(plan, params)
        else:
            expanded = self._expand(plan, params)
            if expanded is None:
                return None
            sql, values = expanded
        return self._call(conn, sql, values, lambda driver: driver.execute(sql, values))

    @staticmethod
    def _values(plan: _Plan, params: Params) -> list[Any]:
        values = []
        for name, default, process in plan.binds:
            value = params[name] if name in params else _default(name, default)
            values.append(value if process is None or value is None else process(value))
        return values

    @staticmethod
    def _expand(plan: _Plan, params: Params) -> tuple[str, list[Any]] | None:
        """The SQL with each ``IN`` list written out, and the values in order; ``None`` for an empty
        list (its SQL is the dialect's own, so Core renders it)."""
        values: list[Any] = []
        lengths: dict[str, int] = {}
        for name, default, process in plan.binds:
            value = params[name] if name in params else _default(name, default)
            if name in plan.expanding:
                items = list(value)
                if not items:
                    return None
                lengths[name] = len(items)
                values.extend(item if process is None or item is None else process(item) for item in items)
            else:
                values.append(value if process is None or value is None else process(value))
        pieces = [plan.parts[0]]
        for name, part in zip(plan.expanding, plan.parts[1:], strict=True):
            pieces.append("(" + ", ".join("?" * lengths[name]) + ")" + part)
        return "".join(pieces), values

    @staticmethod
    def _call(conn: Connection, sql: str, values: Any, call: Callable[[Any], Any]) -> Any:
        dialect = conn.dialect
        try:
            return call(conn.connection.driver_connection)
        except dialect.loaded_dbapi.Error as exc:
            raise sa.exc.DBAPIError.instance(sql, values, exc, dialect.loaded_dbapi.Error, hide_parameters=True,
                                             dialect=dialect) from exc

    def _plan(self, conn: Connection, params: Params) -> _Plan | None:
        dialect = conn.dialect
        key = (type(dialect), dialect.paramstyle, frozenset(params) if self._takes_values else frozenset())
        try:
            return self._plans[key]
        except KeyError:
            # pysqlite only: another SQLite driver's connection may not be the sqlite3 module's (aiosqlite).
            plan = self._plans[key] = _compile(self.statement, dialect, sorted(params)) \
                if dialect.driver == "pysqlite" else None
            return plan


def _default(name: str, default: Any) -> Any:
    if default is _REQUIRED:
        raise sa.exc.InvalidRequestError(f"A value is required for bind parameter {name!r}")
    return default


def _compile(statement: sa.Executable, dialect: Dialect, keys: list[str]) -> _Plan | None:
    compiled = statement.compile(dialect=dialect, column_keys=keys)
    assert isinstance(compiled, SQLCompiler)
    if not compiled.positional or compiled.positiontup is None or compiled.insert_prefetch \
            or compiled.update_prefetch or compiled.effective_returning:
        return None  # Python-side defaults or RETURNING: SQLAlchemy's own execution does those
    names = tuple(compiled.positiontup)
    binds = []
    for name in names:
        bind = compiled.binds[name]
        if bind.callable is not None:
            return None
        process = bind.type.dialect_impl(dialect).bind_processor(dialect)
        binds.append((name, _REQUIRED if bind.required else bind.value, process))
    parts = _EXPANDING.split(compiled.string)
    expanding = tuple(parts[1::2])
    if any(not compiled.binds[name].expanding for name in expanding):
        return None
    row: type[tuple[Any, ...]] | None = None
    results: list[tuple[int, Callable[[Any], Any]]] = []
    if isinstance(statement, sa.Select):
        columns = list(statement.selected_columns)
        # A named tuple gives the column names as attributes, as sa.Row does (renamed where not identifiers).
        row = collections.namedtuple("Row", [str(c.key) for c in columns], rename=True)  # type: ignore[misc]
        for index, column in enumerate(columns):
            process = column.type.dialect_impl(dialect).result_processor(dialect, None)
            if process is not None:
                results.append((index, process))
    return _Plan(tuple(parts[0::2]), expanding, tuple(binds), row, tuple(results))


__all__ = ["Prepared"]
