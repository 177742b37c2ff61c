"""Redis servers for the adapter's tests.

- ``redis_url``: the machine's Redis (RILL_TEST_REDIS_URL, default 127.0.0.1:6379/0); tests
  there isolate themselves with fresh namespaces and never flush it.
- ``private_redis``: a redis-server of the test's own on a free port, with AOF
  (appendfsync always), to kill, restart, flush, monitor or reconfigure.
- ``make_store``: opens RedisStore, or AsyncRedisStore behind a blocking face, by URL:
  one test body runs against both twins.
- ``redis_cluster``: three masters started with ``--cluster-enabled yes`` and joined with
  ``redis-cli --cluster create``, once per session, torn down at the end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
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
    StoreAnswer,
    StoreStatus,
)
from rill_executor.testing import Portal
from rill_executor_redis import AsyncRedisStore, RedisStore

T = TypeVar("T")

REDIS_URL = os.environ.get("RILL_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
QUIET = "durability=ignore"  # the test servers keep nothing on disk on purpose


def with_query(url: str, query: str) -> str:
    return url + ("&" if "?" in url else "?") + query


def free_port() -> int:
    """A free port whose cluster-bus twin (port + 10000) is free too."""
    for _ in range(100):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if port + 10000 < 65536 and _is_free(port + 10000):
            return port
    raise RuntimeError("no free port pair found")


def _is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class RedisServer:
    """One redis-server process this test owns; ``restart`` keeps its port and data dir."""

    def __init__(self, workdir: Path, *extra: str) -> None:
        if shutil.which("redis-server") is None:
            pytest.fail("redis-server is not on PATH (apt-get install redis-server)")
        self.port = free_port()
        self.dir = workdir
        self.extra = list(extra)
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        with (self.dir / "redis.log").open("ab") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                [
                    "redis-server",
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--dir",
                    str(self.dir),
                    "--save",
                    "",
                    "--daemonize",
                    "no",
                    *self.extra,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.wait_ready()

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                log = (self.dir / "redis.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"redis-server on {self.port} exited:\n{log}")
            try:
                with redis.Redis(port=self.port, socket_timeout=1) as client:
                    if client.ping():
                        return
            except (redis.ConnectionError, redis.BusyLoadingError, redis.TimeoutError):
                time.sleep(0.02)
        raise RuntimeError(f"redis-server on {self.port} did not become ready")

    def stop(self, sig: signal.Signals = signal.SIGKILL) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(20)
        self.process = None

    def restart(self, sig: signal.Signals = signal.SIGKILL) -> None:
        self.stop(sig)
        self.start()

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path, "--appendonly", "yes", "--appendfsync", "always")
    yield server
    server.stop()


class RedisCluster:
    def __init__(self, root: Path, masters: int = 3) -> None:
        self.nodes: list[RedisServer] = []
        for i in range(masters):
            node_dir = root / f"node{i}"
            node_dir.mkdir()
            self.nodes.append(
                RedisServer(
                    node_dir,
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--appendonly",
                    "no",
                )
            )
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        subprocess.run(
            [
                "redis-cli",
                "--cluster",
                "create",
                *addresses,
                "--cluster-replicas",
                "0",
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        self._wait_ok()

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}"

    def _wait_ok(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            states = []
            for node in self.nodes:
                with node.client() as client:
                    states.append(client.execute_command("CLUSTER", "INFO"))
            if all(b"cluster_state:ok" in state for state in states):
                return
            time.sleep(0.05)
        raise RuntimeError("the test cluster did not reach cluster_state:ok")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop(signal.SIGTERM)


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    cluster = RedisCluster(tmp_path_factory.mktemp("cluster"))
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def cluster_url(redis_cluster: RedisCluster) -> str:
    return with_query(redis_cluster.url, QUIET)


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
