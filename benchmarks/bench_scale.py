#!/usr/bin/env python
"""Scale: claim, replay and status p50/p99 with 10 thousand to 10 million jobs stored.

    make bench-scale                                # SCALE_ARGS to change the defaults
    .venv/bin/python benchmarks/bench_scale.py [--sizes 10000,1000000,10000000]
        [--stores postgres,redis] [--n 2000] [--place same|apart]
        [--postgres-url postgresql+psycopg://postgres@127.0.0.1:5432/test]

For each store, one namespace grows to each size in turn, filled in bulk straight on the
server with finished jobs shaped as a commit writes them (a result, a one-attempt history),
their ids the ledger's own (SHA-256 of namespace and key), so the ledger finds them:

- PostgreSQL: a database of the benchmark's own (``rill_bench_scale``, created on the
  server of ``--postgres-url`` and dropped at the end), one ``INSERT … SELECT
  generate_series`` per million rows, then ``VACUUM ANALYZE``, then ``CHECKPOINT`` and
  ``sync``: the fill's writes done before the timing.
- Redis: a server of the benchmark's own, started on a free port without persistence
  (``redis-server`` on the PATH) and stopped at the end; a script writes each job's record
  and history, with the retention's expiry, as finish.lua leaves them, 5,000 jobs a call.

At each size it times, through a ``Ledger``, in interleaved rounds: a claim of a new key
(then committed, untimed), a replay (a claim of a stored key, drawn at random over the whole
namespace) and a status of a stored key (drawn the same way). Then it reports p50/p99 per
operation and size, the ratios of the largest size's p50 and p99 to the smallest's (the
target: within 1.2), the table and index sizes on PostgreSQL, and on Redis the bytes per job
(``MEMORY USAGE`` of a sample of jobs' two keys, and ``used_memory`` over the job count)
with what a 7-day retention of 100 jobs/s would hold. At each size it also says how often
the server process that served the ledger stood on the benchmark's core (sampled once a
round): a round trip to the other core waits for it to wake, and unpinned the scheduler
may choose differently at each size; ``--place`` pins both sides for the timed phases as
``bench_sql.py --place`` does. It asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import redis
from _placement import PLACES, Sides, placed, postgres_server
from sqlalchemy.engine import make_url

from rill_executor import Claim, Ledger, Replay

NAMESPACE = "scale"
RESULT = '{"uri":"s3://media/v/1.mp4","frames":240}'
FINGERPRINT = "f" * 64
WEEK_US = 7 * 24 * 3600 * 1_000_000
CHUNK = 1_000_000  # rows per INSERT on PostgreSQL
BATCH = 5_000  # jobs per fill script call on Redis


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def key_of(i: int) -> str:
    return f"video-{i // 100}:{i % 100}:h264-v2"


# -- the measure, the same on every store ---------------------------------------------------


@dataclass(frozen=True)
class Server:
    """The local server's processes: every one (to pin; its main one first) and the ones
    serving the ledger's connection (to see where they stand)."""

    processes: Callable[[], list[int]]
    serving: Callable[[], list[int]]


def measure(
    ledger: Ledger, stored: int, n: int, rng: random.Random, sides: Sides
) -> dict[str, list[float]]:
    """``n`` of each operation, interleaved in rounds of 50 (order rotating each round);
    where the server's process stands sampled after each round."""
    times: dict[str, list[float]] = {"claim": [], "replay": [], "status": []}
    run = uuid.uuid4().hex[:8]
    fresh = (f"new-{run}-{i}" for i in itertools.count())

    def claim() -> None:
        key = next(fresh)
        start = time.perf_counter()
        claimed = ledger.claim(key)
        times["claim"].append(time.perf_counter() - start)
        assert isinstance(claimed, Claim)
        claimed.commit({"n": 1})

    def replay() -> None:
        key = key_of(rng.randrange(stored))
        start = time.perf_counter()
        answer = ledger.claim(key, fingerprint=FINGERPRINT)
        times["replay"].append(time.perf_counter() - start)
        assert isinstance(answer, Replay), f"{key}: {answer!r}"

    def status() -> None:
        key = key_of(rng.randrange(stored))
        start = time.perf_counter()
        found = ledger.status(key)
        times["status"].append(time.perf_counter() - start)
        assert found is not None, f"{key} was not stored"

    ops: list[Callable[[], None]] = [claim, replay, status]
    for _ in range(100):  # warm-up
        for op in ops:
            op()
    for values in times.values():
        values.clear()
    for round_ in range(max(1, n // 50)):
        order = ops[round_ % 3 :] + ops[: round_ % 3]
        for op in order:
            for _ in range(50):
                op()
            sides.sample()
    return times


def report(store: str, rows: list[tuple[int, dict[str, list[float]]]]) -> None:
    print(f"\n{store}: µs, p50 / p99")
    print(f"| jobs stored | {' | '.join(f'{op} p50 / p99' for op in rows[0][1])} |")
    print("|---:|" + "---:|" * len(rows[0][1]))
    for size, times in rows:
        cells = [
            f"{percentile(v, 0.5) * 1e6:.0f} / {percentile(v, 0.99) * 1e6:.0f}"
            for v in times.values()
        ]
        print(f"| {size:,} | {' | '.join(cells)} |")
    if len(rows) > 1:
        first, last = rows[0][1], rows[-1][1]
        for q, name in ((0.5, "p50"), (0.99, "p99")):
            ratios = {op: percentile(last[op], q) / percentile(first[op], q) for op in first}
            flat = ", ".join(f"{op} {r:.2f}" for op, r in ratios.items())
            sizes = f"{name} at {rows[-1][0]:,} over {name} at {rows[0][0]:,}"
            print(f"{sizes} (target <= 1.2): {flat}")


def grow(
    store: str,
    url: str,
    sizes: list[int],
    n: int,
    fill: Callable[[int, int], None],
    sizes_of: Callable[[int, random.Random], str],
    server: Server,
    place: str | None,
) -> None:
    """Fill the namespace to each size in turn (``fill(start, stop)``), measure at each."""
    rows = []
    stored = 0
    rng = random.Random(1)
    for size in sizes:
        began = time.perf_counter()
        fill(stored, size)
        print(f"{store}: filled to {size:,} in {time.perf_counter() - began:,.1f} s")
        stored = size
        sides = Sides(server.serving)
        with placed(place, server.processes) as where, Ledger(url, namespace=NAMESPACE) as ledger:
            rows.append((size, measure(ledger, stored, n, rng, sides)))
        print(f"{store} at {size:,}: {sizes_of(stored, rng)}; {where}, {sides}")
    report(store, rows)


# -- PostgreSQL ---------------------------------------------------------------------------


def pg_fill(conninfo: str, start: int, stop: int) -> None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for low in range(start, stop, CHUNK):
            params = {"ns": NAMESPACE, "fp": FINGERPRINT, "result": RESULT, "week": WEEK_US}
            params |= {"low": low, "high": min(stop, low + CHUNK)}
            conn.execute(
                """
                INSERT INTO rill_jobs (job_id, namespace, job_key, state, fence, owner_attempt,
                    claimed_at, fingerprint, result, created_at, updated_at, finished_at,
                    retain_until, attempts)
                SELECT encode(sha256(convert_to(%(ns)s, 'UTF8') || '\\x00'::bytea
                        || convert_to(k.key, 'UTF8')), 'hex'),
                    %(ns)s, k.key, 'succeeded', 1, 'a' || g, clock.now - 1000, %(fp)s,
                    %(result)s, clock.now - 1000, clock.now, clock.now, clock.now + %(week)s,
                    jsonb_build_array(jsonb_build_object('attempt_id', 'a' || g, 'fence', 1,
                        'started_at', clock.now - 1000, 'ended_at', clock.now,
                        'outcome', 'succeeded', 'error', NULL, 'outputs', '[]'::jsonb,
                        'origin', NULL, 'trace', NULL))
                FROM generate_series(%(low)s, %(high)s - 1) g,
                    LATERAL (SELECT 'video-' || (g / 100) || ':' || (g %% 100) || ':h264-v2'
                        AS key) k,
                    (SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now) clock
                """,
                params,
            )
        conn.execute("VACUUM ANALYZE rill_jobs")
        # The fill's pages written out before the timing, so that it times the table's size
        # and not the bulk load's writes (a table grown over days has none pending).
        try:
            conn.execute("CHECKPOINT")
        except psycopg.errors.InsufficientPrivilege:
            print("CHECKPOINT refused (needs pg_checkpoint): the fill's writes may overlap")
    os.sync()


def pg_sizes(conninfo: str) -> str:
    with psycopg.connect(conninfo) as conn:
        row = conn.execute(
            "SELECT pg_relation_size('rill_jobs'), pg_table_size('rill_jobs'),"
            " pg_indexes_size('rill_jobs'), (SELECT count(*) FROM rill_jobs)"
        ).fetchone()
    assert row is not None
    heap, table, indexes, count = row
    mb = 1024 * 1024
    return (
        f"rows {count:,}: heap {heap / mb:,.0f} MB, table with TOAST {table / mb:,.0f} MB,"
        f" indexes {indexes / mb:,.0f} MB ({(table + indexes) / count:,.0f} bytes a job)"
    )


def pg_server(conninfo: str, database: str) -> Server:
    """The postmaster and its children; serving: the backends connected to ``database``
    (the ledger's, during the timed phase), told by their process titles."""
    with psycopg.connect(conninfo) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    processes = postgres_server(row[0])

    def serving() -> list[int]:
        found = []
        for pid in processes()[1:]:
            with contextlib.suppress(OSError):
                if f" {database} ".encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(pid)
        return found

    return Server(processes, serving)


def bench_postgres(url: str, sizes: list[int], n: int, place: str | None) -> None:
    from rill_executor_sql import upgrade_schema

    server = make_url(url)
    admin = f"postgresql://{server.username}@{server.host}:{server.port}/{server.database}"
    database = "rill_bench_scale"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {database}")
        conn.execute(f"CREATE DATABASE {database}")
    bench_url = server.set(database=database).render_as_string(hide_password=False)
    conninfo = f"postgresql://{server.username}@{server.host}:{server.port}/{database}"
    try:
        upgrade_schema(bench_url)
        grow(
            "PostgreSQL",
            bench_url,
            sizes,
            n,
            lambda start, stop: pg_fill(conninfo, start, stop),
            lambda stored, rng: pg_sizes(conninfo),
            pg_server(conninfo, database),
            place,
        )
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


# -- Redis ----------------------------------------------------------------------------------


@contextlib.contextmanager
def redis_server() -> Iterator[tuple[str, int]]:
    """A server of the benchmark's own: its URL and its process id."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    folder = Path(tempfile.mkdtemp(prefix="rill-bench-scale-"))
    binary = shutil.which("redis-server") or "redis-server"
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
         "no", "--dir", str(folder)],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        client = redis.Redis(port=port)
        for _ in range(100):
            with contextlib.suppress(redis.ConnectionError):
                if client.ping():
                    break
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0?durability=ignore", process.pid
    finally:
        process.terminate()
        process.wait()
        shutil.rmtree(folder, ignore_errors=True)


# One job's record and history as finish.lua leaves them, written by a script on the server
# for a batch of jobs (redis-py's pipeline spent ~190 µs of client time a job).
FILL = """
local now, week_ms, history_ms = ARGV[1], ARGV[2], ARGV[3]
local before, retain = ARGV[4], ARGV[5]
for j = 6, #ARGV, 3 do
  local job, attempts = 'rill:' .. ARGV[j] .. ':job', 'rill:' .. ARGV[j] .. ':attempts'
  local owner = ARGV[j + 2]
  redis.call('HSET', job, 'ns', KEYS[1], 'key', ARGV[j + 1], 'state', 'succeeded',
    'fence', '1', 'owner', owner, 'claimed_at', before, 'fp', KEYS[2],
    'created_at', before, 'updated_at', now, 'finished_at', now, 'retain_until', retain,
    'result', KEYS[3])
  redis.call('PEXPIRE', job, week_ms)
  redis.call('HSET', attempts, '1:id', owner, '1:start', before, '1:outcome', 'succeeded',
    'fence', '1', '1:end', now)
  redis.call('PEXPIRE', attempts, history_ms)
end
return 1
"""


def redis_fill(client: redis.Redis, start: int, stop: int) -> None:
    seconds, micros = client.time()
    now = int(seconds) * 1_000_000 + int(micros)
    fill = client.register_script(FILL)
    head = [str(now), str(WEEK_US // 1000), str(2 * WEEK_US // 1000), str(now - 1000)]
    head.append(str(now + WEEK_US))
    for low in range(start, stop, BATCH):
        args = list(head)
        for i in range(low, min(stop, low + BATCH)):
            key = key_of(i)
            tag = "{" + hashlib.sha256(f"{NAMESPACE}\0{key}".encode()).hexdigest() + "}"
            args += (tag, key, f"a{i}")
        fill(keys=[NAMESPACE, FINGERPRINT, RESULT], args=args)


def redis_sizes(client: redis.Redis, stored: int, rng: random.Random) -> str:
    sample = []
    for i in rng.sample(range(stored), min(1000, stored)):
        tag = "{" + hashlib.sha256(f"{NAMESPACE}\0{key_of(i)}".encode()).hexdigest() + "}"
        job = client.memory_usage(f"rill:{tag}:job") or 0
        history = client.memory_usage(f"rill:{tag}:attempts") or 0
        sample.append(job + history)
    per_job = sum(sample) / len(sample)
    used = int(client.info("memory")["used_memory"])
    week = 100 * 7 * 24 * 3600
    return (
        f"MEMORY USAGE {per_job:,.0f} bytes a job (record and history), used_memory"
        f" {used / 1024 / 1024:,.0f} MB = {used / stored:,.0f} bytes a job; a 7-day retention"
        f" of 100 jobs/s ({week:,} jobs) holds {per_job * week / 1024**3:,.1f} GiB"
    )


def bench_redis(sizes: list[int], n: int, place: str | None) -> None:
    with redis_server() as (url, pid):
        client = redis.Redis.from_url(url.split("?")[0])
        grow(
            "Redis",
            url,
            sizes,
            n,
            lambda start, stop: redis_fill(client, start, stop),
            lambda stored, rng: redis_sizes(client, stored, rng),
            Server(lambda: [pid], lambda: [pid]),
            place,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,1000000,10000000")
    parser.add_argument("--stores", default="postgres,redis")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--place", choices=PLACES, help="pin this process and the server")
    parser.add_argument(
        "--postgres-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test"
    )
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    stores = args.stores.split(",")
    if "postgres" in stores:
        bench_postgres(args.postgres_url, sizes, args.n, args.place)
    if "redis" in stores:
        bench_redis(sizes, args.n, args.place)


if __name__ == "__main__":
    main()
