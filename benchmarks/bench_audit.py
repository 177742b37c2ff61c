"""Audit benchmark: the drill report (``rill-executor audit``) of a namespace of N records.

    make bench-audit                                # N = 1,000,000 on both stores
    .venv/bin/python benchmarks/bench_audit.py [--n 1000000] [--stores redis,postgres]
        [--paths paged,per-job] [--page 1000]
        [--redis-url redis://127.0.0.1:6379/6]
        [--postgres-url postgresql+psycopg://postgres@127.0.0.1:5432/test]

For each store, in a namespace of its own filled as ``bench_gc`` fills it (half finished
jobs, half dangling ones; on PostgreSQL in a schema of the benchmark's own,
``rill_bench_audit``, dropped at the end), time ``ledger.drill`` and count its store reads
(calls of the store port, through a counting proxy around the real store) on two paths:

- ``paged``: a page of whole jobs a read (``list_statuses``), ``--page`` jobs a page;
- ``per-job``: the store without ``list_statuses``, read as ``audit`` read every namespace
  before it: a listing page of 200 jobs, then one ``status`` a job.

On Redis it also prints the server's ``INFO commandstats`` calls of EVALSHA and SCAN over
each run. It asserts that both paths report the same, and deletes what it wrote.
"""

from __future__ import annotations

import argparse
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import redis
from bench_gc import pg_fill, redis_cleanup, redis_fill

from rill_executor import Ledger
from rill_executor._registry import open_store
from rill_executor.reports import DrillReport

PG_SCHEMA = "rill_bench_audit"
# bench_gc's PostgreSQL rows have ids of its own; the ledger's are sha256(namespace NUL key).
REKEY = """
    UPDATE rill_jobs SET job_id = encode(sha256(
        convert_to(namespace, 'UTF8') || '\\x00'::bytea || convert_to(job_key, 'UTF8')), 'hex')
    WHERE namespace = %(ns)s
"""
PER_JOB_PAGE = 200  # the listing page audit read before it read whole pages


class Counting:
    """The store, its calls counted; ``hide`` leaves ``list_statuses`` out."""

    def __init__(self, store: Any, hide: bool) -> None:
        self.store, self.hide, self.calls = store, hide, Counter[str]()

    def __getattr__(self, name: str) -> Any:
        if self.hide and name == "list_statuses":
            raise AttributeError(name)
        target = getattr(self.store, name)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return target(*args, **kwargs)

        return call


def run(url: str, namespace: str, path: str, page: int) -> tuple[DrillReport, float, Counter[str]]:
    store = Counting(open_store(url), hide=path == "per-job")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the durability warning
        ledger = Ledger(store, namespace=namespace, lease=30, retention=3600)
    store.calls.clear()
    start = time.perf_counter()
    report = ledger.drill(page=PER_JOB_PAGE if path == "per-job" else page)
    seconds = time.perf_counter() - start
    calls = +store.calls
    ledger.close()
    return report, seconds, calls


def measure(
    name: str, url: str, namespace: str, paths: list[str], page: int, server: Callable[[], Any]
) -> None:
    reports: dict[str, DrillReport] = {}
    for path in paths:
        before = server()
        report, seconds, calls = run(url, namespace, path, page)
        after = server()
        reads = sum(calls.values())
        detail = ", ".join(f"{n:,} {call}" for call, n in sorted(calls.items()))
        print(
            f"  {name} {path:<8} {report.jobs:>10,} jobs  {seconds:>8.1f} s"
            f"  {report.jobs / seconds:>9,.0f} jobs/s  {reads:>10,} store reads ({detail})"
        )
        if after:
            print(
                "           server: "
                + ", ".join(f"{after[k] - before.get(k, 0):,} {k}" for k in after)
            )
        reports[path] = report
    # ``dangling`` names the first 100 in listing order: a Redis SCAN may order two runs
    # differently while its table is resized; its count is compared.
    dumps = {
        path: repr(r.model_dump(exclude={"store_time", "dangling"})) for path, r in reports.items()
    }
    assert len(set(dumps.values())) == 1, "the paths report differently"


def redis_calls(client: redis.Redis) -> Callable[[], dict[str, int]]:
    def calls() -> dict[str, int]:
        stats = client.info("commandstats")
        return {n: int(stats.get(f"cmdstat_{n}", {}).get("calls", 0)) for n in ("evalsha", "scan")}

    return calls


def bench_redis(url: str, n: int, paths: list[str], page: int) -> None:
    namespace = f"bench-audit-{uuid.uuid4().hex[:8]}"
    store_url = url + ("&" if "?" in url else "?") + "durability=ignore"
    client = redis.Redis.from_url(url)
    print(f"\nRedis {url} ({client.info('server')['redis_version']}), namespace {namespace}")
    start = time.perf_counter()
    redis_fill(client, namespace, n)
    print(f"  filled {n:,} records in {time.perf_counter() - start:.1f} s")
    try:
        measure("Redis", store_url, namespace, paths, page, redis_calls(client))
    finally:
        redis_cleanup(client, namespace, n, [])
        client.close()


def bench_postgres(url: str, n: int, paths: list[str], page: int) -> None:
    """In a PostgreSQL schema of its own, dropped at the end (as ``bench_gc``)."""
    import psycopg

    from rill_executor_sql import SqlStore

    namespace = f"bench-audit-{uuid.uuid4().hex[:8]}"
    base = url.replace("postgresql+psycopg://", "postgresql://", 1)
    options = ("&" if "?" in url else "?") + f"options=-csearch_path%3D{PG_SCHEMA}"
    conninfo, store_url = base + options, url + options
    print(f"\nPostgreSQL {url}, schema {PG_SCHEMA}, namespace {namespace}")
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {PG_SCHEMA}")
    try:
        SqlStore(store_url, upgrade=True).close()
        start = time.perf_counter()
        pg_fill(conninfo, namespace, n)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(REKEY, {"ns": namespace})  # ids by key, as the ledger finds them
        print(f"  filled {n:,} records in {time.perf_counter() - start:.1f} s")
        measure("PostgreSQL", store_url, namespace, paths, page, dict)
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {PG_SCHEMA} CASCADE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="records to audit")
    parser.add_argument("--stores", default="redis,postgres")
    parser.add_argument("--paths", default="paged,per-job", help="paged, per-job or both")
    parser.add_argument("--page", type=int, default=1000, help="jobs per page (paged)")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/6")
    parser.add_argument(
        "--postgres-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test"
    )
    args = parser.parse_args()
    paths = args.paths.split(",")
    if unknown := set(paths) - {"paged", "per-job"}:
        parser.error(f"unknown path(s) {sorted(unknown)}: use paged, per-job or both")
    print(f"Audit benchmark: {args.n:,} records, paths {', '.join(paths)}")
    for store in args.stores.split(","):
        if store == "redis":
            bench_redis(args.redis_url, args.n, paths, args.page)
        elif store == "postgres":
            bench_postgres(args.postgres_url, args.n, paths, args.page)
        else:
            parser.error(f"unknown store {store!r}: use redis, postgres or both")


if __name__ == "__main__":
    main()
