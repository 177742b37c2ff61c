"""The test-only clocks of the stores (``with_clock_offset``, ``with_frozen_clock``): a view
reads the store's own clock shifted, or a clock standing still; it sends what the store
sends, one round trip an operation; and nothing a deployment writes sets it: no store URL,
option or constructor argument."""

from __future__ import annotations

import inspect
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event

from rill_executor import open_store
from rill_executor._codec import encode_error
from rill_executor._keys import job_id
from rill_executor._rules.events import encode_event
from rill_executor._rules.resolution import resolution_error
from rill_executor.store import (
    AttemptRef,
    ClaimRequest,
    Completion,
    JobState,
    MemoryStore,
    PurgeRequest,
    Resolution,
    Store,
)
from rill_executor.testing import with_clock_offset, with_frozen_clock

S = 1_000_000
STORES = ("memory", "postgres", "sqlite", "mariadb", "redis")


def _url(kind: str, request: pytest.FixtureRequest) -> str:
    if kind == "memory":
        return "memory://"
    return str(request.getfixturevalue(f"{kind}_url"))


def _now(store: Store) -> int:
    """The store's own now: one read of an outbox nobody uses."""
    return store.lease_notices(f"clock-{uuid.uuid4().hex[:8]}", "nobody", 1, 1).now


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    kind = request.param
    opened = MemoryStore() if kind == "memory" else open_store(_url(kind, request))
    yield opened
    opened.close()


def test_a_view_reads_the_store_clock_shifted(store: Store) -> None:
    before = _now(store)
    view = with_clock_offset(store, 3600)
    try:
        seen = _now(view)
    finally:
        view.close()
    after = _now(store)  # the view closed, the store still answers
    assert before + 3600 * S <= seen <= after + 3600 * S


def test_a_frozen_view_answers_one_instant(store: Store) -> None:
    at = _now(store) + 7 * S + 123
    view = with_frozen_clock(store, at)
    try:
        assert [_now(view) for _ in range(3)] == [at, at, at]
    finally:
        view.close()


OPTIONS = ("clock_offset_us=3600000000", "clock_offset=3600", "clock_frozen=true")


@pytest.mark.parametrize("option", OPTIONS)
def test_no_store_url_sets_a_clock(
    store: Store, option: str, request: pytest.FixtureRequest
) -> None:
    """A URL with what would name an offset is refused, or opens a store on its real clock."""
    kind = request.node.callspec.params["store"]
    url = _url(kind, request)
    shifted = f"{url}{'&' if '?' in url else '?'}{option}"
    before = _now(store)
    try:
        opened = open_store(shifted)
    except Exception:  # the driver refuses the option: nothing opened
        return
    try:
        seen = _now(opened)
    finally:
        opened.close()
    assert before <= seen <= _now(store)


def test_no_constructor_or_opener_takes_a_clock() -> None:
    from rill_executor_redis import RedisStore
    from rill_executor_sql import AsyncSqlStore, SqlStore
    from rill_executor_sql._dialect import SqlDialect

    callables: list[Callable[..., Any]] = [
        SqlStore,
        AsyncSqlStore,
        RedisStore,
        RedisStore.from_url,
        open_store,
    ]
    for made in callables:
        names = set(inspect.signature(made).parameters)
        assert not {n for n in names if "clock" in n or "offset" in n or "frozen" in n}, made
    # MemoryStore takes a Clock (its design: a test's VirtualClock), no offset
    assert set(inspect.signature(MemoryStore).parameters) == {"clock"}
    assert SqlDialect("postgresql").clock_offset_us == 0  # a parsed URL's dialect


# -- a view costs what the store costs: the same statements, one round trip an operation


def _operations(store: Callable[[float], Store]) -> dict[str, Callable[[], object]]:
    """Every kind of operation on a new job, each on ``store(offset)``, in order."""
    namespace = f"cost-{uuid.uuid4().hex[:8]}"
    job = job_id(namespace, "k")
    ref = AttemptRef(job, "a1", 1)
    watch = json.dumps({"id": "w", "target": 1})

    def claim(attempt: str, at: float) -> Callable[[], object]:
        request = ClaimRequest(job, namespace, "k", "f", "v", attempt, 10 * S, watch=watch)
        return lambda: store(at).claim(request)

    error = resolution_error("terminate", "why")
    return {
        "claim": claim("a1", 0),
        "in progress": claim("a2", 1),
        "heartbeat": lambda: store(2).heartbeat(ref, 10 * S),
        "event": lambda: store(2).record_event(job, encode_event("token_refused")),
        "commit": lambda: store(3).finish(
            ref, Completion(JobState.SUCCEEDED, "1", None, None, 60 * S)
        ),
        "replay": claim("a3", 4),
        "lease notices": lambda: store(5).lease_notices(namespace, "d", 30 * S, 10),
        "status": lambda: store(5).status(job),
        "resolve": lambda: store(6).resolve(
            job, Resolution("terminate", "r", "ops", False, None, error, 60 * S)
        ),
        "purge": lambda: store(70).purge(PurgeRequest(namespace, 30 * S)),
        "fail": lambda: store(71).finish(
            ref, Completion(JobState.FAILED, None, encode_error("x", retryable=True), True, S)
        ),
    }


def _counted(count: Callable[[], int], ops: dict[str, Callable[[], object]]) -> dict[str, int]:
    found = {}
    for name, op in ops.items():
        before = count()
        op()
        found[name] = count() - before
    return found


def _same_cost(store: Store, count: Callable[[], int], scans: bool = False) -> None:
    """The operations cost the store and its views alike, once each has run them once (a
    script loaded, a connection opened: what a first call pays). ``scans``: the store's
    purge scans every key, its calls growing with the keys each round adds: not compared."""
    views: dict[float, Store] = {}

    def view(at: float) -> Store:
        if at not in views:
            views[at] = with_clock_offset(store, at)
        return views[at]

    try:
        for warm in (lambda at: store, view):
            _counted(count, _operations(warm))
        base = _counted(count, _operations(lambda at: store))
        shifted = _counted(count, _operations(view))
    finally:
        for opened in views.values():
            opened.close()
    if scans:
        del base["purge"], shifted["purge"]
    assert shifted == base
    assert base["claim"] >= 1 and base["heartbeat"] >= 1  # the counter counts


def _statements(*engines: Engine) -> Callable[[], int]:
    """Statements SQLAlchemy sends on ``engines``, commits included."""
    sent = [0]

    def one(*_: Any) -> None:
        sent[0] += 1

    for engine in engines:
        event.listen(engine, "before_cursor_execute", one)
        event.listen(engine, "commit", one)
    return lambda: sent[0]


def test_a_view_costs_sqlite_and_mariadb_what_the_store_does(
    sqlite_url: str, mariadb_url: str
) -> None:
    from rill_executor_sql import SqlStore

    for url in (sqlite_url, mariadb_url):  # no durability checks: they come when due
        store = SqlStore(f"{url}{'&' if '?' in url else '?'}durability=ignore", upgrade=True)
        try:
            _same_cost(store, _statements(store.engine, store._autocommit))
        finally:
            store.close()


def test_a_view_costs_postgres_what_the_store_does(postgres_url: str) -> None:
    """Counted at the driver's cursors: PostgreSQL's statements bypass SQLAlchemy's events."""
    import psycopg

    from rill_executor_sql import SqlStore

    sent = [0]

    class Counting(psycopg.Cursor[Any]):
        def execute(self, *args: Any, **kwargs: Any) -> Any:
            sent[0] += 1
            return super().execute(*args, **kwargs)

    store = SqlStore(f"{postgres_url}?durability=ignore")
    try:
        with_clock_offset(store, 1).close()  # its connections now make the views' function
        event.listen(
            store.engine, "connect", lambda conn, _: setattr(conn, "cursor_factory", Counting)
        )
        store.engine.dispose()
        store.status("warm-up")  # the connection made (and its function created) before
        _same_cost(store, lambda: sent[0])
    finally:
        store.close()


def test_a_view_costs_redis_what_the_store_does(tmp_path: Path) -> None:
    """Counted by a private server: the scripts each operation sends, views as the store."""
    from rill_executor_redis import RedisStore
    from rill_executor_redis.testing import RedisServer

    server = RedisServer(tmp_path)
    try:
        store = RedisStore.from_url(server.url + "?durability=ignore")
        with server.client() as admin:

            def calls() -> int:
                stats = admin.info("commandstats")
                return sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")

            try:
                _same_cost(store, calls, scans=True)
            finally:
                store.close()
    finally:
        server.stop()
