"""A store URL's query options: every one is the store's, SQLAlchemy's or the driver's, or the
store refuses to open (``check_options``), before it reads or writes anything.

Unchecked, a name nobody takes was refused late or not at all: PyMySQL and aiomysql raise a
``TypeError`` at the first connection, libpq "invalid connection option", and SQLAlchemy's
SQLite dialect drops it without a word. The names each takes are read from the driver
itself where it says them: libpq's keywords from psycopg (``psycopg.pq.Conninfo``), the
keyword arguments of ``pymysql.connections.Connection`` and ``aiomysql.connect``.
SQLAlchemy's own are listed here (its 2.0 releases: the adapter's ``sqlalchemy<2.1``
bound): the MySQL dialects' ``ssl_*`` options, gathered into the driver's ``ssl``, and the
SQLite dialect's (with ``uri=true``, the rest go to SQLite as URI parameters). A URL with
SQLAlchemy's ``plugin`` is not checked: a plugin takes options of its own.

A few names the driver takes are refused anyway, the store setting them itself (its value
would be dropped): SQLite's ``timeout`` (``busy_timeout`` sets it), ``check_same_thread``
and ``isolation_level``, and PyMySQL's ``write_timeout`` (``read_timeout`` sets it).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

from sqlalchemy.engine import URL
from sqlalchemy.util import asbool

from rill_executor import ConfigError
from rill_executor.store import unknown_url_option

from ._bounds import bound_options

__all__ = ["check_options"]

_NAMES = {"postgresql": "PostgreSQL", "mysql": "MariaDB", "sqlite": "SQLite"}
_SQLALCHEMY_MYSQL_SSL = frozenset(
    ("ssl_ca", "ssl_key", "ssl_cert", "ssl_capath", "ssl_cipher", "ssl_check_hostname")
)
_SQLALCHEMY_SQLITE = frozenset(
    ("uri", "timeout", "isolation_level", "detect_types", "check_same_thread", "cached_statements")
)
_SQLITE_URI = frozenset(("vfs", "mode", "cache", "psow", "nolock", "immutable"))
# family: {name: the store's option that sets it, or None}
_SET_BY_THE_STORE: dict[str, dict[str, str | None]] = {
    "sqlite": {"timeout": "busy_timeout", "check_same_thread": None, "isolation_level": None},
    "mysql": {"write_timeout": "read_timeout"},
}


def _ours(family: str) -> tuple[str, ...]:
    pool = () if family == "sqlite" else ("pool_size",)
    return ("durability", *pool, *bound_options(family))


def _libpq() -> frozenset[str]:
    from psycopg import pq

    return frozenset(option.keyword.decode() for option in pq.Conninfo.get_defaults())


def _pymysql() -> frozenset[str]:
    from pymysql.connections import Connection

    return _SQLALCHEMY_MYSQL_SSL | _keywords(Connection.__init__)


def _aiomysql() -> frozenset[str]:
    import aiomysql

    return _SQLALCHEMY_MYSQL_SSL | _keywords(aiomysql.connect)


def _keywords(function: Callable[..., object]) -> frozenset[str]:
    params = inspect.signature(function).parameters.values()
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(p.name for p in params if p.kind in kinds and p.name != "self")


_DRIVERS: dict[tuple[str, bool], tuple[str, Callable[[], frozenset[str]]]] = {
    ("postgresql", False): ("libpq, through psycopg", _libpq),
    ("postgresql", True): ("libpq, through psycopg", _libpq),
    ("mysql", False): ("PyMySQL, through SQLAlchemy", _pymysql),
    ("mysql", True): ("aiomysql, through SQLAlchemy", _aiomysql),
}


@functools.cache
def driver_options(family: str, is_async: bool) -> tuple[str, frozenset[str]] | None:
    """Who takes the options of a store URL past the store's own, and their names; None when
    the driver is not installed (opening the store says which extra provides it)."""
    if family == "sqlite":
        return "SQLAlchemy's SQLite dialect", _SQLALCHEMY_SQLITE - set(_SET_BY_THE_STORE["sqlite"])
    label, read = _DRIVERS[(family, is_async)]
    try:
        names = read()
    except ImportError:
        return None
    return label, names - set(_SET_BY_THE_STORE.get(family, {}))


def _true(value: object) -> bool:
    """As SQLAlchemy's SQLite dialect reads ``uri`` (a value it cannot read, it refuses)."""
    try:
        return value is not None and bool(asbool(value))
    except ValueError:
        return False


def check_options(url: URL, family: str, *, is_async: bool) -> None:
    """Refuse, with a ``ConfigError`` naming it, an option of ``url`` nobody takes."""
    if "plugin" in url.query:
        return
    ours = _ours(family)
    found = driver_options(family, is_async)
    if found is None:
        return
    label, theirs = found
    if family == "sqlite" and _true(url.query.get("uri")):
        theirs = theirs | _SQLITE_URI
    set_by_store = _SET_BY_THE_STORE.get(family, {})
    for name in url.query:
        if name in ours or name in theirs or name == "pool_size":  # pool_size: see _dialect
            continue
        if name in set_by_store:
            instead = set_by_store[name]
            raise ConfigError(
                f"the store URL option {name} does not apply to {family}: the store sets it"
                + (f" from {instead}; set {instead} instead" if instead else "")
            )
        raise unknown_url_option(
            name,
            f"the {_NAMES[family]} store URL",
            ("rill-executor-sql", ours),
            (label, theirs),
            "docs/stores.md (URL options)",
        )
