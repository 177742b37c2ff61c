"""Driver errors mapped to rill-executor's, in one place."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import exc as sa

from rill_executor import ConfigError
from rill_executor.store import SchemaMissing, StoreError, StoreUnavailable

__all__ = ["is_race", "wrap_errors"]

# MariaDB: duplicate key (two first claims raced), deadlock. Not a lock wait timeout: a lock
# held that long is a stuck transaction's (a partitioned client's), and waiting again on it
# would not end before the server ends that transaction.
_RACE_CODES = {1062, 1213}
# A bound of the session ran out (docs/stores.md, "Every wait ends"). MariaDB: lock wait
# timeout, max_statement_time (MariaDB, MySQL); PostgreSQL: query canceled (statement_timeout),
# lock not available (lock_timeout), idle in transaction session timeout.
_BOUND_CODES = {1205, 1969, 3024}
_BOUND_STATES = {"57014", "55P03", "25P03"}
_MISSING_TABLE = ("no such table", "does not exist", "doesn't exist")
# Refused at connect: PostgreSQL (psycopg gives no SQLSTATE there) and MariaDB error codes.
_NO_DATABASE = re.compile(r'database "([^"]+)" does not exist|Unknown database \'([^\']+)\'')
_AUTH_CODES = {1044, 1045, 1698}  # access denied: to the database, for the user, by plugin
_AUTH = re.compile(
    r'role "[^"]+" does not exist|password authentication failed|no pg_hba\.conf entry'
)


def _code(exc: sa.DBAPIError) -> int | None:
    args = getattr(exc.orig, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def _refused(exc: sa.DBAPIError, where: str) -> ConfigError | None:
    """A connection the server refused for good: no such database, or not these credentials."""
    message = str(exc.orig).strip()
    missing = _NO_DATABASE.search(message)
    if missing:
        postgres, mariadb = missing.groups()
        create = f"`createdb {postgres}`" if postgres else f"`CREATE DATABASE {mariadb}`"
        return ConfigError(
            f"{where}: the database {postgres or mariadb!r} does not exist ({message}). Create"
            f" it ({create}), then run `rill-executor schema upgrade --store URL`; or fix the"
            " database name in the URL"
        )
    if _code(exc) in _AUTH_CODES or _AUTH.search(message):
        return ConfigError(
            f"{where}: the server refused these credentials ({message}). Fix the user name or"
            " password in the URL, or create that user and grant it this database"
        )
    return None


def _bound_ran_out(exc: sa.DBAPIError) -> bool:
    return _code(exc) in _BOUND_CODES or getattr(exc.orig, "sqlstate", None) in _BOUND_STATES


def is_race(exc: BaseException) -> bool:
    """A conflict with a concurrent transaction: running the operation again is safe."""
    if isinstance(exc, sa.IntegrityError):
        return True  # only inserts of a new job or attempt can collide, and a rerun re-reads
    return isinstance(exc, sa.OperationalError) and _code(exc) in _RACE_CODES


@contextmanager
def wrap_errors(where: str) -> Iterator[None]:
    try:
        yield
    except sa.TimeoutError as exc:
        raise StoreUnavailable(
            f"no free connection to {where} in time ({exc}); raise the pool size (the"
            " store URL's pool_size) or lower the concurrency",
            applied=False,
        ) from exc
    except sa.DBAPIError as exc:
        message = str(exc.orig)
        refused = _refused(exc, where)
        if refused:
            raise refused from exc
        if any(hint in message for hint in _MISSING_TABLE):
            raise SchemaMissing(
                f"{where} has no rill-executor schema ({message.strip()}); run"
                f" `rill-executor schema upgrade --store URL`"
            ) from exc
        if _bound_ran_out(exc):
            raise StoreUnavailable(
                f"{where} did not answer in time: {message.strip()}. A bound of the session"
                " ran out (a lock held by a stuck transaction, or a slow statement); the"
                " operation was not applied; retrying it is safe",
                applied=False,
            ) from exc
        if isinstance(exc, (sa.OperationalError, sa.InterfaceError)) or exc.connection_invalidated:
            raise StoreUnavailable(  # sent or not, applied or not: only a read tells
                f"{where} is unavailable: {message.strip()}. The operation may or may not"
                " have been applied; retrying it is safe"
            ) from exc
        raise StoreError(f"{where} failed: {message.strip()}") from exc
