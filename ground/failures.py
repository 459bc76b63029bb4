"""How a failure kith handles is logged: one line for a database that refuses work, a traceback for a bug.

A full disk, a read-only or locked database, an I/O error or a lost database server is an operating
condition, not a defect: kith keeps what it was doing and tries again, and the operator needs the ids,
the error's class and the database's own reason, on one line. A traceback there is thirty lines of
SQLAlchemy per retry that hide what matters. Anything else that a caller catches broadly is a bug,
and its traceback is how it is found.
"""

from __future__ import annotations

import sqlite3

from sqlalchemy import exc as sa_exc

from ground.tunables import LOG_ERROR_REASON_MAX_CHARS


def database_refused(exc: BaseException) -> bool:
    """Whether ``exc`` is the database refusing work (SQLite's or the server's OperationalError)."""
    return isinstance(exc, (sa_exc.OperationalError, sqlite3.OperationalError))


def traceback_of(exc: BaseException) -> BaseException | None:
    """What a log line about a handled failure passes as ``exc_info``: nothing when the database refused."""
    return None if database_refused(exc) else exc


def describe(exc: BaseException) -> str:
    """The exception's class; for the database refusing work, with its reason, e.g.
    ``OperationalError (database or disk is full)``. SQLAlchemy's own text is left out: it carries the
    statement; the driver's reason is the database's fixed wording, never a parameter."""
    name = type(exc).__name__
    if not database_refused(exc):
        return name
    cause = exc.orig if isinstance(exc, sa_exc.DBAPIError) and exc.orig is not None else exc
    reason = str(cause.args[0]) if cause.args else ""
    reason = reason.strip().splitlines()[0][:LOG_ERROR_REASON_MAX_CHARS] if reason.strip() else ""
    return f"{name} ({reason})" if reason else name
