#!/usr/bin/env python
"""Round trips of the MariaDB store, counted by the server, and their latency.

    .venv/bin/python benchmarks/bench_mariadb_trips.py [--url URL] [--n 1000] [--timed 2000]

For each operation, run through the public API (``Ledger`` / ``AsyncLedger`` over
``SqlStore`` / ``AsyncSqlStore``) one after another ``--n`` times:

* ping    -- ``store.ping()``
* status  -- ``ledger.status(committed_key)``
* replay  -- ``ledger.claim(committed_key)``, answering a ``Replay``
* claim   -- ``ledger.claim(new_key)``, answering a ``Claim``
* heartbeat, commit -- ``claim.heartbeat()``, ``claim.commit(small_result)`` of such claims

it prints what the server counted, per operation:

* session -- ``SHOW SESSION STATUS`` of the store's own pooled connections (one in each
  pool: the operations run one at a time), read while they are idle in the pool, before
  and after. Only this client's statements are in it. ``Questions`` is what the client
  sent (one per round trip; statements inside a stored procedure are not counted there).
* global  -- ``SHOW GLOBAL STATUS`` before and after, from a connection of its own. Other
  clients of the server add to it: compare it with the session figures on a quiet server.

The statements that read the counters are left out of both. Then ``--timed`` rounds of all
operations, interleaved in rotating order, give p50 and p99 of each (wall time in the
calling thread). It works in a namespace of its own and leaves its records behind (point
it at a scratch database); it installs the schema if it is missing. It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from typing import Any

import pymysql
from sqlalchemy import Engine, make_url
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import greenlet_spawn

from rill_executor import AsyncClaim, AsyncLedger, Claim, Ledger, Replay
from rill_executor_sql import AsyncSqlStore, SqlStore, upgrade_schema

DEFAULT_URL = os.environ.get("RILL_TEST_MARIADB_URL", "mysql+pymysql://root@127.0.0.1:3306/test")
RESULT = {"ok": True, "output": "s3://bucket/out/video-A/segment-1/h264-v2.mp4", "bytes": 1048576}
_SHOW = "SHOW {} STATUS WHERE Variable_name LIKE 'Com\\_%' OR Variable_name = 'Questions'"
_SHOWN = (
    "Questions",
    "Com_select",
    "Com_insert",
    "Com_update",
    "Com_commit",
    "Com_rollback",
    "Com_begin",
    "Com_call_procedure",
)

Counters = Counter[str]


def _counted(rows: Any) -> Counters:
    return Counter({str(n): int(v) for n, v in rows if str(v).isdigit()})


def _delta(before: Counters, after: Counters, own_reads: int) -> Counters:
    """``after - before`` without the ``own_reads`` statements that read the counters."""
    delta = Counter(after)
    delta.subtract(before)
    delta["Questions"] -= own_reads
    delta["Com_show_status"] -= own_reads
    return delta


class GlobalCounters:
    """``SHOW GLOBAL STATUS`` on a connection of its own."""

    def __init__(self, url: str) -> None:
        parsed = make_url(url)
        self.conn = pymysql.connect(
            host=parsed.host or "127.0.0.1",
            port=parsed.port or 3306,
            user=parsed.username or "root",
            password=parsed.password or "",
            autocommit=True,
        )

    def read(self) -> Counters:
        with self.conn.cursor() as cursor:
            cursor.execute(_SHOW.format("GLOBAL"))
            return _counted(cursor.fetchall())


def _engines(store: Any) -> list[Any]:
    """The store's engines (its pools), whatever it names them."""
    found: list[Any] = []
    for value in vars(store).values():
        if isinstance(value, (Engine, AsyncEngine)) and value not in found:
            found.append(value)
    return found


def _sync_sessions(store: SqlStore) -> Callable[[], Counters]:
    """Session counters summed over the pooled connection of each of the store's pools."""
    connections = []
    for engine in _engines(store):
        raw = engine.raw_connection()
        connections.append(raw.dbapi_connection)
        raw.close()
        assert engine.pool.checkedin() == 1, "one connection in each pool"

    def read() -> Counters:
        total: Counters = Counter()
        for dbapi in connections:
            with dbapi.cursor() as cursor:
                cursor.execute(_SHOW.format("SESSION"))
                total.update(_counted(cursor.fetchall()))
        return total

    read.reads = len(connections)  # type: ignore[attr-defined]
    return read


async def _async_sessions(store: AsyncSqlStore) -> Callable[[], Awaitable[Counters]]:
    connections = []
    for engine in _engines(store):
        raw = await engine.raw_connection()
        connections.append(raw.driver_connection)
        await greenlet_spawn(raw.close)
        assert engine.sync_engine.pool.checkedin() == 1, "one connection in each pool"

    async def read() -> Counters:
        total: Counters = Counter()
        for driver in connections:
            async with driver.cursor() as cursor:
                await cursor.execute(_SHOW.format("SESSION"))
                total.update(_counted(await cursor.fetchall()))
        return total

    read.reads = len(connections)  # type: ignore[attr-defined]
    return read


def _row(name: str, n: int, session: Counters, global_: Counters) -> str:
    def fmt(c: Counters) -> str:
        return " ".join(f"{c[k] / n:>5.2f}" for k in _SHOWN)

    return f"  {name:<10} session {fmt(session)}   global {fmt(global_)}"


def _header() -> str:
    names = " ".join(f"{k.replace('Com_', '')[:5]:>5}" for k in _SHOWN)
    return f"  {'per op':<10} session {names}   global {names}"


def _timings(name: str, samples: list[int]) -> str:
    ordered = sorted(samples)

    def pct(q: float) -> float:
        return ordered[max(0, min(len(ordered) - 1, round(q * len(ordered)) - 1))] / 1000

    return f"  {name:<10} p50 {pct(0.50):>8.0f} µs   p99 {pct(0.99):>8.0f} µs"


# -- synchronous -------------------------------------------------------------------------------


def run_sync(url: str, n: int, timed: int, tag: str) -> None:
    store = SqlStore(url)
    ledger = Ledger(store, namespace=f"trips-{tag}-sync", lease=3600)
    keys = iter(range(10**9))
    done = ledger.claim("done")
    assert isinstance(done, Claim)
    done.commit(RESULT)
    claims: deque[Claim] = deque()

    def claim() -> None:
        got = ledger.claim(f"new{next(keys)}")
        assert isinstance(got, Claim)
        claims.append(got)

    def replay() -> None:
        assert isinstance(ledger.claim("done"), Replay)

    def heartbeat() -> None:
        claims[-1].heartbeat()

    ops: dict[str, Callable[[], object]] = {
        "ping": store.ping,
        "status": lambda: ledger.status("done"),
        "replay": replay,
        "claim": claim,
        "heartbeat": heartbeat,
        "commit": lambda: claims.pop().commit(RESULT),
    }
    for op in ops.values():  # the warm-up: every pool has its one connection
        claim()
        op()
    sessions, global_ = _sync_sessions(store), GlobalCounters(url)
    print(f"\n== sync (SqlStore, pymysql): server counters per operation, {n} of each")
    print(_header())
    for name, op in {"(nothing)": lambda: None, **ops}.items():
        if name in {"heartbeat", "commit"}:
            for _ in range(n):
                claim()
        g0, s0 = global_.read(), sessions()
        for _ in range(n):
            op()
        s1, g1 = sessions(), global_.read()
        reads = sessions.reads  # type: ignore[attr-defined]
        print(_row(name, n, _delta(s0, s1, reads), _delta(g0, g1, 2 * reads + 1)))
    samples: dict[str, list[int]] = {name: [] for name in ops}
    names = list(ops)
    for i in range(timed):
        claim()
        for name in names[i % len(names) :] + names[: i % len(names)]:
            started = time.perf_counter_ns()
            ops[name]()
            samples[name].append(time.perf_counter_ns() - started)
    print(f"-- sync latency, {timed} interleaved rounds")
    for name in names:
        print(_timings(name, samples[name]))
    store.close()


# -- asyncio -----------------------------------------------------------------------------------


async def run_async(url: str, n: int, timed: int, tag: str) -> None:
    store = AsyncSqlStore(url.replace("+pymysql", "+aiomysql"))
    ledger = AsyncLedger(store, namespace=f"trips-{tag}-async", lease=3600)
    keys = iter(range(10**9))
    done = await ledger.claim("done")
    assert isinstance(done, AsyncClaim)
    await done.commit(RESULT)
    claims: deque[AsyncClaim] = deque()

    async def claim() -> None:
        got = await ledger.claim(f"new{next(keys)}")
        assert isinstance(got, AsyncClaim)
        claims.append(got)

    async def replay() -> None:
        assert isinstance(await ledger.claim("done"), Replay)

    async def heartbeat() -> None:
        await claims[-1].heartbeat()

    async def commit() -> None:
        await claims.pop().commit(RESULT)

    async def nothing() -> None:
        return None

    ops: dict[str, Callable[[], Awaitable[object]]] = {
        "ping": store.ping,
        "status": lambda: ledger.status("done"),
        "replay": replay,
        "claim": claim,
        "heartbeat": heartbeat,
        "commit": commit,
    }
    for op in ops.values():
        await claim()
        await op()
    sessions, global_ = await _async_sessions(store), GlobalCounters(url)
    print(f"\n== async (AsyncSqlStore, aiomysql): server counters per operation, {n} of each")
    print(_header())
    for name, op in {"(nothing)": nothing, **ops}.items():
        if name in {"heartbeat", "commit"}:
            for _ in range(n):
                await claim()
        g0, s0 = global_.read(), await sessions()
        for _ in range(n):
            await op()
        s1, g1 = await sessions(), global_.read()
        reads = sessions.reads  # type: ignore[attr-defined]
        print(_row(name, n, _delta(s0, s1, reads), _delta(g0, g1, 2 * reads + 1)))
    samples: dict[str, list[int]] = {name: [] for name in ops}
    names = list(ops)
    for i in range(timed):
        await claim()
        for name in names[i % len(names) :] + names[: i % len(names)]:
            started = time.perf_counter_ns()
            await ops[name]()
            samples[name].append(time.perf_counter_ns() - started)
    print(f"-- async latency, {timed} interleaved rounds")
    for name in names:
        print(_timings(name, samples[name]))
    await store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL, help="a mysql+pymysql:// URL")
    parser.add_argument("--n", type=int, default=1000, help="operations counted, of each")
    parser.add_argument("--timed", type=int, default=2000, help="timed rounds of all of them")
    args = parser.parse_args(argv)
    upgrade_schema(args.url)
    with GlobalCounters(args.url).conn.cursor() as cursor:
        cursor.execute("SELECT VERSION()")
        (version,) = cursor.fetchone()
    print(
        f"MariaDB {version}; Python {platform.python_version()}, SQLAlchemy"
        f" {__import__('sqlalchemy').__version__}, PyMySQL {pymysql.__version__};"
        f" {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
    )
    print("columns: " + ", ".join(_SHOWN) + " (Questions: statements the client sent)")
    tag = f"{int(time.time())}-{os.getpid()}"
    run_sync(args.url, args.n, args.timed, tag)
    asyncio.run(run_async(args.url, args.n, args.timed, tag))
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
