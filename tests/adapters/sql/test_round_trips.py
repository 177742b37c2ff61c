"""MariaDB's round trips, counted by the server, and the freshness of its autocommitted reads.

The counters are the server's own (``SHOW SESSION STATUS``) of the store's pooled
connections, one in each of its two pools (the operations run one at a time), read while
they sit idle in the pool: only the store's statements are in them, not another client's.
``Questions`` counts the statements a client sent, one a round trip.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy.util import greenlet_spawn

from rill_executor import (
    AsyncClaim,
    AsyncLedger,
    Claim,
    InProgress,
    Ledger,
    Replay,
    fingerprint_of,
)
from rill_executor.store import JobState
from rill_executor_sql import AsyncSqlStore, SqlStore
from tests.clocks import STORE_CLOCK

_SHOW = "SHOW SESSION STATUS WHERE Variable_name LIKE 'Com\\_%' OR Variable_name = 'Questions'"
_REPS = 10
OTHER = fingerprint_of({"another": "request"})
# Per operation. A claim that writes nothing reads the job without a lock and answers; a
# first claim inserts its job after that read; neither needs a transaction to end.
ONE_READ = {"Questions": 1, "Com_select": 1}
EXPECTED = {
    "ping": ONE_READ,
    "status": ONE_READ,
    "replay": ONE_READ,
    "in progress": ONE_READ,
    "conflict": ONE_READ,
    "first claim": {"Questions": 2, "Com_select": 1, "Com_insert": 1},
    # that read, then the short transaction that decides again on the locked row
    "takeover": {"Questions": 4, "Com_select": 2, "Com_update": 1, "Com_commit": 1},
}

Counters = Counter[str]


def _counted(rows: Any) -> Counters:
    return Counter({str(name): int(v) for name, v in rows if str(v).isdigit()})


def _per_operation(before: Counters, after: Counters, reads: int) -> dict[str, float]:
    """What ``_REPS`` operations added, per operation, without the ``reads`` SHOWs."""
    after = Counter(after)
    after.subtract(before)
    after["Questions"] -= reads  # each SHOW that read ``after`` counted itself
    return {name: n / _REPS for name, n in after.items() if n and name != "Com_show_status"}


def _sync_counters(store: SqlStore) -> Callable[[], Counters]:
    connections: list[Any] = []
    engines: tuple[Any, ...] = (store.engine, store._autocommit)
    for engine in engines:
        raw = engine.raw_connection()
        connections.append(raw.dbapi_connection)
        raw.close()
        assert engine.pool.checkedin() == 1  # every operation goes through this connection

    def read() -> Counters:
        total: Counters = Counter()
        for dbapi in connections:
            cursor = dbapi.cursor()
            cursor.execute(_SHOW)
            total.update(_counted(cursor.fetchall()))
            cursor.close()
        return total

    return read


async def _async_counters(store: AsyncSqlStore) -> Callable[[], Awaitable[Counters]]:
    connections: list[Any] = []
    engines: tuple[Any, ...] = (store.engine, store._autocommit)
    for engine in engines:
        raw = await engine.raw_connection()
        connections.append(raw.driver_connection)
        await greenlet_spawn(raw.close)
        assert engine.sync_engine.pool.checkedin() == 1

    async def read() -> Counters:
        total: Counters = Counter()
        for driver in connections:
            async with driver.cursor() as cursor:
                await cursor.execute(_SHOW)
                total.update(_counted(await cursor.fetchall()))
        return total

    return read


def _namespace() -> str:
    return f"rt{uuid.uuid4().hex[:8]}"


@pytest.mark.real_clock(STORE_CLOCK)
def test_mariadb_status_and_claims_that_write_nothing_are_one_round_trip(
    mariadb_url: str,
) -> None:
    store = SqlStore(mariadb_url)
    ledger = Ledger(store, namespace=_namespace(), lease=600)
    done, running = ledger.claim("done"), ledger.claim("running")
    assert isinstance(done, Claim) and isinstance(running, Claim)
    done.commit(1)
    for n in range(_REPS):  # their leases run out while the others are counted
        assert isinstance(ledger.claim(f"old{n}", lease=0.05), Claim)
    keys, olds = iter(range(_REPS)), iter(range(_REPS))
    operations: dict[str, Callable[[], object]] = {
        "ping": store.ping,
        "status": lambda: ledger.status("done"),
        "replay": lambda: ledger.claim("done"),
        "in progress": lambda: ledger.claim("running"),
        "conflict": lambda: ledger.claim("done", fingerprint=OTHER),
        "first claim": lambda: ledger.claim(f"new{next(keys)}"),
        "takeover": lambda: ledger.claim(f"old{next(olds)}"),
    }
    assert isinstance(operations["replay"](), Replay)
    assert isinstance(operations["in progress"](), InProgress)
    time.sleep(0.1)
    counters = _sync_counters(store)
    seen = {}
    for name, run in operations.items():
        before = counters()
        for _ in range(_REPS):
            run()
        seen[name] = _per_operation(before, counters(), reads=2)
    store.close()
    assert seen == EXPECTED


@pytest.mark.real_clock(STORE_CLOCK)
def test_mariadb_async_status_and_claims_that_write_nothing_are_one_round_trip(
    mariadb_url: str,
) -> None:
    async def main() -> dict[str, dict[str, float]]:
        store = AsyncSqlStore(mariadb_url.replace("+pymysql", "+aiomysql"))
        ledger = AsyncLedger(store, namespace=_namespace(), lease=600)
        done, running = await ledger.claim("done"), await ledger.claim("running")
        assert isinstance(done, AsyncClaim) and isinstance(running, AsyncClaim)
        await done.commit(1)
        for n in range(_REPS):
            assert isinstance(await ledger.claim(f"old{n}", lease=0.05), AsyncClaim)
        keys, olds = iter(range(_REPS)), iter(range(_REPS))
        operations: dict[str, Callable[[], Awaitable[object]]] = {
            "ping": store.ping,
            "status": lambda: ledger.status("done"),
            "replay": lambda: ledger.claim("done"),
            "in progress": lambda: ledger.claim("running"),
            "conflict": lambda: ledger.claim("done", fingerprint=OTHER),
            "first claim": lambda: ledger.claim(f"new{next(keys)}"),
            "takeover": lambda: ledger.claim(f"old{next(olds)}"),
        }
        assert isinstance(await operations["replay"](), Replay)
        await asyncio.sleep(0.1)
        counters = await _async_counters(store)
        seen = {}
        for name, run in operations.items():
            before = await counters()
            for _ in range(_REPS):
                await run()
            seen[name] = _per_operation(before, await counters(), reads=2)
        await store.close()
        return seen

    assert asyncio.run(main()) == EXPECTED


def test_mariadb_reads_outside_a_transaction_see_the_newest_commit(mariadb_url: str) -> None:
    """The server's default isolation is REPEATABLE READ: a pooled connection that kept its
    transaction open would answer every later read from its first snapshot. Status reads and
    claims on the autocommit pool's one connection see what other connections committed
    since, and a first claim's job, inserted there, is committed for the others to see."""
    store, other = SqlStore(mariadb_url), SqlStore(mariadb_url)
    namespace = _namespace()
    ledger, elsewhere = Ledger(store, namespace=namespace), Ledger(other, namespace=namespace)
    theirs = elsewhere.claim("k")
    assert isinstance(theirs, Claim)
    status = ledger.status("k")
    assert status is not None and status.state is JobState.PROCESSING
    assert isinstance(ledger.claim("k"), InProgress)
    assert ledger.status("later") is None
    theirs.commit(1)
    later = elsewhere.claim("later")
    assert isinstance(later, Claim)
    status = ledger.status("k")
    assert status is not None and status.state is JobState.SUCCEEDED
    replay = ledger.claim("k")
    assert isinstance(replay, Replay) and replay.result() == 1
    status = ledger.status("later")
    assert status is not None and status.state is JobState.PROCESSING
    mine = ledger.claim("mine")  # inserted on the autocommit pool's connection
    assert isinstance(mine, Claim)
    assert isinstance(elsewhere.claim("mine"), InProgress)
    mine.commit(2)  # through the writers' pool: another connection
    replay = elsewhere.claim("mine")
    assert isinstance(replay, Replay) and replay.result() == 2
    status = ledger.status("mine")
    assert status is not None and status.state is JobState.SUCCEEDED
    pool: Any = store._autocommit.pool
    assert pool.checkedin() == 1  # all of those reads on one pooled connection
    store.close()
    other.close()
