"""Every wait of the SQL store ends: the bounds each session gets (read back from the server),
the URL options that change them, and a lock held by another session answered in time as
``StoreUnavailable`` (docs/stores.md, "Every wait ends")."""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from rill_executor import AsyncLedger, ConfigError, StoreUnavailable
from rill_executor._config import LEASE_OVER_WAIT
from rill_executor._keys import job_id
from rill_executor.rillflow import RillFlowExecutor
from rill_executor.testing import LedgerDriver
from rill_executor_sql import AsyncSqlStore, SqlStore
from rill_executor_sql._bounds import set_on_connect
from rill_executor_sql._dialect import dialect_of, make_sync_engine

from ..faults.waits import ends_within

_READ_BACK = {
    "postgres": (
        "SELECT current_setting('statement_timeout'), current_setting('lock_timeout'),"
        " current_setting('idle_in_transaction_session_timeout')"
    ),
    "mariadb": (
        "SELECT CAST(@@max_statement_time AS CHAR), CAST(@@innodb_lock_wait_timeout AS CHAR),"
        " CAST(@@idle_transaction_timeout AS CHAR)"
    ),
}
_DEFAULTS = {"postgres": ("4s", "4s", "4s"), "mariadb": ("4.000000", "4", "4")}
_CHANGED = "statement_timeout=1.5&lock_timeout=2&idle_in_transaction_timeout=3"
_AS_CHANGED = {"postgres": ("1500ms", "2s", "3s"), "mariadb": ("1.500000", "2", "3")}


def _with(url: str, options: str) -> str:
    return url + ("&" if "?" in url else "?") + options if options else url


def _read_sync(engine: Engine, server: str) -> tuple[str, ...]:
    with engine.connect() as conn:
        return tuple(conn.execute(text(_READ_BACK[server])).one())


async def _read_async(store: AsyncSqlStore, server: str) -> list[tuple[str, ...]]:
    try:
        seen = []
        for engine in {store.engine, store._autocommit}:
            async with engine.connect() as conn:
                seen.append(tuple((await conn.execute(text(_READ_BACK[server]))).one()))
        return seen
    finally:
        await store.close()


@pytest.mark.parametrize("server", ["postgres", "mariadb"])
@pytest.mark.parametrize(("options", "expected"), [("", _DEFAULTS), (_CHANGED, _AS_CHANGED)])
def test_each_session_gets_the_bounds_of_the_url_or_the_defaults(
    request: pytest.FixtureRequest, server: str, options: str, expected: dict[str, Any]
) -> None:
    url = _with(request.getfixturevalue(f"{server}_url"), options)
    store = SqlStore(url)
    try:
        for engine in {store.engine, store._autocommit}:  # MariaDB: an autocommit engine too
            assert _read_sync(engine, server) == expected[server]
    finally:
        store.close()
    async_url = url.replace("+pymysql", "+aiomysql")
    assert asyncio.run(_read_async(AsyncSqlStore(async_url), server)) == [expected[server]] * (
        2 if server == "mariadb" else 1
    )


@pytest.mark.parametrize("server", ["postgres", "mariadb"])
def test_schema_upgrades_run_without_statement_bounds(
    request: pytest.FixtureRequest, server: str
) -> None:
    """A migration may rewrite a large table: its connection keeps the server's settings."""
    dialect, parsed = dialect_of(request.getfixturevalue(f"{server}_url"))
    engine = make_sync_engine(dialect, parsed, migrations=True)
    try:
        statement, _, idle = _read_sync(engine, server)
        assert (statement, idle) == (("0", "0") if server == "postgres" else ("0.000000", "0"))
    finally:
        engine.dispose()


@pytest.mark.parametrize("driver", ["pymysql", "aiomysql"])
def test_a_server_without_mariadbs_variables_gets_the_lock_bound_alone(
    mariadb_url: str, driver: str
) -> None:
    """MySQL has neither max_statement_time nor idle_transaction_timeout: the SET naming
    them is refused as unknown (1193), and the lock wait is still bounded."""
    if driver == "pymysql":
        engine: Any = create_engine(mariadb_url, poolclass=NullPool)
    else:
        engine = create_async_engine(
            mariadb_url.replace("+pymysql", "+aiomysql"), poolclass=NullPool
        )
    event.listen(
        getattr(engine, "sync_engine", engine),
        "connect",
        set_on_connect("SET SESSION no_such_variable=1", "SET SESSION innodb_lock_wait_timeout=7"),
    )

    async def read_async() -> Any:
        try:
            async with engine.connect() as conn:
                return (await conn.exec_driver_sql("SELECT @@innodb_lock_wait_timeout")).scalar()
        finally:
            await engine.dispose()

    if driver == "aiomysql":
        assert asyncio.run(read_async()) == 7
        return
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT @@innodb_lock_wait_timeout").scalar() == 7
    engine.dispose()


@pytest.mark.parametrize(("options", "busy_ms"), [("", 5000), ("busy_timeout=0.25", 250)])
def test_sqlite_waits_for_its_write_lock_a_bounded_time(
    sqlite_url: str, options: str, busy_ms: int
) -> None:
    store = SqlStore(_with(sqlite_url, options))
    try:
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == busy_ms
    finally:
        store.close()


@pytest.mark.parametrize(
    ("server", "options", "message"),
    [
        ("postgres", "statement_timeout=0", "statement_timeout='0' must be a number of seconds"),
        ("mariadb", "read_timeout=soon", "read_timeout='soon' must be a number of seconds"),
        ("postgres", "busy_timeout=1", "busy_timeout does not apply to postgresql"),
        ("sqlite", "lock_timeout=1", "lock_timeout does not apply to sqlite"),
        ("postgres", "pool_size=0", "pool_size='0' must be a whole number of connections"),
        ("mariadb", "pool_size=many", "pool_size='many' must be a whole number"),
        ("postgres", "pool_size=%C2%B2", "pool_size='²' must be a whole number"),
        ("sqlite", "pool_size=4", "pool_size does not apply to sqlite"),
    ],
)
def test_a_bad_bound_in_the_url_is_a_config_error(
    request: pytest.FixtureRequest, server: str, options: str, message: str
) -> None:
    url = _with(request.getfixturevalue(f"{server}_url"), options)
    with pytest.raises(ConfigError, match=message):
        SqlStore(url)
    with pytest.raises(ConfigError, match=message):
        AsyncSqlStore(url.replace("+pymysql", "+aiomysql"))


# -- the bounds against the leases they serve --------------------------------------------------

_SHORT = (
    "connect_timeout=1&statement_timeout=0.5&lock_timeout=0.5&idle_in_transaction_timeout=1"
    "&read_timeout=1"
)


def _store_url(request: pytest.FixtureRequest, server: str, tmp_path: Path) -> str:
    if server == "sqlite":
        return f"sqlite:///{tmp_path / 'jobs.db'}"
    return str(request.getfixturevalue(f"{server}_url"))


def _async(url: str) -> str:
    return url.replace("+pymysql", "+aiomysql")


@pytest.mark.parametrize("server", ["postgres", "mariadb", "sqlite"])
def test_every_default_bound_is_well_under_the_executors_default_lease(
    request: pytest.FixtureRequest, server: str, tmp_path: Path
) -> None:
    """A statement stuck until its bound runs out must not outlive the lease it serves: the
    default bounds are at most half the Rill Flow executor's default lease (10 s)."""
    url = _store_url(request, server, tmp_path)
    default = inspect.signature(RillFlowExecutor).parameters["lease"].default
    store = SqlStore(url, upgrade=server == "sqlite")
    try:
        assert store.longest_wait is not None
        assert store.longest_wait * LEASE_OVER_WAIT <= default.total_seconds()
    finally:
        store.close()
    ledger = AsyncLedger(_async(url), namespace="bounds", lease=30)
    assert RillFlowExecutor(ledger).lease == default  # built: its lease is long enough


@pytest.mark.parametrize("server", ["postgres", "mariadb", "sqlite"])
def test_an_executor_lease_not_well_above_the_stores_bounds_is_refused_at_construction(
    request: pytest.FixtureRequest, server: str, tmp_path: Path
) -> None:
    url = _async(_store_url(request, server, tmp_path))
    SqlStore(url.replace("+aiomysql", "+pymysql"), upgrade=True).close()
    ledger = AsyncLedger(url, namespace="bounds", lease=30)
    too_short = (
        r"the RillFlowExecutor lease \(9 s\) must be at least 2 times the store's longest"
        r" wait \(5 s\)"
    )
    with pytest.raises(ConfigError, match=too_short):
        RillFlowExecutor(ledger, lease=9)
    longer = "busy_timeout=20" if server == "sqlite" else "read_timeout=20"
    slow = AsyncLedger(_with(url, longer), namespace="bounds", lease=60)
    with pytest.raises(ConfigError, match=r"\(30 s\) .* longest wait \(20 s\)"):
        RillFlowExecutor(slow, lease=30)
    fitted = AsyncLedger(
        _with(url, "busy_timeout=1" if server == "sqlite" else _SHORT), namespace="bounds"
    )
    assert RillFlowExecutor(fitted, lease=2).lease.total_seconds() == 2  # bounds that fit


# -- a lock held by another session ----------------------------------------------------------

_HOLD = "SELECT job_id FROM rill_jobs WHERE job_id = :job FOR UPDATE"


@pytest.fixture(params=["postgres", "mariadb"])
def server_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_url"))


@pytest.fixture
def holder(server_url: str) -> Iterator[Engine]:
    """A session of its own, with the server's default bounds: the one holding the lock."""
    engine = create_engine(server_url)
    yield engine
    engine.dispose()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_row_locked_by_another_session_is_store_unavailable_in_bounded_time(
    server_url: str, holder: Engine, mode: str
) -> None:
    """Before the bounds: PostgreSQL waited on the lock for ever; MariaDB was refused after
    50 s (innodb_lock_wait_timeout) and sent the call again, twenty times."""
    namespace = f"t{uuid.uuid4().hex[:16]}"
    driver = LedgerDriver(_with(server_url, "lock_timeout=1"), mode)
    try:
        ledger = driver.ledger(namespace)
        claim = ledger.claim("k")
        with holder.connect() as conn, conn.begin():
            conn.execute(text(_HOLD), {"job": job_id(namespace, "k")}).all()
            started = time.monotonic()
            ended, outcome = ends_within(20, claim.heartbeat)
            waited = time.monotonic() - started
        assert ended, "the heartbeat still waits on the lock after 20 s"
        assert isinstance(outcome, StoreUnavailable), repr(outcome)
        assert "did not answer in time" in str(outcome) and waited < 10, (waited, outcome)
        claim.commit("done")  # the lock is gone: the claim writes again
    finally:
        driver.close()
