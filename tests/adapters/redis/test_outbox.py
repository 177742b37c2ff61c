"""The outbox on Redis, beyond the conformance kit: what cjson must not change, the round
trips each outbox operation costs, and the guard of a Cluster's outbox index.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import redis.cluster

from rill_executor import Claim, InProgress, Ledger, Replay
from rill_executor.store import Watch
from rill_executor_redis._keys import outbox_keys
from rill_executor_redis.testing import RedisServer

from .conftest import QUIET, AnyStore, with_query
from .test_round_trips import Recorder

MakeStore = Callable[[str], AnyStore]

# What Lua's cjson would change if the scripts decoded and re-encoded a target: an integer
# past 14 digits, an empty list (written back as {}), an escaped slash.
TARGET = {"url": "http://engine/cb?a=1/2", "big": 2**60 + 1, "none": [], "empty": {}, "f": 0.1}


@pytest.fixture(params=["standalone", "cluster"])
def url(request: pytest.FixtureRequest, redis_url: str) -> str:
    if request.param == "cluster":
        return str(request.getfixturevalue("cluster_url"))
    return redis_url


def test_targets_and_times_come_back_exactly(make_store: MakeStore, url: str) -> None:
    ledger = Ledger(make_store(url), namespace=f"o-{uuid.uuid4().hex[:8]}", lease=30)
    owner = ledger.claim("running", watch=Watch("task", TARGET))
    assert isinstance(owner, Claim)
    assert isinstance(ledger.claim("running", watch=Watch("other", TARGET)), InProgress)
    status = ledger.status("running")
    assert status is not None and status.watchers == {"task": TARGET, "other": TARGET}
    owner.commit({"n": 2**60 + 1})
    ended = ledger.claim("ended")
    assert isinstance(ended, Claim)
    ended.commit("done")
    assert isinstance(ledger.claim("ended", watch=Watch("task", TARGET)), Replay)
    for key in ("running", "ended"):
        status = ledger.status(key)
        assert status is not None and status.finished_at is not None
        assert [n.target for n in status.notices] == [TARGET] * len(status.notices)
    finished = ledger.status("running")
    assert finished is not None
    assert [n.id for n in finished.notices] == [f"{owner.fence}.1", f"{owner.fence}.2"]
    assert {n.created_at for n in finished.notices} == {finished.finished_at}  # to the µs
    leased = ledger.lease_notices(owner="d", lease=30)
    assert {(n.key, n.info.watch) for n in leased} == {
        ("running", "task"),
        ("running", "other"),
        ("ended", "task"),
    }
    assert {n.result["n"] for n in leased if n.key == "running"} == {2**60 + 1}


def test_outbox_operations_are_one_evalsha_each_on_a_standalone_server(
    make_store: MakeStore, private_redis: RedisServer
) -> None:
    store = make_store(with_query(private_redis.url, QUIET))
    ledger = Ledger(store, namespace="rt", lease=30)
    warm = ledger.claim("warm-up", watch=Watch("w", "u"))  # load the scripts
    assert isinstance(warm, Claim)
    warm.commit(0)
    (warmed,) = ledger.lease_notices(owner="d")
    ledger.settle_notice(warmed, "delivered", "ok")
    recorder = Recorder(private_redis)

    def one(operation: Callable[[], Any]) -> Any:
        with recorder.recording() as seen:
            result = operation()
        assert seen == ["EVALSHA"], (operation, seen)
        return result

    claim = one(lambda: ledger.claim("k", watch=Watch("a", "u")))
    assert isinstance(claim, Claim)
    assert isinstance(one(lambda: ledger.claim("k", watch=Watch("b", "u"))), InProgress)
    one(lambda: claim.commit("done"))
    assert isinstance(one(lambda: ledger.claim("k", watch=Watch("c", "u"))), Replay)
    leased = one(lambda: ledger.lease_notices(owner="d"))
    assert sorted(n.info.watch for n in leased) == ["a", "b", "c"]
    assert one(lambda: ledger.settle_notice(leased[0], "delivered", "ok"))


def test_a_cluster_index_keeps_a_job_a_claim_with_a_watch_is_on_its_way_to(
    make_store: MakeStore, cluster_url: str, cluster_admin: redis.cluster.RedisCluster
) -> None:
    namespace = f"o-{uuid.uuid4().hex[:8]}"
    ledger = Ledger(make_store(cluster_url), namespace=namespace, lease=30)
    index, tokens = outbox_keys(namespace)
    claim = ledger.claim("k", watch=Watch("t", "u"))
    assert isinstance(claim, Claim)
    claim.commit("done")
    (notice,) = ledger.lease_notices(owner="d")
    assert ledger.settle_notice(notice, "delivered", "ok")
    assert cluster_admin.zscore(index, claim.job_id) is None  # nothing left: dropped
    # A claim with a watch put the job in the index under its token, and its script has not
    # run yet: a pass that finds the job empty must keep the entry.
    cluster_admin.hset(tokens, claim.job_id, "claim-on-its-way")
    cluster_admin.zadd(index, {claim.job_id: 0})
    assert ledger.lease_notices(owner="d") == []
    later = cluster_admin.zscore(index, claim.job_id)
    assert later is not None and later > time.time() * 1e6  # kept, looked at again later
