"""What differs between PostgreSQL, SQLite and MariaDB: URLs, engines, clock, transactions."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Engine, create_engine, event, literal_column
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, ExceptionContext, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from rill_executor import ConfigError
from rill_executor.store import StoreError

from ._bounds import Bounds, connect_args, engine_bounds, split_bounds
from ._packet import watch_packets

__all__ = [
    "SqlDialect",
    "SqliteWriters",
    "dialect_of",
    "make_async_engine",
    "make_sync_engine",
    "share_outages",
    "shifted_now",
    "sqlite_writers",
]

_NOW = {
    "postgresql": "(extract(epoch FROM now()) * 1000000)::bigint",
    "sqlite": "CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)",
    "mysql": "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) AS SIGNED)",
}
_SYNC_DRIVER = {"postgresql": "psycopg", "sqlite": "pysqlite", "mysql": "pymysql"}
_ASYNC_DRIVER = {"postgresql": "psycopg", "mysql": "aiomysql"}  # SQLite: threads (AsyncSqlStore)
_EXTRA = {"postgresql": "postgres", "mysql": "mariadb"}
POOL_SIZE = 16  # connections a server's pool keeps open, at most, in each process
_MAX_POOL_SIZE = 1000


@dataclass(frozen=True)
class SqlDialect:
    """``family`` is postgresql, sqlite or mysql (MariaDB speaks the mysql dialect)."""

    family: str
    # Tests only (rill_executor.testing.with_clock_offset): the view's clock reads this much
    # later, or (clock_frozen) stands at this time. No URL or public argument sets them; at
    # 0 the statements are the store's own.
    clock_offset_us: int = 0
    clock_frozen: bool = False

    @property
    def server_side(self) -> bool:
        """Whether operations are single server-decided statements (else a transaction)."""
        return self.family == "postgresql"

    @property
    def now(self) -> ColumnElement[int]:
        now = shifted_now(_NOW[self.family], self.clock_offset_us, frozen=self.clock_frozen)
        return literal_column(now)

    @property
    def autocommit_pool(self) -> bool:
        """Whether reads, and a claim's first read, go through an autocommit engine of
        their own (MariaDB)."""
        return self.family == "mysql"


def shifted_now(now: str, offset_us: int, *, frozen: bool = False) -> str:
    """The SQL expression ``now`` (microseconds) ``offset_us`` later, or (``frozen``) the
    time ``offset_us`` itself: a test view's clock."""
    if frozen:
        return f"({int(offset_us)})"
    if not offset_us:
        return now
    return f"({now} + {int(offset_us)})"


def _family(url: URL) -> str:
    backend = url.get_backend_name()
    family = {
        "postgresql": "postgresql",
        "postgres": "postgresql",
        "sqlite": "sqlite",
        "mysql": "mysql",
        "mariadb": "mysql",
    }.get(backend)
    if family is None:
        raise StoreError(f"rill-executor-sql does not support {backend!r} URLs")
    return family


def dialect_of(url: str) -> tuple[SqlDialect, URL]:
    parsed = make_url(url)
    return SqlDialect(_family(parsed)), parsed


def _with_driver(url: URL, family: str, driver: str) -> URL:
    backend = "mysql" if family == "mysql" else family
    url = url.set(drivername=f"{backend}+{driver}")
    if family == "mysql" and "charset" not in url.query:
        url = url.update_query_dict({"charset": "utf8mb4"})
    return url


def _check_sqlite(url: URL) -> None:
    if url.database in (None, "", ":memory:"):
        raise StoreError(
            "an in-memory SQLite database is private to one connection; use 'memory://' for"
            " an in-process store or 'sqlite:///path/to/jobs.db' for a file"
        )


class SqliteWriters:
    """The lock this process's writers of one SQLite file take around BEGIN IMMEDIATE ...
    COMMIT. Waiting here, a writer is woken as soon as the lock is free; waiting in SQLite's
    busy handler, it polls with sleeps that grow to 100 ms, and under load some writers lose
    every poll for seconds (a heartbeat past its lease). Only processes poll for the file."""

    __slots__ = ("lock",)

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __enter__(self) -> None:
        self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


_WRITERS: dict[str, SqliteWriters] = {}
_WRITERS_GUARD = SqliteWriters()  # for the dict itself


def sqlite_writers(url: URL) -> SqliteWriters:
    """The writers' lock of the SQLite file ``url`` names, one per file in this process."""
    path = os.path.realpath(url.database or "")
    with _WRITERS_GUARD:
        return _WRITERS.setdefault(path, SqliteWriters())


def _free_writers_in_child() -> None:
    """A forked child has one thread: a lock a parent's thread held at the fork would stay
    held in the child for good. Every writers' lock starts free there."""
    for writers in (_WRITERS_GUARD, *_WRITERS.values()):
        writers.lock = threading.Lock()


os.register_at_fork(after_in_child=_free_writers_in_child)


def _pool(size: int) -> dict[str, Any]:
    """A pool that keeps every connection it opens, up to ``size``, and makes an operation
    wait for one beyond that. SQLAlchemy's overflow would close a connection over the
    pool's size as it comes back: under a burst wider than the pool, every few operations
    opened a new one (on PostgreSQL a server process forked, authenticated and warmed up)."""
    return {"pool_size": size, "max_overflow": 0}


def _pool_size(url: URL, family: str) -> tuple[int, URL]:
    """The URL's ``pool_size`` (or the default), and the URL without it."""
    raw = url.query.get("pool_size")
    if raw is None:
        return POOL_SIZE, url
    if family == "sqlite":
        raise ConfigError(
            "the store URL option pool_size does not apply to sqlite: its writers take turns"
            " on the database's lock"
        )
    size = int(raw) if isinstance(raw, str) and raw.isascii() and raw.isdigit() else 0
    if not 1 <= size <= _MAX_POOL_SIZE:
        raise ConfigError(
            f"the store URL option pool_size={raw!r} must be a whole number of connections"
            f" from 1 to {_MAX_POOL_SIZE}"
        )
    return size, url.difference_update_query(["pool_size"])


def _autocommit_args(pool_size: int) -> dict[str, Any]:
    """MariaDB reads (status, listing, ping) and a claim's first read (``peek_claim``):
    autocommit connections of their own pool. A read in the writers' pool opens an implicit
    transaction that must end (COMMIT or ROLLBACK: a second round trip); an autocommitted
    statement leaves nothing open (its snapshot and metadata lock end with it), so the next
    read on the connection sees the newest commit, whatever the server's isolation level
    (REPEATABLE READ by default). Each read is one statement, as it is under READ COMMITTED
    in a transaction."""
    return {
        "isolation_level": "AUTOCOMMIT",
        "skip_autocommit_rollback": True,  # SQLAlchemy would still send ROLLBACK at close
        "pool_reset_on_return": None,
        "pool_recycle": 3600,
        **_pool(pool_size),
    }


def _engine_args(family: str, bounds: Bounds, pool_size: int) -> dict[str, Any]:
    if family == "postgresql":
        # Each operation is one statement: autocommit spares the BEGIN/COMMIT round trips.
        # Nothing to roll back when a connection returns to the pool, either.
        return {
            "isolation_level": "AUTOCOMMIT",
            "pool_reset_on_return": None,
            **_pool(pool_size),
        }
    if family == "mysql":
        # No gap locks: two first claims of one key race on the primary key, and the
        # loser retries instead of deadlocking. Every transaction ends in the store's own
        # COMMIT or ROLLBACK (a Connection closed inside one rolls it back): the pool's
        # ROLLBACK on return would be one more round trip for each operation.
        return {
            "isolation_level": "READ COMMITTED",
            "pool_reset_on_return": None,
            "pool_recycle": 3600,
            **_pool(pool_size),
        }
    return {"connect_args": {"timeout": bounds.busy, "check_same_thread": False}}


def _sqlite_pragmas(bounds: Bounds) -> Any:
    busy_ms = round((bounds.busy or 0) * 1000)

    def pragmas(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN IMMEDIATE ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.close()

    return pragmas


@contextmanager
def _driver_installed(family: str) -> Iterator[None]:
    """SQLAlchemy imports the driver when it builds the engine: say which extra provides it."""
    try:
        yield
    except ImportError as exc:
        extra = _EXTRA.get(family)
        install = f"pip install 'rill-executor-sql[{extra}]'" if extra else "reinstall it"
        raise ConfigError(
            f"the {family} driver {exc.name or ''} cannot be imported ({exc}); install it"
            f" with: {install}"
        ) from exc


def _bounded(
    dialect: SqlDialect, url: URL, autocommit: bool, migrations: bool, *, is_async: bool
) -> tuple[Bounds, URL, dict[str, Any]]:
    """The bounds the URL sets, the URL without them, and the engine's arguments."""
    pool_size, url = _pool_size(url, dialect.family)
    bounds, url = split_bounds(url, dialect.family)
    if migrations:
        bounds = bounds.for_migrations()
    args = (
        _autocommit_args(pool_size)
        if autocommit
        else _engine_args(dialect.family, bounds, pool_size)
    )
    extra = connect_args(dialect.family, bounds, url, is_async=is_async)
    args["connect_args"] = {**args.get("connect_args", {}), **extra}
    if "options" in extra:  # the URL's own startup options are merged into ours
        url = url.difference_update_query(["options"])
    return bounds, url, args


def make_sync_engine(
    dialect: SqlDialect, url: URL, *, autocommit: bool = False, migrations: bool = False
) -> Engine:
    """The store's engine; ``autocommit``: MariaDB's autocommit engine; ``migrations``:
    an engine for schema upgrades, without statement bounds."""
    if dialect.family == "sqlite":
        _check_sqlite(url)
    bounds, url, args = _bounded(dialect, url, autocommit, migrations, is_async=False)
    with _driver_installed(dialect.family):
        engine = create_engine(
            _with_driver(url, dialect.family, _SYNC_DRIVER[dialect.family]), **args
        )
    if dialect.family == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas(bounds))
    engine_bounds(engine, dialect.family, bounds, is_async=False)
    if dialect.family == "mysql":
        watch_packets(engine)
    return engine


def make_async_engine(
    dialect: SqlDialect, url: URL, *, autocommit: bool = False, migrations: bool = False
) -> AsyncEngine:
    """A server's asyncio engine (SQLite is used from asyncio through threads)."""
    bounds, url, args = _bounded(dialect, url, autocommit, migrations, is_async=True)
    with _driver_installed(dialect.family):
        engine = create_async_engine(
            _with_driver(url, dialect.family, _ASYNC_DRIVER[dialect.family]), **args
        )
    engine_bounds(engine.sync_engine, dialect.family, bounds, is_async=True)
    if dialect.family == "mysql":
        watch_packets(engine.sync_engine)
    return engine


_OPENED = "rill_opened"


def share_outages(*engines: Engine) -> None:
    """One server behind several pools (MariaDB's writers and autocommit pools): a connection
    one pool finds lost marks every connection the pools opened before it as lost too, and
    each is opened again at its next checkout. SQLAlchemy renews only the pool that saw the
    loss; without this, an outage would fail one operation in each pool, not one in all."""
    lost = [0.0]

    def opened(dbapi_connection: Any, record: Any) -> None:
        record.info[_OPENED] = time.monotonic()

    def failed(context: ExceptionContext) -> None:
        if context.is_disconnect:
            lost[0] = time.monotonic()

    def checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        if record.info.get(_OPENED, 0.0) < lost[0]:  # the pool opens it again and retries
            raise sa_exc.DisconnectionError("a pool of this store lost its server connection")

    for engine in engines:
        event.listen(engine, "connect", opened)
        event.listen(engine, "handle_error", failed)
        event.listen(engine, "checkout", checkout, insert=True)  # before any other use
