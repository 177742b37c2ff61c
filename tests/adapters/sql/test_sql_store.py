"""What the SQL store adds to the kit: statements on the wire, schema, errors."""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import make_url

from rill_executor import (
    AsyncLedger,
    Claim,
    IncompatibleStore,
    Ledger,
    Replay,
    SchemaMissing,
    StoreUnavailable,
    fingerprint_of,
)
from rill_executor._keys import job_id
from rill_executor.store import ClaimRequest, Watch
from rill_executor_sql import SCHEMA_VERSION, AsyncSqlStore, SqlStore
from rill_executor_sql._migrations import create_v1, installed_version
from rill_executor_sql._schema import jobs, metadata

FAMILIES = ["sqlite", "postgres", "mariadb"]


@pytest.fixture(params=FAMILIES)
def url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_url"))


def _statements(store: SqlStore) -> list[str]:
    seen: list[str] = []

    def record(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        seen.append(statement.split()[0].upper())

    for engine in {store.engine, store._autocommit}:  # MariaDB: an autocommit engine too
        event.listen(engine, "before_cursor_execute", record)
    return seen


def _raw_statements(store: SqlStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Postgres sends driver-level SQL on the raw pooled connection: count it there."""
    seen: list[str] = []
    connect = store.engine.raw_connection

    class Cursor:
        def __init__(self, cursor: Any) -> None:
            self._cursor = cursor

        def execute(self, sql: str, params: Any = None) -> Any:
            seen.append(sql.split(maxsplit=1)[0].upper())
            return self._cursor.execute(sql, params)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._cursor, name)

    class Connection:
        def __init__(self) -> None:
            self._raw = connect()

        def cursor(self) -> Cursor:
            return Cursor(self._raw.cursor())

        def __getattr__(self, name: str) -> Any:
            return getattr(self._raw, name)

    monkeypatch.setattr(store.engine, "raw_connection", Connection)
    return seen


def test_postgres_spends_one_statement_per_operation(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqlStore(postgres_url)
    ledger = Ledger(store, namespace=f"rt{uuid.uuid4().hex[:8]}")
    seen = _raw_statements(store, monkeypatch)
    counts: list[int] = []

    def count() -> None:
        counts.append(len(seen) - sum(counts))

    claim = ledger.claim("k")
    assert isinstance(claim, Claim)
    count()
    claim.heartbeat()
    count()
    claim._register_output('{"name": "a", "key": "a", "uri": "s3://b/a"}')
    count()
    claim.commit({"ok": True})
    count()
    ledger.claim("k")
    count()
    ledger.status("k")
    count()
    store.ping()
    count()
    store.close()
    assert counts == [1, 1, 1, 1, 1, 1, 1], seen
    assert seen[-1] == "SELECT"  # the ping: SELECT 1 on the pooled cursor


@pytest.mark.parametrize("family", ["sqlite", "mariadb"])
def test_client_decided_stores_use_one_short_transaction(
    family: str, request: pytest.FixtureRequest
) -> None:
    store = SqlStore(request.getfixturevalue(f"{family}_url"))
    ledger = Ledger(store, namespace=f"rt{uuid.uuid4().hex[:8]}")
    seen = _statements(store)
    claim = ledger.claim("k")
    assert isinstance(claim, Claim)
    claim.commit(1)
    ledger.claim("k")
    store.ping()
    store.close()
    begin = ["BEGIN"] if family == "sqlite" else []
    # clock + locked job row, the fence a purged record of the key left, then the job
    fresh_claim = [*begin, "SELECT", "SELECT", "INSERT"]
    commit = [*begin, "SELECT", "UPDATE"]  # locked read, then result and history in one row
    replay = [*begin, "SELECT"]  # one locked read
    if family == "mariadb":  # a claim outside a transaction (peek_claim): one unlocked
        fresh_claim = ["SELECT", "INSERT"]  # read of job, clock and fence, then the new job
        replay = ["SELECT"]
    ping = ["SELECT"]  # SELECT 1, outside any transaction
    assert seen == fresh_claim + commit + replay + ping


def test_a_page_of_jobs_is_one_statement(url: str) -> None:
    store = SqlStore(url)
    ledger = Ledger(store, namespace=f"rt{uuid.uuid4().hex[:8]}")
    for n in range(3):
        claim = ledger.claim(f"k{n}", result_version="v1")
        assert isinstance(claim, Claim)
        claim.commit(n)
    seen = _statements(store)
    first = ledger.jobs(limit=2)
    assert len(first.jobs) == 2 and first.cursor is not None
    last = ledger.jobs(limit=2, after=first.cursor, state="succeeded", result_version="v1")
    assert len(last.jobs) == 1 and last.cursor is None
    empty = ledger.jobs(dangling=True, older_than=60)
    assert empty.jobs == () and empty.store_time.year >= 2024  # the clock comes back too
    store.close()
    assert seen == ["SELECT", "SELECT", "SELECT"], seen


def test_schema_upgrade_is_idempotent_and_matches_the_metadata(url: str) -> None:
    store = SqlStore(url, upgrade=True)
    assert store.upgrade() == []
    with store.engine.connect() as conn:
        assert installed_version(conn) == SCHEMA_VERSION
        inspector = inspect(conn)
        for table in metadata.sorted_tables:
            columns = {c["name"]: c["nullable"] for c in inspector.get_columns(table.name)}
            assert columns == {c.name: c.nullable for c in table.columns}, table.name
            assert _indexes(conn, table.name) == {i.name for i in table.indexes}, table.name
    store.close()


def _indexes(conn: Any, table: str) -> set[str | None]:
    return {i["name"] for i in inspect(conn).get_indexes(table)}


def _notice_index_is_partial(conn: Any) -> bool:
    """Whether ``ix_rill_jobs_notice_due`` holds only rows with a pending notice."""
    if conn.dialect.name == "postgresql":
        found = "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_rill_jobs_notice_due'"
    elif conn.dialect.name == "sqlite":
        found = "SELECT sql FROM sqlite_master WHERE name = 'ix_rill_jobs_notice_due'"
    else:
        return False  # MariaDB has no partial indexes
    definition = conn.execute(text(found)).scalar_one()
    return "WHERE" in definition and "notice_due IS NOT NULL" in definition


@pytest.mark.parametrize("family", ["sqlite", "postgres"])
def test_the_notice_index_holds_pending_notices_only_and_still_finds_them(
    family: str, request: pytest.FixtureRequest
) -> None:
    store = SqlStore(request.getfixturevalue(f"{family}_url"))
    with store.engine.connect() as conn:
        assert _notice_index_is_partial(conn)
    ledger = Ledger(store, namespace=f"ix{uuid.uuid4().hex[:8]}")
    claim = ledger.claim("k", watch=Watch("task", {"url": "u"}))
    assert isinstance(claim, Claim)
    claim.commit(1)
    (notice,) = ledger.lease_notices(owner="d", lease=30)  # found through the index
    assert notice.key == "k"
    store.close()


@pytest.fixture
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A new, empty database: a SQLite file, or one on the PostgreSQL or MariaDB server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/empty.db"
        return
    base = make_url(request.getfixturevalue(f"{request.param}_url"))
    name = f"rill_empty_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    yield base.set(database=name).render_as_string(hide_password=False)
    force = " WITH (FORCE)" if base.get_backend_name() == "postgresql" else ""
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE {name}{force}"))
    admin.dispose()


@pytest.mark.parametrize("empty_database", ["postgres", "mariadb"], indirect=True)
def test_a_server_store_without_schema_says_how_to_install_it(empty_database: str) -> None:
    with pytest.raises(SchemaMissing, match="rill-executor schema upgrade --store URL"):
        SqlStore(empty_database)
    SqlStore(empty_database, upgrade=True).close()
    SqlStore(empty_database).close()


@pytest.mark.parametrize("empty_database", ["sqlite", "postgres", "mariadb"], indirect=True)
def test_a_version_1_database_upgrades_to_the_fresh_schema_keeping_its_jobs(
    empty_database: str, request: pytest.FixtureRequest
) -> None:
    store = SqlStore(empty_database, upgrade=False, check=False)
    with store.engine.begin() as conn:
        create_v1(conn, 0)
        row: dict[str, object] = {c.name: None for c in jobs.columns if not c.info.get("since")}
        row.update(
            job_id=job_id("old", "k"),
            namespace="old",
            job_key="k",
            state="succeeded",
            fence=1,
            fingerprint=fingerprint_of(None),
            result='"kept"',
            created_at=1,
            updated_at=1,
            finished_at=1,
            retain_until=2**62,
            attempts="[]",
        )
        conn.execute(jobs.insert(), row)  # the v1 columns only
    with pytest.raises(SchemaMissing, match="schema version 1"):
        SqlStore(empty_database, upgrade=False)
    assert store.upgrade() == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert store.upgrade() == []
    again = SqlStore(empty_database)
    assert again.store_id() == store.store_id()  # created once, kept
    again.close()
    with store.engine.connect() as conn:
        reflected = {c["name"]: c["nullable"] for c in inspect(conn).get_columns("rill_jobs")}
        indexes = _indexes(conn, "rill_jobs")
    assert reflected == {c.name: c.nullable for c in jobs.columns}
    assert indexes == {i.name for i in jobs.indexes}
    with store.engine.connect() as conn:
        assert _notice_index_is_partial(conn) == (conn.dialect.name != "mysql")
    ledger = Ledger(store, namespace="old")
    replay = ledger.claim("k", watch=Watch("task", {"url": "u"}))
    assert isinstance(replay, Replay) and replay.result() == "kept"
    assert replay.trace is None  # a job from before the trace column ran untraced
    (notice,) = ledger.lease_notices(owner="d", lease=30)  # the outbox columns work on it
    assert notice.key == "k" and notice.result == "kept"
    assert ledger.settle_notice(notice, "delivered", "ok")
    ledger.claim("new")
    assert ledger.record_event("new", "token_refused", reason="expired")  # and the event log
    status = ledger.status("new")
    assert status is not None and [e.reason for e in status.events] == ["expired"]
    with store.engine.begin() as conn:  # the old job's retention ran out
        conn.execute(text("UPDATE rill_jobs SET retain_until = 0 WHERE job_key = 'k'"))
    assert ledger.purge(dangling_after=0).purged == 1  # and purging, fences kept
    traced = "00-" + "e5" * 16 + "-" + "f6" * 8 + "-01"
    taken = ledger.claim("k", trace=traced)
    assert isinstance(taken, Claim) and taken.fence == 2
    taken.commit("again")  # and the trace column, in the row and the history entry
    again_replay = ledger.claim("k")
    assert isinstance(again_replay, Replay) and again_replay.trace == traced
    status = ledger.status("k")
    assert status is not None and [a.trace for a in status.attempts] == [traced]
    store.close()


def _back_to(conn: Any, version: int) -> None:
    """The schema's version-independent tables as version 10 left them, marked ``version``."""
    conn.execute(text("ALTER TABLE rill_store DROP COLUMN min_writer"))
    conn.execute(text("UPDATE rill_store SET singleton = 1"))
    conn.execute(text("DELETE FROM rill_schema"))
    conn.execute(text(f"INSERT INTO rill_schema (version, applied_at) VALUES ({version}, 0)"))


@pytest.mark.parametrize("empty_database", ["postgres"], indirect=True)
def test_postgres_version_9_upgrades_to_one_claim_function_that_answers_its_call(
    empty_database: str,
) -> None:
    store = SqlStore(empty_database, upgrade=True)
    nine = "varchar, varchar, varchar, varchar, bigint, varchar, varchar, text, varchar"
    with store.engine.begin() as conn:  # back to version 9: its function had no watch
        conn.exec_driver_sql(f"DROP FUNCTION rill_claim({nine}, jsonb)")
        conn.exec_driver_sql(f"CREATE FUNCTION rill_claim({nine}) RETURNS void LANGUAGE sql AS ''")
        _back_to(conn, 9)
    assert store.upgrade() == [10, 11]
    call = (  # version 9's call, as a process not yet upgraded sends it
        "SELECT * FROM rill_claim(CAST('j' AS varchar), CAST('ns' AS varchar),"
        " CAST('k' AS varchar), CAST('a1' AS varchar), CAST(30000000 AS bigint),"
        " CAST('f' AS varchar), CAST(NULL AS varchar), CAST(NULL AS text),"
        " CAST(NULL AS varchar))"
    )
    with store.engine.begin() as conn:
        functions = "SELECT count(*) FROM pg_proc WHERE proname = 'rill_claim'"
        assert conn.exec_driver_sql(functions).scalar_one() == 1
        ok, _, claimed = conn.exec_driver_sql(call).one()[:3]
    assert ok is True and claimed == "j"
    store.close()


def test_an_unreachable_server_is_store_unavailable() -> None:
    with pytest.raises(StoreUnavailable, match="unavailable"):
        SqlStore("postgresql+psycopg://postgres@127.0.0.1:1/test")


def test_sqlite_files_get_their_schema_on_first_use(tmp_path: object) -> None:
    store = SqlStore(f"sqlite:///{tmp_path}/fresh.db")
    assert Ledger(store, namespace="n").status("k") is None
    store.close()


def test_sqlite_from_asyncio_commits_while_its_event_loop_is_blocked(tmp_path: Path) -> None:
    """SQLite has one writer per file: an async operation must not hold the write lock across
    the event loop's turns. With the loop stuck (a CPU-bound handler, say) right after an
    async claim was started, the claim still commits and the file's write lock is free."""
    path = tmp_path / "jobs.db"
    store = AsyncSqlStore(f"sqlite:///{path}")
    request = ClaimRequest(job_id("ns", "k"), "ns", "k", "f" * 64, None, "attempt-1", 30_000_000)

    async def scenario() -> bool:
        await store.store_id()  # opened: the claim below goes straight to the store
        started = asyncio.ensure_future(store.claim(request))
        await asyncio.sleep(0)  # the claim's first step runs, then the loop is held
        other = sqlite3.connect(path, timeout=0.05, isolation_level=None)
        committed = False
        try:
            for _ in range(200):  # up to 10 s with the loop blocked
                time.sleep(0.05)
                if other.execute("SELECT count(*) FROM rill_jobs").fetchone()[0]:
                    other.execute("BEGIN IMMEDIATE")  # the write lock is free, too
                    other.execute("ROLLBACK")
                    committed = True
                    break
        finally:
            other.close()
        await started
        await store.close()
        return committed

    assert asyncio.run(scenario()), "the claim did not commit while the event loop was blocked"


def test_an_async_sqlite_store_lets_its_threads_go_when_closed_and_reopens_on_use(
    tmp_path: Path,
) -> None:
    import threading

    def threads() -> int:
        return sum(t.name.startswith("rill-sqlite") for t in threading.enumerate())

    async def scenario() -> None:
        store = AsyncSqlStore(f"sqlite:///{tmp_path / 'jobs.db'}")
        before = threads()
        assert await store.status("no-such-job") is None
        await store.close()
        for _ in range(100):  # the idle threads end once told to
            if threads() == before:
                break
            await asyncio.sleep(0.05)
        assert threads() == before, "a closed store kept its threads"
        assert await store.status("no-such-job") is None  # used again: opens again
        await store.close()

    asyncio.run(scenario())


def _claim_in_child(url: str, done: Any) -> None:
    store = SqlStore(url)
    claim = Ledger(store, namespace="n").claim("child")
    assert isinstance(claim, Claim)
    claim.commit("written")
    store.close()
    done.set()


def test_a_child_forked_while_a_thread_writes_sqlite_can_write(tmp_path: Path) -> None:
    """A process's SQLite writers queue on one lock: a child forked while a parent's thread
    held it must not inherit it held (that thread does not exist in the child)."""
    import multiprocessing
    import threading

    from rill_executor_sql._dialect import sqlite_writers

    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    SqlStore(url).close()  # the schema, before the fork
    held, release = threading.Event(), threading.Event()

    def writer() -> None:
        with sqlite_writers(make_url(url)):  # a parent's writer, mid-transaction at the fork
            held.set()
            release.wait(60)

    thread = threading.Thread(target=writer)
    thread.start()
    held.wait(10)
    fork = multiprocessing.get_context("fork")
    done = fork.Event()
    child = fork.Process(target=_claim_in_child, args=(url, done))
    child.start()
    try:
        assert done.wait(30), "the forked child never got the writers' lock"
    finally:
        release.set()
        thread.join()
        child.join(10)
        if child.is_alive():
            child.kill()


@pytest.mark.parametrize("empty_database", ["sqlite", "postgres", "mariadb"], indirect=True)
def test_version_11_makes_a_watched_job_whose_owner_died_due_for_its_lapse_notice(
    empty_database: str,
) -> None:
    store = SqlStore(empty_database, upgrade=True)
    ledger = Ledger(store, namespace="v8")
    watched = ledger.claim("watched", watch=Watch("task", {"url": "u"}))
    unwatched = ledger.claim("unwatched")
    assert isinstance(watched, Claim) and isinstance(unwatched, Claim)
    with store.engine.begin() as conn:
        # As a process of version 8 left them: its watch without a due, its owner gone.
        conn.execute(text("UPDATE rill_jobs SET notice_due = NULL, lease_until = 1"))
        _back_to(conn, 10)
    assert store.upgrade() == [11]
    with store.engine.connect() as conn:
        rows = conn.execute(text("SELECT job_key, notice_due FROM rill_jobs")).all()
    due = {key: notice_due for key, notice_due in rows}
    assert due == {"watched": 1, "unwatched": None}
    (lapse,) = ledger.lease_notices(owner="d", lease=30)  # found through the index
    assert (lapse.key, lapse.info.state.value, lapse.info.fence) == ("watched", "processing", 1)
    store.close()


@pytest.mark.parametrize("empty_database", ["sqlite", "postgres", "mariadb"], indirect=True)
def test_a_store_that_admits_only_newer_writers_is_refused_at_open_and_left_as_it_was(
    empty_database: str,
) -> None:
    store = SqlStore(empty_database, upgrade=True)
    newer = SCHEMA_VERSION + 1
    with store.engine.begin() as conn:  # as a later version would leave it
        conn.execute(text(f"UPDATE rill_store SET min_writer = {newer}"))
        conn.execute(text(f"INSERT INTO rill_schema (version, applied_at) VALUES ({newer}, 0)"))
    with pytest.raises(IncompatibleStore, match=f"version {newer} or newer; this library"):
        SqlStore(empty_database)
    with pytest.raises(IncompatibleStore):
        SqlStore(empty_database, upgrade=True)  # its upgrade has nothing to apply

    async def first_claim() -> None:
        refused = AsyncSqlStore(empty_database)
        try:
            await AsyncLedger(refused, namespace="ns").claim("k")
        finally:
            await refused.close()

    with pytest.raises(IncompatibleStore):
        asyncio.run(first_claim())
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM rill_jobs")).scalar_one() == 0
        assert installed_version(conn) == newer
    store.close()
