"""A server store's connection pools keep what they open (docs/stores.md, "Connections"): a
burst of operations wider than the pool used to open connections that were closed again as
they came back, so every few operations under load opened a new one."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import QueuePool

from rill_executor_sql import AsyncSqlStore, SqlStore
from rill_executor_sql._dialect import POOL_SIZE

from .test_bounds import _with

BURST = 12  # wider than the pool SQLAlchemy's overflow kept before (8)


@pytest.fixture(params=["postgres", "mariadb"])
def server_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_url"))


def _pools(store: SqlStore | AsyncSqlStore) -> list[Engine]:
    """Every pool of the store: the writers', and MariaDB's autocommit readers'."""
    engines: list[Any] = [store.engine, store._autocommit]
    return [e.sync_engine if isinstance(e, AsyncEngine) else e for e in {*engines}]


def _idle(engine: Engine) -> int:
    """Connections open in the pool, none checked out."""
    pool = engine.pool
    assert isinstance(pool, QueuePool)
    return pool.checkedin()


def _burst(engine: Engine) -> set[int]:
    """Hold ``BURST`` connections at once, then return them; the DBAPI connections used."""
    held = [engine.connect() for _ in range(BURST)]
    used = {id(c.connection.dbapi_connection) for c in held}
    for conn in held:
        conn.close()
    return used


def test_a_burst_wider_than_the_pool_keeps_its_connections(server_url: str) -> None:
    store = SqlStore(server_url)
    try:
        for engine in _pools(store):
            first = _burst(engine)
            assert len(first) == BURST
            assert _idle(engine) == BURST  # none closed as it came back
            assert _burst(engine) == first  # the next burst opens none
    finally:
        store.close()


def test_an_async_store_keeps_its_connections_after_a_burst(server_url: str) -> None:
    async def burst(engine: AsyncEngine) -> set[int]:
        held = [await engine.connect() for _ in range(BURST)]
        used = {id((await c.get_raw_connection()).dbapi_connection) for c in held}
        for conn in held:
            await conn.close()
        return used

    async def main() -> None:
        store = AsyncSqlStore(server_url.replace("+pymysql", "+aiomysql"))
        try:
            for engine in {store.engine, store._autocommit}:
                first = await burst(engine)
                assert _idle(engine.sync_engine) == BURST
                assert await burst(engine) == first
        finally:
            await store.close()

    asyncio.run(main())


def test_the_url_sets_the_pool_size_and_an_operation_waits_beyond_it(server_url: str) -> None:
    store = SqlStore(_with(server_url, "pool_size=3"))
    try:
        engine = store.engine
        assert POOL_SIZE != 3
        held = [engine.connect() for _ in range(3)]
        used = {id(c.connection.dbapi_connection) for c in held}
        got: list[int] = []

        def fourth() -> None:
            with engine.connect() as conn:
                got.append(id(conn.connection.dbapi_connection))

        waiter = threading.Thread(target=fourth)
        waiter.start()
        waiter.join(0.5)
        assert not got  # no fourth connection opened: it waits for one of the three
        held.pop().close()
        waiter.join(30)
        assert got and got[0] in used
        for conn in held:
            conn.close()
        assert _idle(engine) == 3
    finally:
        store.close()
