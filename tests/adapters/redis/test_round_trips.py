"""Every store operation is exactly one command on the wire: one EVALSHA (docs/stores.md,
"What an operation costs").

Counted with MONITOR on a private server, between two marker commands; the commands a
script runs inside Redis are reported by MONITOR as from "lua" and are not round trips.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from rill_executor import Claim, Conflict, InProgress, Ledger, Replay, fingerprint_of
from rill_executor.store import AttemptRef
from rill_executor_redis.testing import RedisCluster, RedisServer
from tests.clocks import STORE_CLOCK

from .conftest import QUIET, AnyStore, with_query

MakeStore = Callable[[str], AnyStore]


class Recorder:
    """The commands clients sent between ``start`` and ``stop`` markers, MONITOR'ed."""

    def __init__(self, server: RedisServer) -> None:
        self.server = server
        self.commands: list[str] = []
        self._ready = threading.Event()

    @contextmanager
    def recording(self) -> Iterator[list[str]]:
        marker = uuid.uuid4().hex
        seen: list[str] = []
        with self.server.client() as monitor_client, monitor_client.monitor() as monitor:
            thread = threading.Thread(target=self._collect, args=(monitor, marker, seen))
            thread.start()
            with self.server.client() as admin:
                admin.echo(f"start-{marker}")
                self._ready.wait(10)
                yield seen
                admin.echo(f"stop-{marker}")
            thread.join(10)
        assert not thread.is_alive()

    def _collect(self, monitor: Any, marker: str, seen: list[str]) -> None:
        started = False
        for entry in monitor.listen():
            command = entry["command"]
            if command == f"ECHO start-{marker}":
                started = True
                self._ready.set()
            elif command == f"ECHO stop-{marker}":
                return
            elif started and entry.get("client_type") != "lua":
                seen.append(command.split(" ", 1)[0].upper())


@pytest.mark.real_clock(STORE_CLOCK)
def test_one_evalsha_per_operation(make_store: MakeStore, private_redis: RedisServer) -> None:
    store = make_store(with_query(private_redis.url, QUIET))
    ledger = Ledger(store, namespace="rt", lease=30)
    warm = ledger.claim("warm-up")  # connect, and load the scripts (NOSCRIPT once each)
    assert isinstance(warm, Claim)
    warm.commit(0)
    ledger.status("warm-up")
    held = ledger.claim("warm-up-hb")
    assert isinstance(held, Claim)
    held.heartbeat()
    held_ref = AttemptRef(held.job_id, held.attempt_id, held.fence)
    store.register_output(held_ref, '{"name":"w","key":"k/w","uri":"s3://b/w"}')
    recorder = Recorder(private_redis)
    with recorder.recording() as seen, private_redis.client() as other:
        other.ping()
    assert seen[-1:] == ["PING"]  # the recorder sees what clients send

    def one(operation: Callable[[], Any]) -> Any:
        with recorder.recording() as seen:
            result = operation()
        assert seen == ["EVALSHA"], (operation, seen)
        return result

    fp = fingerprint_of("in")
    claim = one(lambda: ledger.claim("k", fingerprint=fp, lease=0.2))
    assert isinstance(claim, Claim)
    assert isinstance(one(lambda: ledger.claim("k", fingerprint=fp)), InProgress)
    one(claim.heartbeat)
    ref = AttemptRef(claim.job_id, claim.attempt_id, claim.fence)
    assert one(lambda: store.register_output(ref, '{"name":"a","key":"k/a","uri":"s3://b/a"}')).ok
    time.sleep(0.3)
    takeover = one(lambda: ledger.claim("k", fingerprint=fp))
    assert isinstance(takeover, Claim) and takeover.fence == claim.fence + 1
    one(lambda: takeover.fail("flaky", retryable=True))
    retry = one(lambda: ledger.claim("k", fingerprint=fp))
    assert isinstance(retry, Claim)
    one(lambda: retry.commit({"frames": 250}))
    assert isinstance(one(lambda: ledger.claim("k", fingerprint=fp)), Replay)
    assert isinstance(one(lambda: ledger.claim("k", fingerprint=fingerprint_of("x"))), Conflict)
    status = one(lambda: ledger.status("k"))
    assert status is not None and len(status.attempts) == 3
    assert one(lambda: ledger.status("missing")) is None


def test_a_ping_is_one_ping(make_store: MakeStore, private_redis: RedisServer) -> None:
    store = make_store(with_query(private_redis.url, QUIET))
    store.ping()  # connect first
    with Recorder(private_redis).recording() as seen:
        assert store.ping() is None
    assert seen == ["PING"]


def _pings(cluster: RedisCluster) -> list[int]:
    """PINGs each node has answered so far."""
    counts = []
    for node in cluster.nodes:
        with node.client() as client:
            counts.append(int(client.info("commandstats").get("cmdstat_ping", {}).get("calls", 0)))
    return counts


def test_a_cluster_ping_reaches_one_node(
    make_store: MakeStore, redis_cluster: RedisCluster
) -> None:
    store = make_store(with_query(redis_cluster.url, QUIET))
    store.ping()  # connect and map the slots first
    before = _pings(redis_cluster)
    store.ping()
    after = _pings(redis_cluster)
    assert sorted(a - b for a, b in zip(after, before, strict=True)) == [0, 0, 1]
