#!/usr/bin/env python
"""What a fresh call writes to PostgreSQL's WAL, and what it costs, for variants of the schema.

    .venv/bin/python benchmarks/wal_variants.py [--url URL] [--n 1000] [--prefill 100000]
        [--variants current,fillfactor,...] [--workloads ordered,random] [--no-flush]
        [--details] [-o json]

Each variant is the SQL store (``Ledger(SqlStore(url))``, explicit claim + commit, and a
replay ``claim(key).result()``) on its own copy of the schema (the PostgreSQL schema
``wal_store``, installed by ``SqlStore(upgrade=True)`` and then altered as the variant says),
next to the hand-written psycopg floor (``bench_sql.py``'s ``bench_job``: one primary key,
the business key itself as its id) in the schema ``wal_floor``, in the same phase:

* ``current``     -- the schema as installed: job id the SHA-256 of (namespace, key)
* ``fillfactor``  -- ``current`` with the table at fillfactor 85 and its indexes at 70
* ``no-walk-index`` -- ``current`` without ``ix_rill_jobs_namespace`` (purge and listing
  would scan): the most that dropping an index gives
* ``walk-by-time`` -- ``current`` with the walk index on ``(namespace, created_at)``, which
  grows at its right end, instead of ``(namespace, job_id)``
* ``ordered-id``  -- job id ``{namespace}/{key}`` (the core's ``job_id`` replaced in this
  process, the id columns widened), every index kept
* ``ordered-id-pk-only`` -- ``ordered-id`` without the walk index (the primary key, led by
  the namespace, walks a namespace)
* ``lz4``         -- ``current`` with ``wal_compression = lz4`` on the store's sessions
* ``history-table`` -- not the store: the floor with its history in a table of its own
  (commit = the update and an insert of the entry in one statement), against the floor

Workloads: ``ordered`` user keys (``order-0000001``, …, continuing after the prefill) and
``random`` ones (uuid4 hex). Before timing, both tables get ``--prefill`` committed jobs of
the workload's keys, a warm-up of 100 calls, and a ``CHECKPOINT`` (so the figures are for
the start of a checkpoint cycle, where full-page images are most frequent; the server's own
checkpoints and other databases' activity fall in too).

WAL is read with ``pg_walinspect`` between the LSNs before and after the timed calls (a
temporary replication slot keeps that WAL until it is read), and attributed by relation:
every record of a transaction that touched the variant's (or the floor's) tables, indexes
or TOAST, plus records without a transaction on those relations.
Other work on the server writes WAL in the same range and is not counted. Bytes per call
are per fresh call (claim + commit: two transactions). p50s are of interleaved batches of
50 (store, floor, rotating). ``--no-flush`` turns ``synchronous_commit`` off on both sides,
so that the server's work is timed and not the disk's; ``--details`` prints the WAL bytes
by record type (to stderr).

Needs a superuser (CHECKPOINT, pg_walinspect). It drops and recreates the two schemas.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import psycopg
from psycopg.conninfo import make_conninfo
from sqlalchemy.engine import make_url

from rill_executor import Claim, Ledger, Replay
from rill_executor._rules import core
from rill_executor_sql import SqlStore

DEFAULT_URL = os.environ.get(
    "RILL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
RESULT = {"ok": True, "output": "s3://bucket/out/video-A/segment-1/h264-v2.mp4", "bytes": 1048576}
STORE_SCHEMA, FLOOR_SCHEMA = "wal_store", "wal_floor"
NOW_US = "(extract(epoch FROM now()) * 1000000)::bigint"

FLOOR_DDL = """CREATE TABLE bench_job (
    job_id varchar(600) PRIMARY KEY, namespace varchar(64) NOT NULL,
    job_key varchar(512) NOT NULL, state varchar(16) NOT NULL, fence bigint NOT NULL,
    owner_attempt varchar(128), claimed_at bigint, lease_until bigint,
    fingerprint varchar(64) NOT NULL, result text, created_at bigint NOT NULL,
    updated_at bigint NOT NULL, finished_at bigint, retain_until bigint,
    attempts jsonb NOT NULL DEFAULT '[]')"""
HISTORY_DDL = """CREATE TABLE bench_history (
    job_id varchar(600) NOT NULL, fence bigint NOT NULL, entry jsonb NOT NULL,
    PRIMARY KEY (job_id, fence))"""
FLOOR_CLAIM = f"""INSERT INTO bench_job (job_id, namespace, job_key, state, fence,
    owner_attempt, claimed_at, lease_until, fingerprint, created_at, updated_at)
    VALUES (%(id)s, %(ns)s, %(key)s, 'processing', 1, %(attempt)s, {NOW_US},
    {NOW_US} + %(lease)s, %(fp)s, {NOW_US}, {NOW_US})
    ON CONFLICT (job_id) DO NOTHING
    RETURNING fence, claimed_at"""
FLOOR_COMMIT = f"""UPDATE bench_job SET state = 'succeeded', result = %(result)s,
    lease_until = NULL, updated_at = {NOW_US}, finished_at = {NOW_US},
    retain_until = {NOW_US} + %(retention)s,
    attempts = attempts || jsonb_build_array(jsonb_build_object('fence', fence,
        'attempt_id', owner_attempt, 'started_at', claimed_at, 'ended_at', {NOW_US},
        'outcome', 'succeeded'))
    WHERE job_id = %(id)s AND fence = %(fence)s AND owner_attempt = %(attempt)s
      AND lease_until > {NOW_US}
    RETURNING fence"""
# The same commit with the history entry in a table of its own (variant history-table).
HISTORY_COMMIT = f"""WITH u AS (UPDATE bench_job SET state = 'succeeded',
    result = %(result)s, lease_until = NULL, updated_at = {NOW_US}, finished_at = {NOW_US},
    retain_until = {NOW_US} + %(retention)s
    WHERE job_id = %(id)s AND fence = %(fence)s AND owner_attempt = %(attempt)s
      AND lease_until > {NOW_US}
    RETURNING job_id, fence, owner_attempt, claimed_at)
    INSERT INTO bench_history (job_id, fence, entry)
    SELECT job_id, fence, jsonb_build_object('fence', fence, 'attempt_id', owner_attempt,
        'started_at', claimed_at, 'ended_at', {NOW_US}, 'outcome', 'succeeded') FROM u
    RETURNING fence"""
FLOOR_READ = """SELECT job_id, namespace, job_key, state, fence, owner_attempt, claimed_at,
    lease_until, fingerprint, result, created_at, updated_at, finished_at, retain_until
    FROM bench_job WHERE job_id = %(id)s"""

# Prefill rows: committed jobs, shaped as the store writes them ({id} and {key} are SQL).
STORE_PREFILL = """INSERT INTO rill_jobs (job_id, namespace, job_key, state, fence,
    owner_attempt, claimed_at, fingerprint, result, created_at, updated_at, finished_at,
    retain_until, attempts)
SELECT {id}, %(ns)s, k, 'succeeded', 1, md5(k), {t}, repeat('f', 64), %(result)s,
    {t}, {t}, {t}, {t} + 3600000000,
    jsonb_build_array(jsonb_build_object('fence', 1, 'attempt_id', md5(k), 'started_at', {t},
        'ended_at', {t}, 'outcome', 'succeeded', 'error', NULL, 'origin', NULL,
        'trace', NULL, 'outputs', '[]'::jsonb))
FROM (SELECT {key} AS k FROM generate_series(1, %(n)s) AS g(i)) keys"""
FLOOR_PREFILL = """INSERT INTO bench_job (job_id, namespace, job_key, state, fence,
    owner_attempt, claimed_at, fingerprint, result, created_at, updated_at, finished_at,
    retain_until, attempts)
SELECT k, %(ns)s, k, 'succeeded', 1, md5(k), {t}, repeat('f', 64), %(result)s, {t}, {t},
    {t}, {t} + 3600000000, jsonb_build_array(jsonb_build_object('fence', 1,
        'attempt_id', md5(k), 'started_at', {t}, 'ended_at', {t}, 'outcome', 'succeeded'))
FROM (SELECT {key} AS k FROM generate_series(1, %(n)s) AS g(i)) keys"""
KEY_SQL = {"ordered": "'order-' || lpad(i::text, 7, '0')", "random": "md5(random()::text)"}
DIGEST_SQL = "encode(sha256(convert_to(%(ns)s || '/' || k, 'UTF8')), 'hex')"
ORDERED_SQL = "%(ns)s || '/' || k"

WAL_OF = """WITH r AS (
    SELECT xid, record_length, fpi_length, block_ref, resource_manager, record_type,
        (SELECT array_agg(m[1]::oid) FROM regexp_matches(block_ref, 'rel \\d+/\\d+/(\\d+)', 'g')
            AS m) AS rels
    FROM pg_get_wal_records_info(%(start)s::pg_lsn, %(end)s::pg_lsn)
), xids AS (
    SELECT DISTINCT xid FROM r WHERE xid <> 0 AND rels && %(rels)s::oid[]
)
SELECT resource_manager || '/' || record_type, count(*), sum(record_length), sum(fpi_length),
    count(*) FILTER (WHERE fpi_length > 0)
FROM r WHERE (xid <> 0 AND xid IN (SELECT xid FROM xids))
    OR (xid = 0 AND rels && %(rels)s::oid[])
GROUP BY 1 ORDER BY 3 DESC"""
RELS_OF = """SELECT array_agg(c.relfilenode) FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname IN (%(schema)s, 'pg_toast') AND c.relfilenode <> 0
      AND (n.nspname = %(schema)s OR c.oid IN (
        SELECT t.reltoastrelid FROM pg_class t JOIN pg_namespace tn ON tn.oid = t.relnamespace
        WHERE tn.nspname = %(schema)s UNION
        SELECT i.indexrelid FROM pg_index i JOIN pg_class t ON t.reltoastrelid = i.indrelid
        JOIN pg_namespace tn ON tn.oid = t.relnamespace WHERE tn.nspname = %(schema)s))"""


@dataclass(frozen=True)
class Variant:
    name: str
    ordered_id: bool = False  # job id {namespace}/{key} instead of the SHA-256
    ddl: tuple[str, ...] = ()  # run on the installed store schema before the prefill
    after_prefill: tuple[str, ...] = ()
    options: str = ""  # extra session settings of the store's connections
    history_table: bool = False  # the floor with its history in a table (no store)


_WIDEN = (
    "ALTER TABLE rill_jobs ALTER COLUMN job_id TYPE varchar(600)",
    "ALTER TABLE rill_fences ALTER COLUMN job_id TYPE varchar(600)",
)
VARIANTS = {
    v.name: v
    for v in (
        Variant("current"),
        Variant(
            "fillfactor",
            ddl=("ALTER TABLE rill_jobs SET (fillfactor = 85)",),
            after_prefill=(
                "ALTER INDEX rill_jobs_pkey SET (fillfactor = 70)",
                "ALTER INDEX ix_rill_jobs_namespace SET (fillfactor = 70)",
                "REINDEX TABLE rill_jobs",
            ),
        ),
        Variant("no-walk-index", ddl=("DROP INDEX ix_rill_jobs_namespace",)),
        Variant(
            "walk-by-time",
            ddl=(
                "DROP INDEX ix_rill_jobs_namespace",
                "CREATE INDEX ix_rill_jobs_namespace ON rill_jobs (namespace, created_at)",
            ),
        ),
        Variant("ordered-id", ordered_id=True, ddl=_WIDEN),
        Variant(
            "ordered-id-pk-only",
            ordered_id=True,
            ddl=(*_WIDEN, "DROP INDEX ix_rill_jobs_namespace"),
        ),
        Variant("lz4", options="-c wal_compression=lz4"),
        Variant("history-table", history_table=True),
    )
}


def ordered_job_id(namespace: str, key: str) -> str:
    return f"{namespace}/{key}"


@dataclass
class Result:
    variant: str
    workload: str
    p50: dict[str, float] = field(default_factory=dict)
    wal: dict[str, dict[str, float]] = field(default_factory=dict)


def replaced_job_id(ordered: bool) -> AbstractContextManager[object]:
    """The ledger's job ids in this process: ``{namespace}/{key}`` for an ordered-id variant."""
    if not ordered:
        return nullcontext()
    return mock.patch.object(core, "job_id", ordered_job_id)


class Phase:
    """One variant under one workload: the store (or the history-table floor) and the floor."""

    def __init__(
        self, url: str, variant: Variant, workload: str, n: int, prefill: int, flush: bool
    ) -> None:
        self.url, self.variant, self.workload, self.n = url, variant, workload, n
        # Without the flush, a commit does not wait for the disk: the server's work is timed.
        settings = "" if flush else "-c synchronous_commit=off"
        self.ns = f"wal-{os.getpid()}"
        self.slot = f"wal_variants_{os.getpid()}"
        self.admin = psycopg.connect(_plain(url), autocommit=True)
        self.seq = prefill
        self.samples: dict[str, list[int]] = {}
        self._schemas()
        self.floor = psycopg.connect(_plain(url, FLOOR_SCHEMA, settings), autocommit=True)
        self.floor.execute(FLOOR_DDL)
        if variant.history_table:
            self.floor.execute(HISTORY_DDL)
            self.alt = psycopg.connect(_plain(url, STORE_SCHEMA, settings), autocommit=True)
            self.alt.execute(FLOOR_DDL)
            self.alt.execute(HISTORY_DDL)
        else:
            store_url = make_url(url).update_query_dict(
                {"options": f"-c search_path={STORE_SCHEMA} {variant.options} {settings}"}
            )
            self.store = SqlStore(store_url.render_as_string(hide_password=False), upgrade=True)
            self.ledger = Ledger(self.store, namespace=self.ns, lease=30)
            with psycopg.connect(_plain(url, STORE_SCHEMA), autocommit=True) as conn:
                for ddl in variant.ddl:
                    conn.execute(ddl)
        self._prefill(prefill)
        self.committed: list[str] = []
        self.floor_committed: list[str] = []

    def _schemas(self) -> None:
        for schema in (STORE_SCHEMA, FLOOR_SCHEMA):
            self.admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            self.admin.execute(f"CREATE SCHEMA {schema}")

    def _prefill(self, n: int) -> None:
        params = {"ns": self.ns, "n": n, "result": json.dumps(RESULT)}
        key, t = KEY_SQL[self.workload], NOW_US
        self.floor.execute(FLOOR_PREFILL.format(key=key, t=t), params)
        if self.variant.history_table:
            self.alt.execute(FLOOR_PREFILL.format(key=key, t=t), params)
            self.alt.execute(
                "INSERT INTO bench_history SELECT job_id, 1, attempts -> 0 FROM bench_job"
            )
            self.alt.execute("UPDATE bench_job SET attempts = '[]'")
        else:
            ident = ORDERED_SQL if self.variant.ordered_id else DIGEST_SQL
            # Not through the store's engine: it bounds every statement's time.
            with psycopg.connect(_plain(self.url, STORE_SCHEMA), autocommit=True) as conn:
                conn.execute(STORE_PREFILL.format(id=ident, key=key, t=t), params)
                for ddl in self.variant.after_prefill:
                    conn.execute(ddl)
        self.admin.execute(f"VACUUM ANALYZE {FLOOR_SCHEMA}.bench_job")
        if self.variant.history_table:
            self.admin.execute(f"VACUUM FULL ANALYZE {STORE_SCHEMA}.bench_job")
            self.admin.execute(f"VACUUM ANALYZE {STORE_SCHEMA}.bench_history")
        else:
            self.admin.execute(f"VACUUM ANALYZE {STORE_SCHEMA}.rill_jobs")

    def key(self) -> str:
        self.seq += 1
        if self.workload == "ordered":
            return f"order-{self.seq:07d}"
        return uuid.uuid4().hex

    # -- the operations -----------------------------------------------------------------

    def store_fresh(self, record: bool) -> None:
        if self.variant.history_table:
            self._hand_fresh(self.alt, HISTORY_COMMIT, "store_fresh", record, self.committed)
            return
        key = self.key()
        t0 = time.perf_counter_ns()
        claim = self.ledger.claim(key)
        claim.commit(RESULT)  # type: ignore[union-attr]
        t1 = time.perf_counter_ns()
        if type(claim) is not Claim:
            raise RuntimeError(f"{key!r}: {claim!r}")
        self.committed.append(key)
        if record:
            self.samples.setdefault("store_fresh", []).append(t1 - t0)

    def floor_fresh(self, record: bool) -> None:
        self._hand_fresh(self.floor, FLOOR_COMMIT, "floor_fresh", record, self.floor_committed)

    def _hand_fresh(
        self, conn: Any, commit: str, name: str, record: bool, committed: list[str]
    ) -> None:
        key = self.key()
        attempt = uuid.uuid4().hex
        t0 = time.perf_counter_ns()
        claim = {"id": key, "ns": self.ns, "key": key, "attempt": attempt,
                 "lease": 30_000_000, "fp": "f" * 64}  # fmt: skip
        (fence, _) = conn.execute(FLOOR_CLAIM, claim, prepare=True).fetchone()
        done = {"id": key, "fence": fence, "attempt": attempt,
                "result": json.dumps(RESULT), "retention": 3_600_000_000}  # fmt: skip
        if conn.execute(commit, done, prepare=True).fetchone() is None:
            raise RuntimeError(f"{key!r}: commit wrote nothing")
        t1 = time.perf_counter_ns()
        committed.append(key)
        if record:
            self.samples.setdefault(name, []).append(t1 - t0)

    def store_replay(self, record: bool) -> None:
        if self.variant.history_table:
            self._hand_read(self.alt, "store_replay", record, self.committed)
            return
        key = self.committed[self.seq % len(self.committed)]
        self.seq += 1
        t0 = time.perf_counter_ns()
        outcome = self.ledger.claim(key)
        value = outcome.result()  # type: ignore[union-attr]
        t1 = time.perf_counter_ns()
        if type(outcome) is not Replay or value != RESULT:
            raise RuntimeError(f"{key!r}: {outcome!r}")
        if record:
            self.samples.setdefault("store_replay", []).append(t1 - t0)

    def floor_replay(self, record: bool) -> None:
        self._hand_read(self.floor, "floor_replay", record, self.floor_committed)

    def _hand_read(self, conn: Any, name: str, record: bool, committed: list[str]) -> None:
        key = committed[self.seq % len(committed)]
        self.seq += 1
        t0 = time.perf_counter_ns()
        row = conn.execute(FLOOR_READ, {"id": key}, prepare=True).fetchone()
        value = json.loads(row[9])
        t1 = time.perf_counter_ns()
        if value != RESULT:
            raise RuntimeError(f"{key!r}: {row!r}")
        if record:
            self.samples.setdefault(name, []).append(t1 - t0)

    # -- a run --------------------------------------------------------------------------

    def run(self) -> Result:
        result = Result(self.variant.name, self.workload)
        with replaced_job_id(self.variant.ordered_id):
            for _ in range(100):
                self.store_fresh(False)
                self.floor_fresh(False)
                self.store_replay(False)
                self.floor_replay(False)
            # A temporary slot keeps the WAL from here until it is read, whatever other
            # checkpoints on the server would recycle.
            self.admin.execute(
                "SELECT pg_create_physical_replication_slot(%s, true, true)", (self.slot,)
            )
            self.admin.execute("CHECKPOINT")
            start = self._lsn()
            self._interleave([self.store_fresh, self.floor_fresh])
            end = self._lsn()
            self._flushed(end)
            result.wal["store"] = self._wal(start, end, STORE_SCHEMA)
            result.wal["floor"] = self._wal(start, end, FLOOR_SCHEMA)
            self.admin.execute("SELECT pg_drop_replication_slot(%s)", (self.slot,))
            self._interleave([self.store_replay, self.floor_replay])
        for name, values in self.samples.items():
            result.p50[name] = statistics.median_low(values) / 1000
        return result

    def _interleave(self, ops: list[Callable[[bool], None]], batch: int = 50) -> None:
        for round_ in range(self.n // batch):
            turn = ops[round_ % len(ops) :] + ops[: round_ % len(ops)]
            for op in turn:
                for _ in range(batch):
                    op(True)

    def _lsn(self) -> str:
        row = self.admin.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
        assert row is not None
        return str(row[0])

    def _flushed(self, lsn: str) -> None:
        """Wait for the WAL writer (pg_walinspect reads flushed WAL only)."""
        while self.admin.execute(
            "SELECT pg_current_wal_flush_lsn() < %s::pg_lsn", (lsn,)
        ).fetchone() != (False,):
            time.sleep(0.05)

    def _wal(self, start: str, end: str, schema: str) -> dict[str, float]:
        (rels,) = self.admin.execute(RELS_OF, {"schema": schema}).fetchone() or (None,)
        rows = self.admin.execute(WAL_OF, {"start": start, "end": end, "rels": rels}).fetchall()
        calls = self.n
        kinds = {str(kind): int(size) / calls for kind, _, size, _, _ in rows}
        return {
            "records": sum(int(row[1]) for row in rows) / calls,
            "bytes": sum(int(row[2]) for row in rows) / calls,
            "fpi_bytes": sum(int(row[3]) for row in rows) / calls,
            "fpi_records": sum(int(row[4]) for row in rows) / calls,
            **{f"bytes {kind}": size for kind, size in kinds.items()},
        }

    def close(self) -> None:
        if not self.variant.history_table:
            self.store.close()
        else:
            self.alt.close()
        self.floor.close()
        for schema in (STORE_SCHEMA, FLOOR_SCHEMA):
            self.admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        self.admin.close()


def _plain(url: str, schema: str | None = None, settings: str = "") -> str:
    """The libpq form of a SQLAlchemy URL, optionally with a search_path and settings."""
    plain = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    if not schema:
        return plain
    return make_conninfo(plain, options=f"-c search_path={schema} {settings}".strip())


def indexes(url: str) -> list[tuple[str, str]]:
    """The job table's indexes as the store installs them."""
    with psycopg.connect(_plain(url), autocommit=True) as admin:
        admin.execute(f"DROP SCHEMA IF EXISTS {STORE_SCHEMA} CASCADE")
        admin.execute(f"CREATE SCHEMA {STORE_SCHEMA}")
        store_url = make_url(url).update_query_dict({"options": f"-c search_path={STORE_SCHEMA}"})
        SqlStore(store_url.render_as_string(hide_password=False), upgrade=True).close()
        rows = admin.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s"
            " AND tablename = 'rill_jobs' ORDER BY indexname",
            (STORE_SCHEMA,),
        ).fetchall()
        admin.execute(f"DROP SCHEMA {STORE_SCHEMA} CASCADE")
    return [(str(name), str(definition)) for name, definition in rows]


HEADER = (
    "| workload | variant | WAL B/call | FPI B/call | records/call | floor WAL B/call"
    " | floor FPI B/call | fresh p50 µs | floor p50 µs | fresh / floor | replay p50 µs"
    " | floor read µs | replay / floor |\n"
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def row(r: Result) -> str:
    s, f = r.wal["store"], r.wal["floor"]
    fresh, floor = r.p50["store_fresh"], r.p50["floor_fresh"]
    replay, read = r.p50["store_replay"], r.p50["floor_replay"]
    return (
        f"| {r.workload} | {r.variant} | {s['bytes']:.0f} | {s['fpi_bytes']:.0f}"
        f" | {s['records']:.1f} | {f['bytes']:.0f} | {f['fpi_bytes']:.0f}"
        f" | {fresh:.0f} | {floor:.0f} | {fresh / floor:.2f} | {replay:.0f} | {read:.0f}"
        f" | {replay / read:.2f} |"
    )


def kinds(r: Result) -> str:
    """WAL bytes per call by record type, store and floor."""
    return "\n".join(
        f"  {r.workload} {r.variant} {side}: "
        + str({k[6:]: round(v) for k, v in r.wal[side].items() if k.startswith("bytes ")})
        for side in ("store", "floor")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--n", type=int, default=1000, help="timed calls of each operation")
    parser.add_argument("--prefill", type=int, default=100_000, help="jobs in each table first")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--workloads", default="ordered,random")
    parser.add_argument(
        "--no-flush",
        action="store_true",
        help="synchronous_commit off on both sides: time the server's work, not the disk's",
    )
    parser.add_argument("--details", action="store_true", help="WAL bytes by record type")
    parser.add_argument("-o", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"load average before: {' '.join(load)}", file=sys.stderr)
    if args.o == "text":
        print("Indexes of rill_jobs as installed:")
        for name, definition in indexes(args.url):
            print(f"  {name}: {definition}")
    results = []
    if args.o == "text":
        print(HEADER, flush=True)
    for workload in args.workloads.split(","):
        for name in args.variants.split(","):
            phase = Phase(
                args.url, VARIANTS[name], workload, args.n, args.prefill, not args.no_flush
            )
            try:
                results.append(phase.run())
            finally:
                phase.close()
            if args.o == "text":
                print(row(results[-1]), flush=True)
                if args.details:
                    print(kinds(results[-1]), file=sys.stderr, flush=True)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"load average after: {' '.join(load)}", file=sys.stderr)
    if args.o == "json":
        print(json.dumps([r.__dict__ for r in results], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
