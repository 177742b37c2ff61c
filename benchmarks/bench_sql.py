#!/usr/bin/env python
"""Latency and round trips of the SQL store, next to a floor measured in the same run.

    .venv/bin/python benchmarks/bench_sql.py [--n 2000] [--stores sqlite,postgres]
        [--postgres-url URL] [--sqlite-path FILE] [--batch 50] [--warmup 200]

For each store it times, through the public API (``Ledger(SqlStore(url), ...)``):

* claim   -- ``ledger.claim(new_key)``, answering a ``Claim``
* commit  -- ``claim.commit(small_result)``
* fresh   -- claim + commit of one new key (attempt history included)
* replay  -- ``ledger.claim(committed_key)`` answering a ``Replay``, then ``.result()``
* decorated fresh / replay -- the same through an ``@ledger.idempotent`` handler (default
  heartbeat) called with a new key, then with a committed one

and, through the SAME SQLAlchemy engine and pool (``store.engine``), the floors — on
Postgres sent like the store's own statements, as driver-level SQL on a pooled DBAPI cursor;
on SQLite through SQLAlchemy like the store's transactions:

* SELECT 1                      -- one statement, one pool checkout
* INSERT ... ON CONFLICT DO NOTHING / UPDATE ... WHERE id = :id AND state = 'x'
                                -- on a scratch table ``bench_floor``; each statement is
                                   its own operation (own checkout), like claim and commit.
                                   Postgres: autocommit statements (the store's engine is
                                   AUTOCOMMIT). SQLite: each statement inside
                                   BEGIN IMMEDIATE ... COMMIT, exactly as the store runs
                                   its write operations.

PostgreSQL also has the hand-written floor: what a user could write with psycopg alone, on
its own autocommit connection (no pool, no SQLAlchemy, no ledger), every statement prepared
(``prepare=True``), on ``bench_job``, a job-shaped table with a ``jsonb`` history column:

* psycopg claim   -- ``INSERT … ON CONFLICT (job_id) DO NOTHING RETURNING`` of a new job row
* psycopg commit  -- ``UPDATE … SET state, result, history || entry WHERE job_id AND fence
                     AND owner AND lease_until > now() RETURNING``
* psycopg read    -- a primary-key ``SELECT`` of the row (what a replay reads)

Measured operations and floors run interleaved in batches (rotating order each round), after
a warm-up, so machine noise and drift fall on both sides. Round trips are counted in a
separate pass with a ``before_cursor_execute`` listener (plus explicit COMMITs, which
pysqlite sends from ``connection.commit()`` and not through a cursor), so that the listener
costs nothing in the timed runs.

Targets (from the issue; informational, the script always exits 0):
    fresh  (claim + commit)  <= 1.15 x floor pair (INSERT ON CONFLICT + UPDATE)
    replay                   <= 1.30 x SELECT 1
    PostgreSQL, against the hand-written psycopg floor:
    fresh, decorated (and explicit, for the store alone)  <= 1.15 x psycopg claim + commit
    replay, decorated (and explicit)                      <= 1.25 x psycopg read
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import re
import shutil
import sqlite3
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _placement import PLACES, placed, postgres_server
from sqlalchemy import Engine, event, text

from rill_executor import Claim, Ledger, Replay
from rill_executor_sql import SqlStore

DEFAULT_POSTGRES_URL = os.environ.get(
    "RILL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
FRESH_TARGET = 1.15
REPLAY_TARGET = 1.30
PSYCOPG_FRESH_TARGET = 1.15
PSYCOPG_REPLAY_TARGET = 1.25
PF, PR = PSYCOPG_FRESH_TARGET, PSYCOPG_REPLAY_TARGET
RESULT = {"ok": True, "output": "s3://bucket/out/video-A/segment-1/h264-v2.mp4", "bytes": 1048576}

_FLOOR_DDL = (
    "CREATE TABLE IF NOT EXISTS bench_floor ("
    " id varchar(64) PRIMARY KEY, state varchar(16) NOT NULL, v bigint NOT NULL)"
)
_FLOOR_INSERT = text(
    "INSERT INTO bench_floor (id, state, v) VALUES (:id, 'x', :v) ON CONFLICT (id) DO NOTHING"
)
_FLOOR_UPDATE = text("UPDATE bench_floor SET state = 'y', v = :v WHERE id = :id AND state = 'x'")
_SELECT_1 = text("SELECT 1")
# Postgres floors go the way the store's statements go: driver-level SQL on a pooled cursor.
_PG_FLOOR = {
    _FLOOR_INSERT: "INSERT INTO bench_floor (id, state, v) VALUES (%(id)s, 'x', %(v)s)"
    " ON CONFLICT (id) DO NOTHING",
    _FLOOR_UPDATE: "UPDATE bench_floor SET state = 'y', v = %(v)s"
    " WHERE id = %(id)s AND state = 'x'",
}


# The hand-written psycopg floor (PostgreSQL): a job-shaped row with a jsonb history column,
# claimed and committed the way a user would write it by hand.
_JOB_DDL = """CREATE TABLE IF NOT EXISTS bench_job (
    job_id varchar(64) PRIMARY KEY, namespace varchar(64) NOT NULL,
    job_key varchar(512) NOT NULL, state varchar(16) NOT NULL, fence bigint NOT NULL,
    owner_attempt varchar(128), claimed_at bigint, lease_until bigint,
    fingerprint varchar(64) NOT NULL, result text, created_at bigint NOT NULL,
    updated_at bigint NOT NULL, finished_at bigint, retain_until bigint,
    attempts jsonb NOT NULL DEFAULT '[]')"""
_NOW_US = "(extract(epoch FROM now()) * 1000000)::bigint"
_JOB_CLAIM = f"""INSERT INTO bench_job (job_id, namespace, job_key, state, fence,
    owner_attempt, claimed_at, lease_until, fingerprint, created_at, updated_at)
    VALUES (%(id)s, %(ns)s, %(key)s, 'processing', 1, %(attempt)s, {_NOW_US},
    {_NOW_US} + %(lease)s, %(fp)s, {_NOW_US}, {_NOW_US})
    ON CONFLICT (job_id) DO NOTHING
    RETURNING fence, claimed_at"""
_JOB_COMMIT = f"""UPDATE bench_job SET state = 'succeeded', result = %(result)s,
    lease_until = NULL, updated_at = {_NOW_US}, finished_at = {_NOW_US},
    retain_until = {_NOW_US} + %(retention)s,
    attempts = attempts || jsonb_build_array(jsonb_build_object('fence', fence,
        'attempt_id', owner_attempt, 'started_at', claimed_at, 'ended_at', {_NOW_US},
        'outcome', 'succeeded'))
    WHERE job_id = %(id)s AND fence = %(fence)s AND owner_attempt = %(attempt)s
      AND lease_until > {_NOW_US}
    RETURNING fence"""
_JOB_READ = """SELECT job_id, namespace, job_key, state, fence, owner_attempt, claimed_at,
    lease_until, fingerprint, result, created_at, updated_at, finished_at, retain_until
    FROM bench_job WHERE job_id = %(id)s"""


# -- measurement helpers ------------------------------------------------------------------


def percentile(sorted_ns: list[int], q: float) -> float:
    """Nearest-rank percentile, in microseconds."""
    if not sorted_ns:
        return float("nan")
    rank = max(1, -(-len(sorted_ns) * q // 100))  # ceil(n * q / 100)
    return sorted_ns[int(rank) - 1] / 1000.0


@dataclass
class Samples:
    ns: dict[str, list[int]] = field(default_factory=dict)

    def add(self, name: str, value: int) -> None:
        self.ns.setdefault(name, []).append(value)

    def stats(self, name: str) -> tuple[float, float, int]:
        data = sorted(self.ns.get(name, []))
        return percentile(data, 50), percentile(data, 99), len(data)


class RoundTrips:
    """Counts statements sent per operation: cursor executes + real COMMITs."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.kinds: list[str] = []

    def _on_execute(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self.kinds.append(_kind(statement))

    def _on_commit(self, conn: Any) -> None:
        # A commit is a round trip only when the DBAPI connection holds a transaction:
        # pysqlite after our BEGIN IMMEDIATE (sent by sqlite3's commit(), not a cursor);
        # never on the AUTOCOMMIT Postgres engine.
        dbapi = conn.connection.dbapi_connection
        if isinstance(dbapi, sqlite3.Connection):
            open_txn = dbapi.in_transaction
        else:
            info = getattr(dbapi, "info", None)
            open_txn = info is not None and int(info.transaction_status) != 0  # 0 = IDLE
        if open_txn:
            self.kinds.append("COMMIT*")

    def __enter__(self) -> RoundTrips:
        event.listen(self.engine, "before_cursor_execute", self._on_execute)
        event.listen(self.engine, "commit", self._on_commit)
        if self.engine.dialect.name == "sqlite":
            return self
        # Postgres sends driver-level SQL on raw pooled connections: count it there.
        self._raw_connection = self.engine.raw_connection
        trips = self

        class Cursor:
            def __init__(self, cursor: Any) -> None:
                self._cursor = cursor

            def execute(self, sql: str, params: Any = None) -> Any:
                trips.kinds.append(_kind(sql))
                return self._cursor.execute(sql, params)

            def __getattr__(self, name: str) -> Any:
                return getattr(self._cursor, name)

        class Connection:
            def __init__(self) -> None:
                self._raw = trips._raw_connection()

            def cursor(self) -> Cursor:
                return Cursor(self._raw.cursor())

            def __getattr__(self, name: str) -> Any:
                return getattr(self._raw, name)

        self.engine.raw_connection = Connection  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(self.engine, "before_cursor_execute", self._on_execute)
        event.remove(self.engine, "commit", self._on_commit)
        if self.engine.dialect.name != "sqlite":
            del self.engine.raw_connection

    def take(self) -> list[str]:
        kinds, self.kinds = self.kinds, []
        return kinds


_DML = re.compile(r"^\s*(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)", re.IGNORECASE)


_COMMENTS = re.compile(r"^(\s*--[^\n]*\n)*\s*")


def _kind(statement: str) -> str:
    s = _COMMENTS.sub("", statement, count=1)
    m = _DML.match(s)
    if m:
        return f"{m.group(1).split()[0].upper()} {m.group(2)}"
    head = s.split(None, 2)
    if not head:
        return "?"
    if head[0].upper() == "BEGIN":
        return " ".join(head[:2]).upper()
    if head[0].upper() == "WITH":
        return "WITH…(one CTE statement)"
    if head[0].upper() == "SELECT" and "FROM" not in s.upper():
        return "SELECT (no table)"
    return head[0].upper()


# -- one store --------------------------------------------------------------------------


@dataclass
class Bench:
    label: str
    url: str
    n: int
    batch: int
    warmup: int
    run_id: str
    store: SqlStore = field(init=False)
    ledger: Ledger = field(init=False)
    engine: Engine = field(init=False)
    sqlite: bool = field(init=False)
    samples: Samples = field(default_factory=Samples)
    seq: int = 0

    def __post_init__(self) -> None:
        self.store = SqlStore(self.url, upgrade=True)
        self.engine = self.store.engine
        self.sqlite = self.store.dialect.family == "sqlite"
        self.namespace = f"bench-{self.run_id}"
        self.ledger = Ledger(self.store, namespace=self.namespace, lease=30)

        def handler(key: str) -> dict[str, Any]:
            return RESULT

        self.decorated = self.ledger.idempotent(key=lambda key: key, name="bench")(handler)
        self.pg: Any = None if self.sqlite else _psycopg_connection(self.engine)
        self.decorated_keys: list[str] = []
        with self.engine.connect() as conn:
            if self.sqlite:
                conn.exec_driver_sql(_FLOOR_DDL)
                conn.exec_driver_sql("DELETE FROM bench_floor")
            else:
                conn.execute(text(_FLOOR_DDL))
                conn.execute(text("TRUNCATE bench_floor"))
            conn.commit()
        self.replay_keys: list[str] = []
        self.job_keys: list[str] = []

    # ---- the operations; each returns nothing and records its own samples ----------------

    def _key(self, prefix: str) -> str:
        self.seq += 1
        return f"{prefix}-{self.seq}"

    def op_fresh(self, record: bool = True) -> None:
        key = self._key("fresh")
        pc = time.perf_counter_ns
        t0 = pc()
        claim = self.ledger.claim(key)
        t1 = pc()
        claim.commit(RESULT)  # type: ignore[union-attr]
        t2 = pc()
        if type(claim) is not Claim:
            raise RuntimeError(f"fresh claim of {key!r} answered {claim!r}")
        if record:
            self.samples.add("claim", t1 - t0)
            self.samples.add("commit", t2 - t1)
            self.samples.add("fresh", t2 - t0)

    def op_replay(self, record: bool = True) -> None:
        key = self.replay_keys[self.seq % len(self.replay_keys)]
        self.seq += 1
        pc = time.perf_counter_ns
        t0 = pc()
        outcome = self.ledger.claim(key)
        t1 = pc()
        value = outcome.result()  # type: ignore[union-attr]
        t2 = pc()
        if type(outcome) is not Replay or value != RESULT:
            raise RuntimeError(f"replay of {key!r} answered {outcome!r}")
        if record:
            self.samples.add("replay_claim", t1 - t0)
            self.samples.add("replay", t2 - t0)

    def op_decorated(self, record: bool = True) -> None:
        key = self._key("decorated")
        t0 = time.perf_counter_ns()
        value = self.decorated(key)
        t1 = time.perf_counter_ns()
        if value != RESULT:
            raise RuntimeError(f"decorated call of {key!r} returned {value!r}")
        if record:
            self.samples.add("decorated", t1 - t0)

    def op_decorated_replay(self, record: bool = True) -> None:
        key = self.decorated_keys[self.seq % len(self.decorated_keys)]
        self.seq += 1
        t0 = time.perf_counter_ns()
        value = self.decorated(key)
        t1 = time.perf_counter_ns()
        if value != RESULT:
            raise RuntimeError(f"decorated replay of {key!r} returned {value!r}")
        if record:
            self.samples.add("decorated_replay", t1 - t0)

    def op_psycopg_pair(self, record: bool = True) -> None:
        """The hand-written floor: a claim and a commit with psycopg alone (PostgreSQL)."""
        key = self._key("job")
        attempt = uuid.uuid4().hex
        pc = time.perf_counter_ns
        t0 = pc()
        cur = self.pg.execute(
            _JOB_CLAIM,
            {
                "id": key,
                "ns": self.namespace,
                "key": key,
                "attempt": attempt,
                "lease": 30_000_000,
                "fp": "f" * 64,
            },
            prepare=True,
        )
        (fence, _claimed_at) = cur.fetchone()
        t1 = pc()
        cur = self.pg.execute(
            _JOB_COMMIT,
            {
                "id": key,
                "fence": fence,
                "attempt": attempt,
                "result": json.dumps(RESULT),
                "retention": 3_600_000_000,
            },
            prepare=True,
        )
        if cur.fetchone() is None:
            raise RuntimeError(f"psycopg floor commit of {key!r} wrote nothing")
        t2 = pc()
        if record:
            self.samples.add("psycopg_claim", t1 - t0)
            self.samples.add("psycopg_commit", t2 - t1)
            self.samples.add("psycopg_pair", t2 - t0)

    def op_psycopg_read(self, record: bool = True) -> None:
        """The hand-written replay floor: a prepared primary-key SELECT, result decoded."""
        key = self.job_keys[self.seq % len(self.job_keys)]
        self.seq += 1
        t0 = time.perf_counter_ns()
        row = self.pg.execute(_JOB_READ, {"id": key}, prepare=True).fetchone()
        value = json.loads(row[9])
        t1 = time.perf_counter_ns()
        if value != RESULT:
            raise RuntimeError(f"psycopg floor read of {key!r} answered {row!r}")
        if record:
            self.samples.add("psycopg_read", t1 - t0)

    def _raw(self, sql: str, params: dict[str, Any] | None) -> None:
        """Postgres: a statement on a pooled DBAPI connection, as the store sends its own."""
        raw = self.engine.raw_connection()
        try:
            cursor = raw.cursor()
            cursor.execute(sql, params)
            if cursor.description:
                cursor.fetchall()
            cursor.close()
        finally:
            raw.close()

    def _floor_write(self, statement: Any, params: dict[str, Any]) -> None:
        if not self.sqlite:  # the store's Postgres path: autocommit, raw pooled cursor
            self._raw(_PG_FLOOR[statement], params)
            return
        with self.engine.connect() as conn:  # as SqlStore._run does for a write on SQLite
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            conn.execute(statement, params)
            conn.commit()

    def op_pair(self, record: bool = True) -> None:
        key = self._key("floor")
        pc = time.perf_counter_ns
        t0 = pc()
        self._floor_write(_FLOOR_INSERT, {"id": key, "v": 1})
        t1 = pc()
        self._floor_write(_FLOOR_UPDATE, {"id": key, "v": 2})
        t2 = pc()
        if record:
            self.samples.add("floor_insert", t1 - t0)
            self.samples.add("floor_update", t2 - t1)
            self.samples.add("floor_pair", t2 - t0)

    def op_select1(self, record: bool = True) -> None:
        pc = time.perf_counter_ns
        t0 = pc()
        if self.sqlite:
            with self.engine.connect() as conn:
                conn.execute(_SELECT_1).all()
        else:
            self._raw("SELECT 1", None)
        t1 = pc()
        if record:
            self.samples.add("select1", t1 - t0)

    def op_select1_txn(self, record: bool = True) -> None:
        """SQLite only, informational: SELECT 1 in the store's write transaction."""
        pc = time.perf_counter_ns
        t0 = pc()
        with self.engine.connect() as conn:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            conn.execute(_SELECT_1).all()
            conn.commit()
        t1 = pc()
        if record:
            self.samples.add("select1_txn", t1 - t0)

    # ---- phases ------------------------------------------------------------------------

    def ops(self) -> list[Callable[..., None]]:
        ops = [self.op_select1, self.op_replay, self.op_pair, self.op_fresh]
        ops += [self.op_decorated, self.op_decorated_replay]
        if self.sqlite:
            ops.append(self.op_select1_txn)
        else:
            ops += [self.op_psycopg_pair, self.op_psycopg_read]
        return ops

    def setup_replays(self, count: int = 200) -> None:
        for i in range(count):
            key = f"replay-{i}"
            claim = self.ledger.claim(key)
            assert type(claim) is Claim, claim
            claim.commit(RESULT)
            self.replay_keys.append(key)
            self.decorated(f"dreplay-{i}")
            self.decorated_keys.append(f"dreplay-{i}")
            if self.pg is not None:
                self.op_psycopg_pair(False)
                self.job_keys.append(f"job-{self.seq}")

    def count_round_trips(self, reps: int = 20) -> dict[str, tuple[float, str]]:
        """Statements per operation, with the listener attached (not timed)."""
        out: dict[str, tuple[float, str]] = {}
        with RoundTrips(self.engine) as rt:
            floor_keys: list[str] = []

            def floor_insert() -> None:
                floor_keys.append(self._key("rt"))
                self._floor_write(_FLOOR_INSERT, {"id": floor_keys[-1], "v": 1})

            def floor_update() -> None:
                self._floor_write(_FLOOR_UPDATE, {"id": floor_keys.pop(), "v": 2})

            probes: dict[str, Callable[[], None]] = {
                "select1": lambda: self.op_select1(False),
                "floor_insert": floor_insert,
                "floor_update": floor_update,
                "replay": lambda: self.op_replay(False),
            }
            if self.sqlite:
                probes["select1_txn"] = lambda: self.op_select1_txn(False)
            for name, probe in probes.items():
                rt.take()
                for _ in range(reps):
                    probe()
                kinds = rt.take()
                out[name] = (len(kinds) / reps, _describe(kinds, reps))
            claim_kinds: list[str] = []
            commit_kinds: list[str] = []
            for _ in range(reps):
                rt.take()
                claim = self.ledger.claim(self._key("rt-fresh"))
                claim_kinds += rt.take()
                claim.commit(RESULT)  # type: ignore[union-attr]
                commit_kinds += rt.take()
            out["claim"] = (len(claim_kinds) / reps, _describe(claim_kinds, reps))
            out["commit"] = (len(commit_kinds) / reps, _describe(commit_kinds, reps))
            out["fresh"] = (out["claim"][0] + out["commit"][0], "claim + commit")
            out["floor_pair"] = (
                out["floor_insert"][0] + out["floor_update"][0],
                "floor insert + floor update",
            )
            out["replay_claim"] = out["replay"]
        return out

    def run(self) -> None:
        ops = self.ops()
        for _ in range(self.warmup):  # psycopg prepares a query on its 5th execution
            for op in ops:
                op(False)
        rounds = -(-self.n // self.batch)
        for r in range(rounds):
            gc.collect()
            rotated = ops[r % len(ops) :] + ops[: r % len(ops)]
            for op in rotated:
                for _ in range(self.batch):
                    op()

    def cleanup(self) -> None:
        with self.engine.connect() as conn:
            if self.sqlite:
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            conn.execute(
                text("DELETE FROM rill_jobs WHERE namespace = :ns"), {"ns": self.namespace}
            )
            conn.execute(text("DROP TABLE IF EXISTS bench_floor"))
            if not self.sqlite:
                conn.execute(text("DROP TABLE IF EXISTS bench_job"))
            conn.commit()
        if self.pg is not None:
            self.pg.close()
        self.store.close()

    def server_version(self) -> str:
        with self.engine.connect() as conn:
            if self.sqlite:
                return f"SQLite {conn.execute(text('SELECT sqlite_version()')).scalar_one()}"
            version = str(conn.execute(text("SHOW server_version")).scalar_one())
            return f"PostgreSQL {version.split(maxsplit=1)[0]}"


def _psycopg_connection(engine: Engine) -> Any:
    """The hand-written floor's own connection: psycopg alone, autocommit, a fresh table."""
    import psycopg

    url = engine.url.set(drivername="postgresql")
    conn = psycopg.connect(url.render_as_string(hide_password=False), autocommit=True)
    conn.execute(_JOB_DDL)
    conn.execute("TRUNCATE bench_job")
    return conn


def _describe(kinds: list[str], reps: int) -> str:
    counts = Counter(kinds)
    parts = []
    for kind in dict.fromkeys(kinds):  # first-seen order
        per = counts[kind] / reps
        parts.append(kind if per == 1 else f"{per:g}x {kind}")
    return ", ".join(parts)


# -- report -------------------------------------------------------------------------------

ROWS = [
    ("select1", "floor: SELECT 1"),
    ("select1_txn", "floor(info): BEGIN IMMEDIATE; SELECT 1; COMMIT"),
    ("floor_insert", "floor: INSERT … ON CONFLICT DO NOTHING"),
    ("floor_update", "floor: UPDATE … WHERE id AND state"),
    ("floor_pair", "floor: pair (insert + update)"),
    ("claim", "claim (new key)"),
    ("commit", "commit"),
    ("fresh", "fresh = claim + commit"),
    ("replay_claim", "replay: claim only"),
    ("replay", "replay = claim + .result()"),
    ("decorated", "decorated fresh (@idempotent, new key)"),
    ("decorated_replay", "decorated replay (@idempotent, committed key)"),
    ("psycopg_claim", "psycopg floor: INSERT … ON CONFLICT DO NOTHING"),
    ("psycopg_commit", "psycopg floor: UPDATE … WHERE fence, owner, lease"),
    ("psycopg_pair", "psycopg floor: claim + commit"),
    ("psycopg_read", "psycopg floor: primary-key SELECT"),
]


def _verdict(ratio: float, target: float) -> str:
    return "PASS" if ratio <= target else "MISS"


def report(bench: Bench, trips: dict[str, tuple[float, str]], elapsed: float) -> list[str]:
    s = bench.samples
    lines = [
        "",
        f"== {bench.label}: {bench.server_version()}  ({bench.url})",
        f"   n={s.stats('fresh')[2]} samples per operation, batches of {bench.batch}, warm-up"
        f" {bench.warmup} per operation, {elapsed:.1f}s",
    ]
    if bench.sqlite:
        lines.append(
            "   SQLite floor pair: each statement in its own BEGIN IMMEDIATE … COMMIT (the"
            " store's write transaction), WAL, synchronous=FULL, same engine/pool"
        )
    else:
        lines.append(
            "   Postgres floors: autocommit statements, each its own pool checkout, sent as"
            " driver-level SQL on the pooled DBAPI cursor, exactly as the store sends its own"
        )
    lines.append(f"   {'operation':<48} {'p50 µs':>9} {'p99 µs':>9} {'trips':>6}  statements")
    for name, title in ROWS:
        if name not in s.ns:
            continue
        p50, p99, _ = s.stats(name)
        trip, what = trips.get(name, (float("nan"), ""))
        lines.append(f"   {title:<48} {p50:>9.1f} {p99:>9.1f} {trip:>6.3g}  {what}")
    lines.append("")
    lines.append(f"   {'ratio':<48} {'p50':>9} {'p99':>9} {'target':>8}  verdict (p50 / p99)")
    checks: list[tuple[str, str, str, float | None]] = [
        ("fresh / floor pair", "fresh", "floor_pair", FRESH_TARGET),
        ("replay / SELECT 1", "replay", "select1", REPLAY_TARGET),
    ]
    if bench.sqlite:
        checks.append(("replay / SELECT 1 in write txn (info)", "replay", "select1_txn", None))
    else:
        checks += [
            ("decorated fresh / psycopg claim + commit", "decorated", "psycopg_pair", PF),
            ("fresh (explicit) / psycopg claim + commit", "fresh", "psycopg_pair", PF),
            ("claim / psycopg INSERT (info)", "claim", "psycopg_claim", None),
            ("commit / psycopg UPDATE (info)", "commit", "psycopg_commit", None),
            ("decorated replay / psycopg read", "decorated_replay", "psycopg_read", PR),
            ("replay (explicit) / psycopg read", "replay", "psycopg_read", PR),
            ("psycopg pair / pooled floor pair (info)", "psycopg_pair", "floor_pair", None),
        ]
    for title, num, den, target in checks:
        r50 = s.stats(num)[0] / s.stats(den)[0]
        r99 = s.stats(num)[1] / s.stats(den)[1]
        if target is None:
            lines.append(f"   {title:<48} {r50:>8.2f}x {r99:>8.2f}x {'-':>8}  (no target)")
        else:
            lines.append(
                f"   {title:<48} {r50:>8.2f}x {r99:>8.2f}x {'≤' + format(target, '.2f') + 'x':>8}"
                f"  {_verdict(r50, target)} / {_verdict(r99, target)}"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="timed samples per operation")
    parser.add_argument("--batch", type=int, default=50, help="operations per interleaved batch")
    parser.add_argument("--warmup", type=int, default=200, help="untimed runs per operation")
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument(
        "--sqlite-path", default=None, help="SQLite file (default: a temporary file, removed)"
    )
    parser.add_argument(
        "--place",
        choices=PLACES,
        default=None,
        help="pin this process and the local PostgreSQL server's processes to one core"
        " (same) or to one each (apart); default: the scheduler decides",
    )
    args = parser.parse_args(argv)

    run_id = f"{int(time.time())}-{os.getpid()}"
    print(
        f"rill-executor SQL store benchmark — Python {platform.python_version()},"
        f" SQLAlchemy {__import__('sqlalchemy').__version__},"
        f" psycopg {_version('psycopg')}, {os.cpu_count()} CPUs, {platform.machine()}"
    )
    print(
        "latencies are wall time per operation in the calling thread (pool checkout, driver,"
        " SQLAlchemy, ledger); trips = statements sent per operation (COMMIT* = sent by"
        " sqlite3's commit(), not via a cursor)"
    )
    tmpdir: str | None = None
    summary: list[str] = []
    for label in [s.strip() for s in args.stores.split(",") if s.strip()]:
        if label == "sqlite":
            if args.sqlite_path:
                path = Path(args.sqlite_path)
            else:
                tmpdir = tempfile.mkdtemp(prefix="rill-bench-")
                path = Path(tmpdir) / "bench.db"
            url = f"sqlite:///{path}"
        elif label == "postgres":
            url = args.postgres_url
        else:
            print(f"\n== {label}: unknown store, use sqlite and/or postgres")
            continue
        try:
            bench = Bench(label, url, args.n, args.batch, args.warmup, run_id)
        except Exception as exc:  # report and go on: the benchmark never fails the caller
            print(f"\n== {label}: SKIPPED, cannot open {url}: {exc}")
            continue
        server = postgres_server(bench.pg.info.backend_pid) if bench.pg is not None else list
        with placed(args.place if bench.pg is not None else None, server) as where:
            try:
                bench.setup_replays()
                started = time.perf_counter()
                bench.run()
                elapsed = time.perf_counter() - started
                trips = bench.count_round_trips()
                lines = report(bench, trips, elapsed)
                print("\n".join([lines[0], f"   {where}", *lines[1:]]), flush=True)
                summary += [
                    f"{label}: {line.strip()}"
                    for line in lines
                    if "verdict" not in line and ("PASS" in line or "MISS" in line)
                ]
            finally:
                bench.cleanup()
    if tmpdir:
        shutil.rmtree(tmpdir, ignore_errors=True)
    if summary:
        print("\nsummary (targets are informational; exit status is 0 either way):")
        for line in summary:
            print("  " + re.sub(r"\s{2,}", "  ", line))
    return 0


def _version(module: str) -> str:
    try:
        return str(__import__(module).__version__)
    except Exception:
        return "n/a"


if __name__ == "__main__":
    sys.exit(main())
