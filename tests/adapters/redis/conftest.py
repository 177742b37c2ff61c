"""Redis servers for the adapter's tests.

- ``redis_url``: the machine's Redis (RILL_TEST_REDIS_URL, default 127.0.0.1:6379/0), in a
  database of the session's own (tests/conftest.py), emptied when the session starts; tests
  there isolate themselves with fresh namespaces and never flush it.
- ``private_redis``: a redis-server of the test's own on a free port, with AOF
  (appendfsync always), to kill, restart, flush, monitor or reconfigure.
- ``make_store``: opens RedisStore, or AsyncRedisStore behind a blocking face, by URL:
  one test body runs against both twins.
- ``redis_cluster``: three primaries with ``--cluster-enabled yes``, once per session, torn
  down at the end.

The servers themselves (``RedisServer``, ``RedisCluster``) are ``rill_executor_redis.testing``,
which the benchmarks use too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import redis
import redis.cluster

from rill_executor.store import (
    AttemptRef,
    ClaimRequest,
    Completion,
    JobPage,
    JobQuery,
    NoticeBatch,
    NoticeSettlement,
    PurgePage,
    PurgeRequest,
    Resolution,
    StatusPage,
    StoreAnswer,
    StoreStatus,
)
from rill_executor.testing import Portal
from rill_executor_redis import AsyncRedisStore, RedisStore
from rill_executor_redis.testing import RedisCluster, RedisServer

T = TypeVar("T")

QUIET = "durability=ignore"  # the test servers keep nothing on disk on purpose


def with_query(url: str, query: str) -> str:
    return url + ("&" if "?" in url else "?") + query


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path, "--appendonly", "yes", "--appendfsync", "always")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    cluster = RedisCluster(tmp_path_factory.mktemp("cluster"))
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def cluster_url(redis_cluster: RedisCluster) -> str:
    return with_query(redis_cluster.url, QUIET)


@pytest.fixture(params=["standalone", "cluster"])
def flushable(
    request: pytest.FixtureRequest,
) -> Iterator[tuple[str, redis.Redis | redis.cluster.RedisCluster]]:
    """(store URL, a client for the test's own commands) of a deployment a test may send
    ``SCRIPT FLUSH``: a server of its own (the command is server-wide), or the test Cluster."""
    if request.param == "cluster":
        yield request.getfixturevalue("cluster_url"), request.getfixturevalue("cluster_admin")
        return
    server = request.getfixturevalue("private_redis")
    with server.client() as admin:
        yield with_query(server.url, QUIET), admin


@pytest.fixture
def cluster_admin(redis_cluster: RedisCluster) -> Iterator[redis.cluster.RedisCluster]:
    """A plain redis-py Cluster client on the test cluster, for the test's own commands."""
    client = redis.cluster.RedisCluster(host="127.0.0.1", port=redis_cluster.nodes[0].port)
    yield client
    client.close()


class BlockingStore:
    """An ``AsyncRedisStore`` with the synchronous ``Store`` interface, via a ``Portal``."""

    def __init__(self, store: AsyncRedisStore, portal: Portal) -> None:
        self.store = store
        self.portal = portal

    def store_id(self) -> str:
        return self.portal.call(self.store.store_id())

    def ping(self) -> None:
        self.portal.call(self.store.ping())

    def claim(self, request: ClaimRequest) -> StoreAnswer:
        return self.portal.call(self.store.claim(request))

    def heartbeat(self, ref: AttemptRef, lease_us: int) -> StoreAnswer:
        return self.portal.call(self.store.heartbeat(ref, lease_us))

    def register_output(self, ref: AttemptRef, output: str) -> StoreAnswer:
        return self.portal.call(self.store.register_output(ref, output))

    def finish(self, ref: AttemptRef, completion: Completion) -> StoreAnswer:
        return self.portal.call(self.store.finish(ref, completion))

    def status(self, job_id: str) -> StoreStatus | None:
        return self.portal.call(self.store.status(job_id))

    def resolve(self, job_id: str, resolution: Resolution) -> StoreAnswer:
        return self.portal.call(self.store.resolve(job_id, resolution))

    def record_event(self, job_id: str, event: str) -> bool:
        return self.portal.call(self.store.record_event(job_id, event))

    def lease_notices(self, namespace: str, owner: str, lease_us: int, limit: int) -> NoticeBatch:
        return self.portal.call(self.store.lease_notices(namespace, owner, lease_us, limit))

    def settle_notice(self, job_id: str, settlement: NoticeSettlement) -> bool:
        return self.portal.call(self.store.settle_notice(job_id, settlement))

    def list_jobs(self, query: JobQuery) -> JobPage:
        return self.portal.call(self.store.list_jobs(query))

    def list_statuses(self, query: JobQuery) -> StatusPage:
        return self.portal.call(self.store.list_statuses(query))

    def purge(self, request: PurgeRequest) -> PurgePage:
        return self.portal.call(self.store.purge(request))

    def close(self) -> None:
        self.portal.call(self.store.close())


AnyStore = RedisStore | BlockingStore


@pytest.fixture(params=["sync", "async"])
def make_store(request: pytest.FixtureRequest) -> Iterator[Callable[[str], AnyStore]]:
    """Open stores by URL as the parametrised twin; all are closed after the test."""
    portal = Portal() if request.param == "async" else None
    opened: list[AnyStore] = []

    def make(url: str) -> AnyStore:
        store: AnyStore
        if portal is None:
            store = RedisStore.from_url(url)
        else:
            store = BlockingStore(AsyncRedisStore.from_url(url), portal)
        opened.append(store)
        return store

    yield make
    for store in opened:
        with contextlib.suppress(Exception):  # a test may have killed its server
            store.close()
    if portal is not None:
        portal.close()
