"""GC benchmark: purge a namespace of N records past retention while live claims run.

    make bench-gc                                   # N = 1,000,000 on both stores
    .venv/bin/python benchmarks/bench_gc.py [--n 1000000] [--stores redis,postgres]
        [--redis-url redis://127.0.0.1:6379/6]
        [--postgres-url postgresql+psycopg://postgres@127.0.0.1:5432/test]
        [--limit 1000] [--pause-ms 0] [--window-ms 250]

For each store, in a namespace of its own:

1. Fill it with N records past retention, written straight to the server: on Redis by
   pipelined HSETs of job hashes and histories shaped as claim.lua and finish.lua write
   them, but with no expiry; on PostgreSQL by one ``INSERT … SELECT generate_series`` of
   job rows, in a schema of the benchmark's own (``rill_bench_gc``, dropped at the end).
   Half are finished (retention passed an hour ago), half dangling (``processing``,
   the owner's lease ran out an hour ago).
2. Start another process that calls ``ledger.purge`` page by page until its cursor is None
   (``--pause-ms`` between pages throttles it).
3. Meanwhile time live claims (claim + commit of a fresh key through a ``Ledger``) in
   alternating windows of ``--window-ms``: in one the GC runs, in the next it waits (after
   the page in flight), so the machine's drift falls on both sides of the ratios.

Prints the GC rate (records/s), claim p50/p99 idle and during GC and their ratios (the
target: p99 during GC <= 2x idle), and the server's side: on Redis the INFO commandstats of
EVALSHA and SCAN during the GC (server-wide: another client of the same server counts too;
the claims' own EVALSHAs are in it), on PostgreSQL EXPLAIN (ANALYZE, BUFFERS) of one purge
page on the full table (rolled back). It asserts nothing, and deletes what it wrote.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import multiprocessing
import time
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import redis

from rill_executor import Claim, Ledger

HOUR_US = 3600 * 1_000_000
DANGLING_AFTER = 60.0  # seconds: the seeded dangling jobs' leases ran out an hour ago
FILL_BATCH = 5000
PG_SCHEMA = "rill_bench_gc"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def job_ids(namespace: str, n: int) -> Iterator[str]:
    for i in range(n):
        yield hashlib.sha256(f"{namespace}\0old-{i}".encode()).hexdigest()


# -- the GC, in a process of its own --------------------------------------------------------


def purge_all(
    url: str, namespace: str, limit: int, pause: float, ready: Any, go: Any, turn: Any, done: Any
) -> None:
    """Purge ``namespace`` page by page to the end, a page only while ``go`` is set and
    under ``turn``; put (purged, kept, pages, seconds spent in pages and pauses)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the durability warning: reported by the parent
        ledger = Ledger(url, namespace=namespace, lease=30, retention=3600)
    ready.set()
    purged = kept = pages = 0
    busy = 0.0
    cursor: str | None = None
    while True:
        go.wait()
        with turn:
            start = time.perf_counter()
            report = ledger.purge(limit=limit, after=cursor, dangling_after=DANGLING_AFTER)
            busy += time.perf_counter() - start
        purged, kept, pages = purged + report.purged, kept + report.kept_notices, pages + 1
        if (cursor := report.cursor) is None:
            break
        time.sleep(pause)
        busy += pause
    ledger.store.close()
    done.put((purged, kept, pages, busy))


def claims(ledger: Ledger, names: Iterator[str], until: float, made: list[str]) -> list[float]:
    """Microseconds per claim + commit of fresh keys, until ``time.monotonic() >= until``;
    the jobs' ids go to ``made``."""
    samples: list[float] = []
    while time.monotonic() < until:
        start = time.perf_counter_ns()
        claim = ledger.claim(next(names))
        assert isinstance(claim, Claim)
        claim.commit({"n": len(samples)})
        samples.append((time.perf_counter_ns() - start) / 1000)
        made.append(claim.job_id)
    return samples


def measure(
    url: str, namespace: str, limit: int, pause: float, window: float, made: list[str]
) -> tuple[list[float], list[float], tuple[int, int, int, float]]:
    """Claims in alternating windows while another process purges: the GC runs in one
    window and waits (after its page in flight) in the next, so that the machine's drift
    falls on both sides. (idle, during, GC result)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ledger = Ledger(url, namespace=namespace, lease=30, retention=3600)
    names = (f"live-{n}" for n in itertools.count())
    spawn = multiprocessing.get_context("spawn")
    ready, go, turn, done = spawn.Event(), spawn.Event(), spawn.Lock(), spawn.Queue()
    gc = spawn.Process(target=purge_all, args=(url, namespace, limit, pause, ready, go, turn, done))
    idle: list[float] = []
    during: list[float] = []
    try:
        claims(ledger, names, time.monotonic() + 1, made)  # warm-up
        gc.start()
        ready.wait()  # its start-up is not part of either side
        while done.empty():
            with turn:  # the GC waits: idle
                idle += claims(ledger, names, time.monotonic() + window, made)
            go.set()
            during += claims(ledger, names, time.monotonic() + window, made)
            go.clear()
        result = done.get()
        gc.join()
    finally:
        ledger.store.close()
    return idle, during, result


def report(name: str, n: int, idle: list[float], during: list[float], gc: tuple[Any, ...]) -> None:
    purged, kept, pages, seconds = gc
    p50i, p99i = percentile(idle, 0.5), percentile(idle, 0.99)
    p50g, p99g = percentile(during, 0.5), percentile(during, 0.99)
    print(f"\n{name}: GC of {n:,} records past retention")
    print(
        f"  purged {purged:,} (kept for notices {kept}) in {pages:,} pages, {seconds:.1f} s of GC"
    )
    print(f"  GC rate                    {purged / seconds:>12,.0f} records/s (while running)")
    print(f"  claim+commit idle          p50 {p50i:>8.0f} µs   p99 {p99i:>8.0f} µs  ({len(idle)})")
    print(
        f"  claim+commit during GC     p50 {p50g:>8.0f} µs   p99 {p99g:>8.0f} µs  ({len(during)})"
    )
    print(f"  p99 during GC / idle       {p99g / p99i:>8.2f}x   (target <= 2x)")
    print(f"  p50 during GC / idle       {p50g / p50i:>8.2f}x")


# -- Redis -------------------------------------------------------------------------------


def redis_fill(client: redis.Redis, namespace: str, n: int) -> None:
    """N job hashes and histories as claim.lua / finish.lua write them, without expiry."""
    seconds, micros = client.time()
    now = int(seconds) * 1_000_000 + int(micros)
    old = now - HOUR_US
    pipe = client.pipeline(transaction=False)
    for i, job_id in enumerate(job_ids(namespace, n)):
        tag = "{" + job_id + "}"
        common = {
            "ns": namespace, "key": f"old-{i}", "fence": "1", "owner": f"a{i}",
            "claimed_at": str(old - 1000), "fp": "f" * 64, "created_at": str(old - 1000),
        }  # fmt: skip
        history = {"1:id": f"a{i}", "1:start": str(old - 1000), "fence": "1"}
        if i % 2:
            job = {
                **common,
                "state": "processing",
                "lease_until": str(old),
                "updated_at": str(old - 1000),
            }
            history["1:outcome"] = "running"
        else:
            job = {
                **common, "state": "succeeded", "result": '{"n":1}', "updated_at": str(old),
                "finished_at": str(old - HOUR_US), "retain_until": str(old),
            }  # fmt: skip
            history |= {"1:outcome": "succeeded", "1:end": str(old - HOUR_US)}
        pipe.hset(f"rill:{tag}:job", mapping=job)  # type: ignore[arg-type]
        pipe.hset(f"rill:{tag}:attempts", mapping=history)  # type: ignore[arg-type]
        if i % FILL_BATCH == FILL_BATCH - 1:
            pipe.execute()
    pipe.execute()


def commandstats(client: redis.Redis) -> dict[str, tuple[int, int]]:
    stats = client.info("commandstats")
    return {
        name: (int(stats[f"cmdstat_{name}"]["calls"]), int(stats[f"cmdstat_{name}"]["usec"]))
        for name in ("evalsha", "scan")
        if f"cmdstat_{name}" in stats
    }


def redis_cleanup(client: redis.Redis, namespace: str, n: int, live: list[str]) -> None:
    pipe = client.pipeline(transaction=False)
    names = [*job_ids(namespace, n), *live]
    for i, job_id in enumerate(names):
        pipe.unlink(f"rill:{{{job_id}}}:job", f"rill:{{{job_id}}}:attempts")
        if i % FILL_BATCH == FILL_BATCH - 1:
            pipe.execute()
    pipe.execute()


def bench_redis(url: str, n: int, limit: int, pause: float, window: float) -> None:
    namespace = f"bench-gc-{uuid.uuid4().hex[:8]}"
    store_url = url + ("&" if "?" in url else "?") + "durability=ignore"
    client = redis.Redis.from_url(url)
    print(f"\nRedis {url} ({client.info('server')['redis_version']}), namespace {namespace}")
    start = time.perf_counter()
    redis_fill(client, namespace, n)
    print(f"  filled {n:,} records in {time.perf_counter() - start:.1f} s")
    made: list[str] = []
    try:
        before = commandstats(client)
        idle, during, gc = measure(store_url, namespace, limit, pause, window, made)
        after = commandstats(client)
        report("Redis", n, idle, during, gc)
        print("  server, INFO commandstats over the run (all its clients):")
        for name, (calls, usec) in after.items():
            calls0, usec0 = before.get(name, (0, 0))
            dc, du = calls - calls0, usec - usec0
            print(
                f"    {name:<8} {dc:>10,} calls {du / 1e6:>8.2f} s {du / max(dc, 1):>8.1f} µs/call"
            )
    finally:
        redis_cleanup(client, namespace, n, made)
        client.close()


# -- PostgreSQL ----------------------------------------------------------------------------


def pg_fill(conninfo: str, namespace: str, n: int) -> None:
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(
            """
            INSERT INTO rill_jobs (job_id, namespace, job_key, state, fence, owner_attempt,
                claimed_at, lease_until, fingerprint, created_at, updated_at, finished_at,
                retain_until, result, attempts)
            SELECT encode(sha256(convert_to(%(ns)s || ':' || g, 'UTF8')), 'hex'), %(ns)s,
                'old-' || g, CASE WHEN g %% 2 = 0 THEN 'succeeded' ELSE 'processing' END, 1,
                'a' || g, clock.old - 1000,
                CASE WHEN g %% 2 = 1 THEN clock.old END, repeat('f', 64), clock.old - 1000,
                clock.old,
                CASE WHEN g %% 2 = 0 THEN clock.old - 3600000000 END,
                CASE WHEN g %% 2 = 0 THEN clock.old END,
                CASE WHEN g %% 2 = 0 THEN '{"n":1}' END,
                '[]'::jsonb
            FROM generate_series(1, %(n)s) g,
                (SELECT (extract(epoch FROM now()) * 1000000)::bigint - 3600000000 AS old) clock
            """,
            {"ns": namespace, "n": n},
        )
        conn.execute("ANALYZE rill_jobs")


def pg_explain(conninfo: str, namespace: str, limit: int) -> None:
    import psycopg

    from rill_executor_sql._queries import named

    with psycopg.connect(conninfo) as conn:  # a transaction, rolled back
        rows = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS) " + named("postgres", "purge"),
            {
                "namespace": namespace,
                "after": "",
                "dangling_us": int(DANGLING_AFTER * 1_000_000),
                "limit": limit,
            },
        ).fetchall()
        conn.rollback()
    print(f"  EXPLAIN (ANALYZE, BUFFERS) of one purge page (limit {limit}, rolled back):")
    for (line,) in rows:
        print(f"    {line}")


def bench_postgres(url: str, n: int, limit: int, pause: float, window: float) -> None:
    """In a PostgreSQL schema of its own (``search_path``), dropped at the end: the tables
    of whoever else uses the database are never touched."""
    import psycopg

    namespace = f"bench-gc-{uuid.uuid4().hex[:8]}"
    base = url.replace("postgresql+psycopg://", "postgresql://", 1)
    options = ("&" if "?" in url else "?") + f"options=-csearch_path%3D{PG_SCHEMA}"
    conninfo, store_url = base + options, url + options
    print(f"\nPostgreSQL {url}, schema {PG_SCHEMA}, namespace {namespace}")
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {PG_SCHEMA}")
    try:
        from rill_executor_sql import SqlStore

        SqlStore(store_url, upgrade=True).close()  # the schema, in PG_SCHEMA
        start = time.perf_counter()
        pg_fill(conninfo, namespace, n)
        print(f"  filled {n:,} records in {time.perf_counter() - start:.1f} s")
        pg_explain(conninfo, namespace, limit)
        idle, during, gc = measure(store_url, namespace, limit, pause, window, [])
        report("PostgreSQL", n, idle, during, gc)
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {PG_SCHEMA} CASCADE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="records to purge")
    parser.add_argument("--stores", default="redis,postgres")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/6")
    parser.add_argument(
        "--postgres-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test"
    )
    parser.add_argument("--limit", type=int, default=1000, help="records per purge page")
    parser.add_argument(
        "--pause-ms", type=float, default=0.0, help="the GC's pause between pages (throttle)"
    )
    parser.add_argument(
        "--window-ms", type=float, default=250.0, help="length of each idle and GC window"
    )
    args = parser.parse_args()
    pause = args.pause_ms / 1000
    print(
        f"GC benchmark: {args.n:,} records, purge pages of {args.limit},"
        f" {args.pause_ms:g} ms pause between pages"
    )
    for store in args.stores.split(","):
        if store == "redis":
            bench_redis(args.redis_url, args.n, args.limit, pause, args.window_ms / 1000)
        elif store == "postgres":
            bench_postgres(args.postgres_url, args.n, args.limit, pause, args.window_ms / 1000)
        else:
            parser.error(f"unknown store {store!r}: use redis, postgres or both")


if __name__ == "__main__":
    main()
