"""``rill_executor_redis.testing``: the servers the tests and the benchmarks start.

The three-primary Cluster is the session fixture every Cluster test runs on; here, the
one-primary Cluster that ``benchmarks/bench_cluster.py`` compares it with.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import rill_executor_redis.testing
from rill_executor import Claim, Ledger, Replay
from rill_executor_redis.testing import RedisCluster

from .conftest import QUIET, AnyStore, with_query

MakeStore = Callable[[str], AnyStore]


def test_testing_names_are_pinned() -> None:
    assert rill_executor_redis.testing.__all__ == ["RedisCluster", "RedisServer", "free_port"]


def test_a_one_primary_cluster_holds_every_slot_and_serves_the_store(
    tmp_path: Path, make_store: MakeStore
) -> None:
    cluster = RedisCluster(tmp_path, masters=1)
    try:
        with cluster.nodes[0].client() as node:
            info = node.execute_command("CLUSTER", "INFO")
        assert b"cluster_slots_assigned:16384\r" in info
        assert b"cluster_known_nodes:1\r" in info
        ledger = Ledger(make_store(with_query(cluster.url, QUIET)), namespace="one", lease=30)
        claim = ledger.claim("order-1")
        assert isinstance(claim, Claim)
        claim.commit({"ok": 1})
        replay = ledger.claim("order-1")
        assert isinstance(replay, Replay)
        assert replay.result() == {"ok": 1}
    finally:
        cluster.stop()
