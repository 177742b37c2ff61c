"""Key layout and hostile business keys: isolated, never cross-talk between namespaces.

Business keys are built to collide with our own key names and hash tags. Redis key names
are digests, so each key must get its own record, its own three Redis keys in one slot,
and read back exactly as written.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

import pytest
import redis
from redis.crc import key_slot

from rill_executor import Claim, InvalidKey, Ledger, Replay
from rill_executor.store import MemoryStore, StoreProtocolError
from rill_executor_redis import job_keys
from rill_executor_redis.testing import RedisServer

from .conftest import QUIET, AnyStore, with_query

MakeStore = Callable[[str], AnyStore]
OUR_KEY = re.compile(r"rill:\{[0-9a-f]{64}\}:(job|attempts)")


def _job_id(namespace: str, key: str) -> str:
    """The core's job id of (namespace, key), through public API only."""
    claim = Ledger(MemoryStore(), namespace=namespace).claim(key)
    assert isinstance(claim, Claim)
    return claim.job_id


def hostile_keys() -> list[str]:
    victim = _job_id("ns-a", "victim")
    job, attempts = job_keys(victim)
    return [
        "victim",
        job,
        attempts,  # another job's exact Redis key names
        "{" + victim + "}",  # its hash tag
        "rill:{",
        "}",
        "{",
        "{}",
        "{{}}",
        "}{",
        "a{b}c",
        "{a}{b}",
        "*",
        "?",
        "[a-z]*",
        "rill:*",
        "\\*",
        ":",
        "::",
        "rill:",
        "a:b:c",
        " ",
        "with spaces ",
        "\u00a0nbsp",
        "\u202eright-to-left",
        "\u200bzero-width",
        "é" * 256,  # 512 bytes of UTF-8, the longest key
        "x" * 512,
        "😀" * 128,
        "\\x00\\xff binary-looking",
        "key\u2028line-separator",
    ]


@pytest.fixture
def server_client(private_redis: RedisServer) -> redis.Redis:
    return private_redis.client()


def test_hostile_keys_are_isolated(
    make_store: MakeStore, private_redis: RedisServer, server_client: redis.Redis
) -> None:
    store = make_store(with_query(private_redis.url, QUIET))
    ledgers = [Ledger(store, namespace=ns, lease=30) for ns in ("ns-a", "ns-b")]
    keys = hostile_keys()
    assert len(set(keys)) == len(keys)
    for ledger in ledgers:
        for key in keys:
            claim = ledger.claim(key)
            assert isinstance(claim, Claim), (ledger.namespace, key, claim)
            claim.commit({"ns": ledger.namespace, "key": key})

    for ledger in ledgers:
        for key in keys:
            replay = ledger.claim(key)
            assert isinstance(replay, Replay)
            assert replay.result() == {"ns": ledger.namespace, "key": key}
            status = ledger.status(key)
            assert status is not None
            assert (status.namespace, status.key, status.fence) == (ledger.namespace, key, 1)
            assert len(status.attempts) == 1

    names = [name.decode() for name in server_client.scan_iter(count=1000)]
    names = [name for name in names if name != "rill:store-id"]  # the store's identity
    assert all(OUR_KEY.fullmatch(name) for name in names), [
        n for n in names if not OUR_KEY.fullmatch(n)
    ]
    assert len(names) == 2 * len(ledgers) * len(keys)  # job and attempts: nothing else
    jobs: dict[str, set[int]] = {}
    for name in names:
        jobs.setdefault(name.split("}")[0], set()).add(key_slot(name.encode()))
    assert all(len(slots) == 1 for slots in jobs.values())


def test_invalid_keys_write_nothing(
    make_store: MakeStore, private_redis: RedisServer, server_client: redis.Redis
) -> None:
    ledger = Ledger(make_store(with_query(private_redis.url, QUIET)), namespace="ns", lease=30)
    for key in (b"\xff\xfe not utf-8", "nul\x00inside", "x" * 513, "", "lone\ud800"):
        with pytest.raises(InvalidKey):
            ledger.claim(key)  # type: ignore[arg-type]
    assert set(server_client.keys()) <= {b"rill:store-id"}  # the identity, made at open


def test_the_cluster_spreads_jobs_and_keeps_each_in_one_slot(
    make_store: MakeStore, cluster_url: str, cluster_admin: redis.cluster.RedisCluster
) -> None:
    namespace = f"spread-{uuid.uuid4().hex[:8]}"  # the cluster is shared by the session
    ledger = Ledger(make_store(cluster_url), namespace=namespace, lease=30)
    keys = [f"seg-{i}" for i in range(30)] + hostile_keys()
    for key in keys:
        claim = ledger.claim(key)
        assert isinstance(claim, Claim)
        claim.commit(key)
    owners = set()
    for key in keys:
        names = job_keys(_job_id(namespace, key))
        assert len({key_slot(name.encode()) for name in names}) == 1
        node = cluster_admin.get_node_from_key(names[0])  # type: ignore[no-untyped-call]
        owners.add(node.name)
        assert cluster_admin.exists(*names) == 2
    assert len(owners) == 3  # the jobs really are spread over the three masters
    for key in keys:
        replay = ledger.claim(key)
        assert isinstance(replay, Replay) and replay.result() == key


def test_foreign_data_under_our_key_is_a_protocol_error(
    make_store: MakeStore, private_redis: RedisServer, server_client: redis.Redis
) -> None:
    ledger = Ledger(make_store(with_query(private_redis.url, QUIET)), namespace="ns", lease=30)
    job, _ = job_keys(_job_id("ns", "k"))
    server_client.set(job, "not a hash")
    with pytest.raises(StoreProtocolError, match="WRONGTYPE"):
        ledger.claim("k")
    server_client.delete(job)
    server_client.hset(job, mapping={"state": "processing", "fence": "one"})
    with pytest.raises(StoreProtocolError, match="malformed record"):
        ledger.status("k")


def test_job_ids_that_are_not_digests_are_refused(make_store: MakeStore, redis_url: str) -> None:
    store = make_store(redis_url)
    for bad in ("abc", "}" + "0" * 63, "A" * 64, "0" * 65):
        with pytest.raises(StoreProtocolError, match="not a SHA-256 hex digest"):
            store.status(bad)
