"""Every wait of a SQL store ends: bounds per connection and per session, read from the URL.

A client cut off mid-transaction (a partition: its server side stays open) leaves the server
holding the transaction's row locks. The server ends such a transaction itself
(``idle_in_transaction_timeout``), a statement waits on a lock or runs for a bounded time
(``lock_timeout``, ``statement_timeout``) and the client waits for an answer for a bounded
time (``read_timeout``); a bound that runs out is answered as ``StoreUnavailable``.

The client bound is the driver's where it has one (pymysql: per read). psycopg and aiomysql
have none: a watchdog shuts the socket of a connection held longer than ``read_timeout`` by
one operation, and the driver reports a lost connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.engine import URL

from rill_executor import ConfigError

__all__ = [
    "Bounds",
    "bound_options",
    "connect_args",
    "engine_bounds",
    "set_on_connect",
    "split_bounds",
]

# Seconds; each at most half the Rill Flow executor's default lease (10 s): the executor
# refuses a lease shorter than twice the longest (``Bounds.longest``, ``check_lease``). The
# client waits a little longer than the server's own bounds, so that a statement the server
# ends is reported as the server's error.
_SERVER_DEFAULTS = {
    "connect_timeout": 4.0,
    "statement_timeout": 4.0,
    "lock_timeout": 4.0,
    "idle_in_transaction_timeout": 4.0,
    "read_timeout": 5.0,
}
_SQLITE_DEFAULTS = {"busy_timeout": 5.0}
_OPTIONS = {**_SERVER_DEFAULTS, **_SQLITE_DEFAULTS}
_MAX = 86400.0
_DUE = "rill_bound_due"  # a connection record's armed watchdog entry


@dataclass(frozen=True)
class Bounds:
    """Seconds; None leaves the server's or driver's own setting (schema upgrades)."""

    connect: float | None = None
    statement: float | None = None
    lock: float | None = None
    idle: float | None = None
    read: float | None = None
    busy: float | None = None

    @property
    def longest(self) -> float | None:
        """The longest any one of them lets an operation wait (None: none is set)."""
        waits = [self.connect, self.statement, self.lock, self.idle, self.read, self.busy]
        return max((wait for wait in waits if wait is not None), default=None)

    def for_migrations(self) -> Bounds:
        """A migration may rewrite a large table: only connecting and SQLite's lock wait
        stay bounded."""
        return replace(self, statement=None, lock=None, idle=None, read=None)


def _seconds(name: str, raw: Any) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if not 0 < value <= _MAX:
        raise ConfigError(
            f"the store URL option {name}={raw!r} must be a number of seconds above 0 and at"
            f" most {_MAX:g}"
        )
    return value


def bound_options(family: str) -> tuple[str, ...]:
    """The URL options that set the bounds of ``family``'s stores."""
    return tuple(_SQLITE_DEFAULTS if family == "sqlite" else _SERVER_DEFAULTS)


def split_bounds(url: URL, family: str) -> tuple[Bounds, URL]:
    """The bounds the URL sets (or the defaults), and the URL without those options."""
    own = _SQLITE_DEFAULTS if family == "sqlite" else _SERVER_DEFAULTS
    foreign = sorted(set(url.query) & (set(_OPTIONS) - set(own)))
    if foreign:
        raise ConfigError(
            f"the store URL option {foreign[0]} does not apply to {family}; its options"
            f" are {', '.join(own)}"
        )
    values = {name: _seconds(name, url.query.get(name, default)) for name, default in own.items()}
    bounds = Bounds(
        connect=values.get("connect_timeout"),
        statement=values.get("statement_timeout"),
        lock=values.get("lock_timeout"),
        idle=values.get("idle_in_transaction_timeout"),
        read=values.get("read_timeout"),
        busy=values.get("busy_timeout"),
    )
    return bounds, url.difference_update_query(own)


def _ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


def _postgres_args(bounds: Bounds, url: URL) -> dict[str, Any]:
    """libpq's connect timeout (psycopg bounds the whole connect with it) and the session's
    server bounds as startup options: no round trip of their own."""
    args: dict[str, Any] = {}
    if bounds.connect is not None:
        args["connect_timeout"] = max(2, math.ceil(bounds.connect))  # libpq's minimum is 2
    settings = {
        "statement_timeout": bounds.statement,
        "lock_timeout": bounds.lock,
        "idle_in_transaction_session_timeout": bounds.idle,
    }
    options = [f"-c {name}={_ms(value)}" for name, value in settings.items() if value is not None]
    theirs = url.query.get("options")
    if options:
        # The URL's own options come last: a setting there wins over ours.
        args["options"] = " ".join([*options, *([theirs] if isinstance(theirs, str) else [])])
    return args


def _mariadb_args(bounds: Bounds, is_async: bool) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if bounds.connect is not None:
        args["connect_timeout"] = bounds.connect
        if is_async:  # aiomysql bounds the TCP connect only, not the handshake after it
            args["async_creator_fn"] = _bounded_aiomysql_connect(bounds.connect)
    if bounds.read is not None and not is_async:
        args["read_timeout"] = args["write_timeout"] = bounds.read
    return args


def _bounded_aiomysql_connect(seconds: float) -> Callable[..., Any]:
    async def connect(*args: Any, **kwargs: Any) -> Any:
        import aiomysql
        from pymysql.err import OperationalError

        try:
            return await asyncio.wait_for(aiomysql.connect(*args, **kwargs), seconds)
        except TimeoutError as exc:
            raise OperationalError(
                2003, f"Can't connect to MySQL server: no answer in {seconds:g} s"
            ) from exc

    return connect


def _mariadb_session(bounds: Bounds) -> tuple[str, str | None] | None:
    """``SET SESSION``: the server rolls an abandoned transaction back and frees its locks.
    And for MySQL, which has neither ``max_statement_time`` nor ``idle_transaction_timeout``
    (it refuses the first as unknown), the lock wait alone."""
    lock = None if bounds.lock is None else f"innodb_lock_wait_timeout={math.ceil(bounds.lock)}"
    settings = [
        lock,
        None if bounds.statement is None else f"max_statement_time={bounds.statement:g}",
        None if bounds.idle is None else f"idle_transaction_timeout={math.ceil(bounds.idle)}",
    ]
    chosen = [setting for setting in settings if setting is not None]
    if not chosen:
        return None
    return "SET SESSION " + ", ".join(chosen), lock and f"SET SESSION {lock}"


def connect_args(family: str, bounds: Bounds, url: URL, *, is_async: bool) -> dict[str, Any]:
    """The driver's connect arguments that carry ``bounds``."""
    if family == "postgresql":
        return _postgres_args(bounds, url)
    if family == "mysql":
        return _mariadb_args(bounds, is_async)
    return {}


def engine_bounds(engine: Engine, family: str, bounds: Bounds, *, is_async: bool) -> None:
    """Install what the connect arguments cannot carry: MariaDB's session settings, and the
    watchdog where the driver has no read timeout (psycopg; aiomysql)."""
    if family == "mysql":
        session = _mariadb_session(bounds)
        if session is not None:
            event.listen(engine, "connect", set_on_connect(*session))
    if bounds.read is None or family == "sqlite" or (family == "mysql" and not is_async):
        return
    cut_of = _psycopg_cut if family == "postgresql" else _aiomysql_cut
    arm = _arm_async if is_async else _arm_thread
    seconds = bounds.read

    def on_checkout(_dbapi: Any, record: Any, *_: Any) -> None:
        arm(record, cut_of(record.driver_connection), seconds)

    if family == "mysql":  # its connect events query the server: bounded as well
        event.listen(engine, "connect", on_checkout, insert=True)
    event.listen(engine, "checkout", on_checkout)
    for ending in ("checkin", "close", "detach"):
        event.listen(engine, ending, _disarm)


_UNKNOWN_VARIABLE = 1193


def set_on_connect(statement: str, fallback: str | None) -> Callable[[Any, Any], None]:
    """A connect event that runs ``statement``, or ``fallback`` where the server does not
    know one of its variables."""

    def run(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            try:
                cursor.execute(statement)
            except Exception as exc:
                if getattr(exc, "args", (None,))[0] != _UNKNOWN_VARIABLE:
                    raise
                if fallback is not None:
                    cursor.execute(fallback)
        finally:
            cursor.close()

    return run


class _Cut:
    """Shuts a connection's socket down: its pending read ends as a lost connection."""

    def __init__(self, fd: int | None = None, transport: Any = None) -> None:
        # A duplicate of the driver's descriptor: it stays this socket's even if the driver
        # closes its own and the number is reused.
        self._fd = None if fd is None else os.dup(fd)
        self._transport = transport

    def __call__(self) -> None:
        if self._transport is not None:
            self._transport.abort()
        if self._fd is not None:
            with contextlib.suppress(OSError), socket.socket(fileno=self._fd) as sock:
                self._fd = None  # the socket object closes it
                sock.shutdown(socket.SHUT_RDWR)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _psycopg_cut(connection: Any) -> _Cut | None:
    try:
        return _Cut(fd=connection.pgconn.socket)
    except Exception:  # a broken connection has no socket: nothing to watch
        return None


def _aiomysql_cut(connection: Any) -> _Cut | None:
    writer = getattr(connection, "_writer", None)
    return None if writer is None else _Cut(transport=writer.transport)


@dataclass
class _Due:
    at: float
    cut: _Cut
    handle: asyncio.TimerHandle | None = None


def _arm_async(record: Any, cut: _Cut | None, seconds: float) -> None:
    _disarm(None, record)
    if cut is not None:
        due = _Due(time.monotonic() + seconds, cut)
        due.handle = asyncio.get_running_loop().call_later(seconds, _fire, due)
        record.info[_DUE] = due


def _fire(due: _Due) -> None:
    due.cut()
    due.cut.release()


def _arm_thread(record: Any, cut: _Cut | None, seconds: float) -> None:
    _disarm(None, record)
    if cut is not None:
        due = _Due(time.monotonic() + seconds, cut)
        record.info[_DUE] = due
        _WATCHDOG.add(due, seconds)


def _disarm(_dbapi: Any, record: Any) -> None:
    due = record.info.pop(_DUE, None)
    if due is None:
        return
    if due.handle is not None:
        due.handle.cancel()
        due.cut.release()
    else:
        _WATCHDOG.remove(due)


class _Watchdog:
    """One thread for a process's synchronous connections: cuts those held past their due
    time. While connections are in use it wakes at the earliest due time, or one bound
    later when none is armed (so arming seldom has to wake it); idle, it sleeps for good."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._armed: dict[int, _Due] = {}
        self._wake_at = math.inf
        self._used = False  # armed since the thread last woke
        self._pace = math.inf  # the shortest bound armed
        self._thread: threading.Thread | None = None

    def add(self, due: _Due, seconds: float) -> None:
        with self._cond:
            self._armed[id(due)] = due
            self._used, self._pace = True, min(self._pace, seconds)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="rill-sql-bounds")
                self._thread.daemon = True
                self._thread.start()
            if due.at < self._wake_at:
                self._cond.notify()

    def remove(self, due: _Due) -> None:
        with self._cond:
            if self._armed.pop(id(due), None) is None:
                return  # already cut (and released)
        due.cut.release()

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                overdue = [due for due in self._armed.values() if due.at <= now]
                for due in overdue:
                    del self._armed[id(due)]
                    _fire(due)
                if self._armed:
                    self._wake_at = min(due.at for due in self._armed.values())
                else:
                    self._wake_at = now + self._pace if self._used else math.inf
                self._used = False
                self._cond.wait(None if self._wake_at == math.inf else self._wake_at - now)

    def forked(self) -> None:
        """In a forked child: the parent's thread does not exist there."""
        self.__init__()  # type: ignore[misc]


_WATCHDOG = _Watchdog()
os.register_at_fork(after_in_child=_WATCHDOG.forked)
