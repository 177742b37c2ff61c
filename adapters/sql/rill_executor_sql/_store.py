"""``SqlStore`` and ``AsyncSqlStore``: the I/O loops that drive the operation flows."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, TypeVar

from sqlalchemy import URL, Connection, Engine, event, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.util import greenlet_spawn

from rill_executor.store import (
    AttemptRef,
    ClaimRequest,
    Completion,
    IncompatibleStore,
    JobPage,
    JobQuery,
    NoticeBatch,
    NoticeSettlement,
    PurgePage,
    PurgeRequest,
    Recheck,
    Resolution,
    SchemaMissing,
    StatusPage,
    StoreAnswer,
    StoreStatus,
    StoreUnavailable,
)

from . import _flows, _migrations, _schema
from ._bounds import split_bounds
from ._dialect import (
    SqlDialect,
    dialect_of,
    make_async_engine,
    make_sync_engine,
    share_outages,
    sqlite_writers,
)
from ._durability import read_risks, recheck, split_durability
from ._errors import is_race, wrap_errors
from ._loop_end import LoopEndDisposal
from ._options import check_options
from ._queries import claim_function, on_clock

__all__ = ["AsyncSqlStore", "SqlStore", "open_async_sql_store", "open_sql_store", "upgrade_schema"]

T = TypeVar("T")
E = TypeVar("E", Engine, AsyncEngine)
_RETRIES = 20
_DDL_ISOLATION = "SERIALIZABLE"  # a real transaction for migrations, even on autocommit engines
# Postgres transactions (its engine autocommits): rows locked FOR UPDATE, each statement sees
# the newest committed rows.
_TX_ISOLATION = "READ COMMITTED"
# SQLite: the write lock taken up front, so two writers never deadlock upgrading a read lock.
_SQLITE_BEGIN = "BEGIN IMMEDIATE"


def _drive(conn: Connection, flow: _flows.Flow, step: _flows.Step) -> Any:
    statement, params = step
    try:
        while True:
            assert not isinstance(statement, _flows.Raw)
            result = conn.execute(statement, params)
            rows = result.mappings().all() if result.returns_rows else []
            statement, params = flow.send(rows)
    except StopIteration as stop:
        return stop.value


async def _drive_async(conn: AsyncConnection, flow: _flows.Flow, step: _flows.Step) -> Any:
    statement, params = step
    try:
        while True:
            assert not isinstance(statement, _flows.Raw)
            result = await conn.execute(statement, params)
            rows = result.mappings().all() if result.returns_rows else []
            statement, params = flow.send(rows)
    except StopIteration as stop:
        return stop.value


def _as_sqlalchemy_error(
    engine: Any, exc: BaseException, statement: str | None, params: Any
) -> BaseException:
    """A DBAPI error from the raw path, wrapped as SQLAlchemy would, for ``wrap_errors``."""
    return sa_exc.DBAPIError.instance(
        statement,
        params,
        exc,
        engine.dialect.loaded_dbapi.Error,
        hide_parameters=True,
    )


def _drive_raw(engine: Engine, flow: _flows.Flow, step: _flows.Step) -> Any:
    """Postgres: driver-level SQL on the pooled DBAPI connection (no SQLAlchemy result layer)."""
    try:
        raw = engine.raw_connection()
    except engine.dialect.loaded_dbapi.Error as exc:  # a failed connect, as Engine.connect says it
        raise _as_sqlalchemy_error(engine, exc, None, None) from exc
    statement: Any
    statement, params = step
    try:
        while True:
            cursor = raw.cursor()
            try:
                cursor.execute(statement.sql, params)
                rows = cursor.fetchall()
                if not statement.tuples:
                    rows = [dict(zip(statement.columns, row, strict=True)) for row in rows]
            finally:
                cursor.close()
            statement, params = flow.send(rows)
    except StopIteration as stop:
        return stop.value
    except engine.dialect.loaded_dbapi.Error as exc:
        if engine.dialect.is_disconnect(exc, raw.dbapi_connection, None):
            raw.invalidate(exc)
        raise _as_sqlalchemy_error(engine, exc, statement and statement.sql, None) from exc
    finally:
        raw.close()


async def _drive_raw_async(engine: AsyncEngine, flow: _flows.Flow, step: _flows.Step) -> Any:
    """As ``_drive_raw``, on the pooled psycopg ``AsyncConnection``: checked out and returned
    in SQLAlchemy's greenlet, without an ``AsyncConnection`` around it (about 35 µs less)."""
    try:
        raw = await engine.raw_connection()
    except engine.dialect.loaded_dbapi.Error as exc:  # a failed connect, as Engine.connect says it
        raise _as_sqlalchemy_error(engine.sync_engine, exc, None, None) from exc
    driver: Any = raw.driver_connection  # psycopg.AsyncConnection
    statement: Any
    statement, params = step
    try:
        while True:
            async with driver.cursor() as cursor:
                await cursor.execute(statement.sql, params)
                rows = await cursor.fetchall()
                if not statement.tuples:
                    rows = [dict(zip(statement.columns, row, strict=True)) for row in rows]
            statement, params = flow.send(rows)
    except StopIteration as stop:
        return stop.value
    except engine.dialect.loaded_dbapi.Error as exc:
        if engine.dialect.is_disconnect(exc, raw.dbapi_connection, None):
            await greenlet_spawn(raw.invalidate, exc)
        sql = statement and statement.sql
        raise _as_sqlalchemy_error(engine.sync_engine, exc, sql, None) from exc
    finally:
        await greenlet_spawn(raw.close)  # a pool over its size closes it: awaited there


def _temp_claim(ddl: str) -> Callable[[Any, Any], None]:
    """A ``connect`` listener creating ``pg_temp.rill_claim`` (``ddl``) in each session."""

    def create(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute(ddl)
        if not dbapi_connection.autocommit:
            dbapi_connection.commit()

    return create


def _describe(dialect: SqlDialect, url: Any) -> str:
    return f"{dialect.family} store at {url.render_as_string(hide_password=True)}"


def _engines(
    dialect: SqlDialect, url: URL, make: Callable[..., E], sync_of: Callable[[E], Engine]
) -> tuple[E, E]:
    """A store's engine, and its autocommit engine (the reads, MariaDB's claim that writes
    nothing): one of its own where the dialect has an autocommit pool, sharing outages
    with the first, else the same."""
    engine = make(dialect, url)
    if not dialect.autocommit_pool:
        return engine, engine
    autocommit = make(dialect, url, autocommit=True)
    share_outages(sync_of(engine), sync_of(autocommit))
    return engine, autocommit


def _watched(policy: str, dialect: SqlDialect, where: str, *engines: Engine) -> Recheck:
    """The store's ``Recheck``, told of each new connection of its engines."""
    found = recheck(policy, dialect.family, where)
    if found.policy != "ignore":
        for engine in set(engines):
            event.listen(engine, "connect", found.connected)
    return found


def _schema_problem(version: int | None) -> SchemaMissing | None:
    if version is not None and version >= _migrations.SCHEMA_VERSION:
        return None
    have = "no schema" if version is None else f"schema version {version}"
    return SchemaMissing(
        f"the database has {have}; this library needs version {_migrations.SCHEMA_VERSION}."
        " Run `rill-executor schema upgrade --store URL` (SQLite files are upgraded on open)"
    )


def _upgrade(dialect: SqlDialect, conn: Connection) -> list[int]:
    if dialect.family == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(7262111)"))  # one upgrader at a time
    now = conn.execute(text(f"SELECT {dialect.now}")).scalar_one()
    return _migrations.upgrade(conn, int(now))


def _identity(found: _schema.StoreRecord | None) -> str:
    """The store's identity, once this code may write to it (see ``_schema``)."""
    if found is None:
        raise SchemaMissing(
            "the database has no store identity (table rill_store is empty)."
            " Run `rill-executor schema upgrade --store URL` to create it"
        )
    if found.min_writer > _migrations.SCHEMA_VERSION:
        raise IncompatibleStore(
            f"the store admits writers of schema version {found.min_writer} or newer; this"
            f" library is version {_migrations.SCHEMA_VERSION} and could break the invariants"
            " of its records. Nothing was written: run a newer rill-executor-sql here"
            " (docs/operations.md, Upgrading)"
        )
    return found.store_id


class SqlStore:
    """A synchronous SQL store. ``upgrade`` applies missing schema migrations."""

    def __init__(self, url: str, *, upgrade: bool | None = None, check: bool = True) -> None:
        self.dialect, self._url = dialect_of(url)
        self.kind = self.dialect.family  # what telemetry calls the store: never its address
        policy, self._url = split_durability(self._url, self.dialect.family)
        self.longest_wait = split_bounds(self._url, self.dialect.family)[0].longest
        """Seconds: the ledger keeps its lease at least twice as long (``check_lease``)."""
        check_options(self._url, self.dialect.family, is_async=False)
        self._where = _describe(self.dialect, self._url)
        self.engine, self._autocommit = _engines(
            self.dialect, self._url, make_sync_engine, lambda engine: engine
        )
        self._recheck = _watched(policy, self.dialect, self._where, self.engine, self._autocommit)
        self._writers = sqlite_writers(self._url) if self.dialect.family == "sqlite" else None
        self._store_id: str | None = None
        self._shiftable = False  # see _with_clock_offset
        try:
            if upgrade if upgrade is not None else self.dialect.family == "sqlite":
                self.upgrade()
                self.store_id()
            elif check:
                self.check()
        except BaseException:
            self.close()
            raise

    def check(self) -> None:
        """Raise ``SchemaMissing`` unless the schema is current; read the store's identity."""
        with wrap_errors(self._where), self.engine.connect() as conn:
            problem = _schema_problem(_migrations.installed_version(conn))
            if not problem:
                self._store_id = _identity(_schema.read_store(conn))
        if problem:
            raise problem
        self._check_durability()

    def _check_durability(self) -> None:
        """Read the server's durability settings (on the pool claims read on first: each
        of the store's pools has its first connection then) and apply ``durability=``."""
        if self._recheck.policy != "ignore":
            with wrap_errors(self._where), self._autocommit.connect() as conn:
                risks = read_risks(conn, self.dialect.family)
            self._recheck.checked(risks)

    def _safe_to_claim(self) -> None:
        """The settings read again when due (``Recheck``: a new connection, or 30 s);
        ``UnsafeDeployment`` while found unsafe under ``require``."""
        if self._recheck.due():
            self._check_durability()
        self._recheck.refuse()

    def store_id(self) -> str:
        """The store's identity (table ``rill_store``), read once when it opens."""
        if self._store_id is None:
            with wrap_errors(self._where), self.engine.connect() as conn:
                self._store_id = _identity(_schema.read_store(conn))
        return self._store_id

    def upgrade(self) -> list[int]:
        """Apply missing migrations; returns the versions applied. A server runs them on a
        connection of their own, without the statement bounds (a migration may be long)."""
        engine = self.engine
        if self.dialect.family != "sqlite":
            engine = make_sync_engine(self.dialect, self._url, migrations=True)
        try:
            with wrap_errors(self._where), engine.connect() as conn:
                conn.execution_options(isolation_level=_DDL_ISOLATION)
                if self._writers is not None:
                    with self._writers:
                        conn.exec_driver_sql(_SQLITE_BEGIN)
                        applied = _upgrade(self.dialect, conn)
                        conn.commit()
                        return applied
                with conn.begin():
                    return _upgrade(self.dialect, conn)
        finally:
            if engine is not self.engine:
                engine.dispose()

    def _run(self, make_flow: Callable[[], _flows.Flow], *, transaction: bool = True) -> Any:
        for _ in range(_RETRIES):
            try:
                flow = make_flow()
                step = next(flow)
                if isinstance(step[0], _flows.Raw):
                    with wrap_errors(self._where):
                        return _drive_raw(self.engine, flow, step)
                if not transaction:
                    with wrap_errors(self._where), self._autocommit.connect() as conn:
                        return _drive(conn, flow, step)
                with wrap_errors(self._where), self.engine.connect() as conn:
                    if self.dialect.server_side:
                        conn.execution_options(isolation_level=_TX_ISOLATION)
                    if self._writers is not None:
                        with self._writers:
                            conn.exec_driver_sql(_SQLITE_BEGIN)
                            result = _drive(conn, flow, step)
                            conn.commit()
                            return result
                    with conn.begin():
                        return _drive(conn, flow, step)
            except Exception as exc:  # a race arrives wrapped, as StoreError
                if exc.__cause__ is None or not is_race(exc.__cause__):
                    raise
        raise StoreUnavailable(
            f"{self._where}: gave up after {_RETRIES} write conflicts", applied=False
        )

    def _with_clock_offset(self, offset_us: int, *, frozen: bool = False) -> SqlStore:
        """A view of this store (its engines and records) whose clock reads ``offset_us``
        later, or (``frozen``) stands at ``offset_us``: the test hook of
        ``rill_executor.testing.with_clock_offset`` and ``with_frozen_clock``. On PostgreSQL
        each connection of the store's engine creates the session's ``pg_temp.rill_claim``
        from then on, taking the view's clock as arguments, so a claim stays one statement."""
        if self.dialect.family == "postgresql" and not self._shiftable:
            event.listen(self.engine, "connect", _temp_claim(claim_function(shifted=True)))
            self.engine.dispose()  # its connections so far have no such function
            self._shiftable = True
        return _ShiftedSqlStore(self, offset_us, frozen)

    def ping(self) -> None:
        """``SELECT 1`` on the store's pool and path, outside any transaction."""
        self._run(lambda: _flows.ping(self.dialect), transaction=False)

    def claim(self, request: ClaimRequest) -> StoreAnswer:
        self._safe_to_claim()
        # MariaDB: a claim that writes nothing is one read; PostgreSQL: a first claim with a
        # watch is one insert
        if _flows.claims_first_outside(self.dialect, request):
            answer = self._run(lambda: _flows.first_claim(self.dialect, request), transaction=False)
            if answer is not None:
                return answer  # type: ignore[no-any-return]
        return self._run(lambda: _flows.claim(self.dialect, request))  # type: ignore[no-any-return]

    def heartbeat(self, ref: AttemptRef, lease_us: int) -> StoreAnswer:
        return self._run(lambda: _flows.heartbeat(self.dialect, ref, lease_us))  # type: ignore[no-any-return]

    def register_output(self, ref: AttemptRef, output: str) -> StoreAnswer:
        return self._run(lambda: _flows.register_output(self.dialect, ref, output))  # type: ignore[no-any-return]

    def finish(self, ref: AttemptRef, completion: Completion) -> StoreAnswer:
        return self._run(lambda: _flows.finish(self.dialect, ref, completion))  # type: ignore[no-any-return]

    def status(self, job_id: str) -> StoreStatus | None:
        return self._run(lambda: _flows.status(self.dialect, job_id), transaction=False)  # type: ignore[no-any-return]

    def resolve(self, job_id: str, resolution: Resolution) -> StoreAnswer:
        return self._run(lambda: _flows.resolve(self.dialect, job_id, resolution))  # type: ignore[no-any-return]

    def record_event(self, job_id: str, event: str) -> bool:
        return self._run(lambda: _flows.record_event(self.dialect, job_id, event))  # type: ignore[no-any-return]

    def lease_notices(self, namespace: str, owner: str, lease_us: int, limit: int) -> NoticeBatch:
        return self._run(  # type: ignore[no-any-return]
            lambda: _flows.lease_notices(self.dialect, namespace, owner, lease_us, limit)
        )

    def settle_notice(self, job_id: str, settlement: NoticeSettlement) -> bool:
        return self._run(lambda: _flows.settle(self.dialect, job_id, settlement))  # type: ignore[no-any-return]

    def list_jobs(self, query: JobQuery) -> JobPage:
        return self._run(lambda: _flows.list_jobs(self.dialect, query), transaction=False)  # type: ignore[no-any-return]

    def list_statuses(self, query: JobQuery) -> StatusPage:
        return self._run(lambda: _flows.list_statuses(self.dialect, query), transaction=False)  # type: ignore[no-any-return]

    def namespaces(self, limit: int = 20) -> list[str]:
        """Up to ``limit`` namespaces that have jobs, in order: what an operator who typed a
        namespace with none is shown. One index probe a namespace."""
        return self._run(lambda: _flows.namespaces(limit), transaction=False)  # type: ignore[no-any-return]

    def purge(self, request: PurgeRequest) -> PurgePage:
        return self._run(  # type: ignore[no-any-return]
            lambda: _flows.purge(self.dialect, request), transaction=not request.dry_run
        )

    def close(self) -> None:
        self.engine.dispose()
        self._autocommit.dispose()


def _on_clock(flow: _flows.Flow, offset_us: int, frozen: bool) -> _flows.Flow:
    """``flow`` with its driver-level statements (``Raw``) on a view's clock."""
    try:
        step = next(flow)
        while True:
            statement, params = step
            if isinstance(statement, _flows.Raw):
                statement = statement._replace(sql=on_clock(statement.sql, offset_us, frozen))
            step = flow.send((yield statement, params))
    except StopIteration as stop:
        return stop.value


class _ShiftedSqlStore(SqlStore):
    """A test view of ``base`` on a clock ``offset_us`` later (``_with_clock_offset``): the
    base's engines, statements of its own. Closing it leaves ``base`` open."""

    def __init__(self, base: SqlStore, offset_us: int, frozen: bool) -> None:  # a view
        self.__dict__.update(base.__dict__)
        self.dialect = replace(base.dialect, clock_offset_us=offset_us, clock_frozen=frozen)

    def _run(self, make_flow: Callable[[], _flows.Flow], *, transaction: bool = True) -> Any:
        """As the store's, each PostgreSQL statement sent on the view's clock (the others
        are built on it: ``SqlDialect.now``)."""
        offset, frozen = self.dialect.clock_offset_us, self.dialect.clock_frozen
        return super()._run(lambda: _on_clock(make_flow(), offset, frozen), transaction=transaction)

    def close(self) -> None:
        pass  # the engines are the base store's

    def __repr__(self) -> str:
        clock = self.dialect.clock_offset_us
        at = f"at {clock}" if self.dialect.clock_frozen else f"{clock:+d}"
        return f"<SqlStore {self._where}, clock {at} µs (test view)>"


class _SqliteThreads:
    """SQLite from asyncio. A file has one writer at a time: a transaction that awaited the
    event loop between its statements would hold the write lock through every other task's
    turn (seconds on a loaded loop, and another process's heartbeat waiting behind it past
    its lease). Each operation runs whole, BEGIN to COMMIT, on a thread of the store's own."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self._threads: ThreadPoolExecutor | None = None  # started on first use, as an engine

    async def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        if self._threads is None:
            self._threads = ThreadPoolExecutor(max_workers=4, thread_name_prefix="rill-sqlite")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._threads, functools.partial(fn, *args, **kwargs))

    async def close(self) -> None:
        """Close the connections and let the threads go; a later call starts them again."""
        await self.call(self.store.close)
        threads, self._threads = self._threads, None
        if threads is not None:
            threads.shutdown(wait=False)


class AsyncSqlStore:
    """The asyncio twin of ``SqlStore``: ``AsyncSqlStore(url)`` or ``open_async_store(url)``
    opens nothing; the schema is checked (a SQLite file's upgraded) on first use. On a server
    it speaks the driver's asyncio mode; on SQLite each operation runs on a thread."""

    engine: AsyncEngine  # a server's (SQLite has no asyncio engine: see _SqliteThreads)

    def __init__(self, url: str, *, upgrade: bool | None = None) -> None:
        self.dialect, self._url = dialect_of(url)
        self.kind = self.dialect.family  # what telemetry calls the store: never its address
        policy, self._url = split_durability(self._url, self.dialect.family)
        self.longest_wait = split_bounds(self._url, self.dialect.family)[0].longest
        """Seconds: the ledger keeps its lease at least twice as long (``check_lease``)."""
        check_options(self._url, self.dialect.family, is_async=self.dialect.family != "sqlite")
        self._where = _describe(self.dialect, self._url)
        self._recheck = recheck("ignore", self.dialect.family, self._where)  # SQLite: its own
        self._upgrade_on_open = upgrade if upgrade is not None else self.dialect.family == "sqlite"
        self._ready = False
        self._store_id: str | None = None
        self._sqlite: _SqliteThreads | None = None
        if self.dialect.family == "sqlite":
            self._sqlite = _SqliteThreads(SqlStore(url, upgrade=False, check=False))
            return
        self.engine, self._autocommit = _engines(
            self.dialect, self._url, make_async_engine, lambda engine: engine.sync_engine
        )
        self._recheck = _watched(
            policy, self.dialect, self._where, self.engine.sync_engine, self._autocommit.sync_engine
        )
        others = () if self._autocommit is self.engine else (self._autocommit,)
        self._disposal = LoopEndDisposal(self.engine, *others)

    async def _ensure_ready(self) -> None:
        if self._sqlite is not None:
            if not self._ready:
                sync = self._sqlite.store
                await self._sqlite.call(sync.upgrade if self._upgrade_on_open else sync.check)
                self._store_id = await self._sqlite.call(sync.store_id)
                self._ready = True
            return
        await self._disposal.arm()  # left open, the store still closes with its event loop
        if self._ready:
            return
        if self._upgrade_on_open:
            await self.upgrade()
        with wrap_errors(self._where):  # the connect too: a refused login is ours to explain
            async with self.engine.connect() as conn:
                version = await conn.run_sync(_migrations.installed_version)
                problem = _schema_problem(version)
                found = None if problem else await conn.run_sync(_schema.read_store)
        if problem:
            raise problem
        self._store_id = _identity(found)
        await self._check_durability()
        self._ready = True

    async def _check_durability(self) -> None:
        """As ``SqlStore._check_durability``."""
        if self._recheck.policy != "ignore":
            with wrap_errors(self._where):
                async with self._autocommit.connect() as conn:
                    risks = await conn.run_sync(read_risks, self.dialect.family)
            self._recheck.checked(risks)

    async def _safe_to_claim(self) -> None:
        """As ``SqlStore._safe_to_claim``."""
        if self._recheck.due():
            await self._check_durability()
        self._recheck.refuse()

    async def store_id(self) -> str:
        """As ``SqlStore.store_id``; read when the store opens, on its first use."""
        await self._ensure_ready()
        assert self._store_id is not None
        return self._store_id

    async def upgrade(self) -> list[int]:
        if self._sqlite is not None:
            return await self._sqlite.call(self._sqlite.store.upgrade)
        # As SqlStore.upgrade: on a connection without statement bounds.
        engine = make_async_engine(self.dialect, self._url, migrations=True)
        try:
            with wrap_errors(self._where):
                async with engine.connect() as conn:
                    await conn.execution_options(isolation_level=_DDL_ISOLATION)
                    async with conn.begin():
                        return await conn.run_sync(lambda c: _upgrade(self.dialect, c))
        finally:
            await engine.dispose()

    async def _run(self, make_flow: Callable[[], _flows.Flow], *, transaction: bool = True) -> Any:
        await self._ensure_ready()
        if self._sqlite is not None:
            sync = self._sqlite.store
            return await self._sqlite.call(sync._run, make_flow, transaction=transaction)
        for _ in range(_RETRIES):
            try:
                flow = make_flow()
                step = next(flow)
                with wrap_errors(self._where):
                    if isinstance(step[0], _flows.Raw):
                        return await _drive_raw_async(self.engine, flow, step)
                    if not transaction:
                        async with self._autocommit.connect() as conn:
                            return await _drive_async(conn, flow, step)
                    async with self.engine.connect() as conn:
                        if self.dialect.server_side:
                            await conn.execution_options(isolation_level=_TX_ISOLATION)
                        async with conn.begin():
                            return await _drive_async(conn, flow, step)
            except Exception as exc:
                if exc.__cause__ is None or not is_race(exc.__cause__):
                    raise
        raise StoreUnavailable(
            f"{self._where}: gave up after {_RETRIES} write conflicts", applied=False
        )

    async def ping(self) -> None:
        await self._run(lambda: _flows.ping(self.dialect), transaction=False)

    async def claim(self, request: ClaimRequest) -> StoreAnswer:
        await self._ensure_ready()
        await self._safe_to_claim()
        if _flows.claims_first_outside(self.dialect, request):  # as SqlStore.claim
            answer = await self._run(
                lambda: _flows.first_claim(self.dialect, request), transaction=False
            )
            if answer is not None:
                return answer  # type: ignore[no-any-return]
        return await self._run(lambda: _flows.claim(self.dialect, request))  # type: ignore[no-any-return]

    async def heartbeat(self, ref: AttemptRef, lease_us: int) -> StoreAnswer:
        return await self._run(lambda: _flows.heartbeat(self.dialect, ref, lease_us))  # type: ignore[no-any-return]

    async def register_output(self, ref: AttemptRef, output: str) -> StoreAnswer:
        return await self._run(lambda: _flows.register_output(self.dialect, ref, output))  # type: ignore[no-any-return]

    async def finish(self, ref: AttemptRef, completion: Completion) -> StoreAnswer:
        return await self._run(lambda: _flows.finish(self.dialect, ref, completion))  # type: ignore[no-any-return]

    async def status(self, job_id: str) -> StoreStatus | None:
        return await self._run(lambda: _flows.status(self.dialect, job_id), transaction=False)  # type: ignore[no-any-return]

    async def resolve(self, job_id: str, resolution: Resolution) -> StoreAnswer:
        return await self._run(lambda: _flows.resolve(self.dialect, job_id, resolution))  # type: ignore[no-any-return]

    async def record_event(self, job_id: str, event: str) -> bool:
        return await self._run(lambda: _flows.record_event(self.dialect, job_id, event))  # type: ignore[no-any-return]

    async def lease_notices(
        self, namespace: str, owner: str, lease_us: int, limit: int
    ) -> NoticeBatch:
        return await self._run(  # type: ignore[no-any-return]
            lambda: _flows.lease_notices(self.dialect, namespace, owner, lease_us, limit)
        )

    async def settle_notice(self, job_id: str, settlement: NoticeSettlement) -> bool:
        return await self._run(lambda: _flows.settle(self.dialect, job_id, settlement))  # type: ignore[no-any-return]

    async def list_jobs(self, query: JobQuery) -> JobPage:
        return await self._run(lambda: _flows.list_jobs(self.dialect, query), transaction=False)  # type: ignore[no-any-return]

    async def list_statuses(self, query: JobQuery) -> StatusPage:
        return await self._run(lambda: _flows.list_statuses(self.dialect, query), transaction=False)  # type: ignore[no-any-return]

    async def purge(self, request: PurgeRequest) -> PurgePage:
        return await self._run(  # type: ignore[no-any-return]
            lambda: _flows.purge(self.dialect, request), transaction=not request.dry_run
        )

    async def close(self) -> None:
        if self._sqlite is not None:
            await self._sqlite.close()
        else:
            await self._disposal.close()


def open_sql_store(url: str) -> SqlStore:
    return SqlStore(url)


def open_async_sql_store(url: str) -> AsyncSqlStore:
    return AsyncSqlStore(url)


def upgrade_schema(url: str) -> list[int]:
    store = SqlStore(url, upgrade=False, check=False)
    try:
        return store.upgrade()
    finally:
        store.close()
