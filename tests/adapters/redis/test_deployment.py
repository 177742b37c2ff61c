"""The durability check: what the deployment promises, and the warning when it can lose
acknowledged writes (a lost claim or commit means a duplicate runs the work again)."""

from __future__ import annotations

import asyncio
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from rill_executor import Claim, ConfigError, Ledger, open_async_store, open_store
from rill_executor._recheck import RECHECK_AFTER
from rill_executor.store import Recheck
from rill_executor.testing import LedgerDriver, is_claim
from rill_executor_redis import (
    AsyncRedisStore,
    DurabilityWarning,
    NodeDurability,
    RedisStore,
    UnsafeDeployment,
)
from rill_executor_redis.testing import RedisServer
from tests.clocks import RECHECK

from .conftest import with_query


@pytest.fixture
def volatile_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A server like the machine's: no AOF."""
    server = RedisServer(tmp_path, "--appendonly", "no")
    yield server
    server.stop()


def test_a_durable_server_opens_silently_and_reports_itself(private_redis: RedisServer) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store = open_store(private_redis.url)
    assert isinstance(store, RedisStore)
    deployment = store.deployment()
    assert deployment.nodes == (
        NodeDurability(f"127.0.0.1:{private_redis.port}", True, "always", "noeviction"),
    )
    assert deployment.safe and deployment.risks == []
    store.close()


def test_without_aof_opening_warns(volatile_redis: RedisServer) -> None:
    with pytest.warns(DurabilityWarning, match="appendonly is no") as record:
        open_store(volatile_redis.url).close()
    assert "duplicate runs the work again" in str(record[0].message)
    with pytest.warns(DurabilityWarning, match="appendonly is no"):
        store = open_async_store(volatile_redis.url)
    asyncio.run(store.close())


def _warned_at(record: list[warnings.WarningMessage]) -> list[tuple[str, int]]:
    return [(w.filename, w.lineno) for w in record if w.category is DurabilityWarning]


def test_the_warning_points_at_the_line_that_opened_the_store(volatile_redis: RedisServer) -> None:
    """Not at the library's own line: however the store is opened, a warning names the
    caller's file and line, where a filter or a fix belongs."""
    url = volatile_redis.url
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno
        open_store(url).close()
        Ledger(url, namespace="warned").close()
        RedisStore.from_url(url).close()
        async_store = open_async_store(url)
    assert isinstance(async_store, AsyncRedisStore)
    assert _warned_at(record) == [(__file__, line + n) for n in (1, 2, 3, 4)]

    async def check() -> int:
        line = sys._getframe().f_lineno
        await async_store.check_durability()
        await async_store.close()
        return line + 1

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        checked_at = asyncio.run(check())
    assert _warned_at(record) == [(__file__, checked_at)]


@pytest.mark.parametrize(
    ("setting", "value", "risk"),
    [
        ("maxmemory-policy", "allkeys-lru", "maxmemory-policy is allkeys-lru"),
        ("maxmemory-policy", "volatile-ttl", "maxmemory-policy is volatile-ttl"),
        ("appendfsync", "no", "appendfsync is no"),
    ],
)
def test_evicting_or_unsynced_servers_warn(
    private_redis: RedisServer, setting: str, value: str, risk: str
) -> None:
    with private_redis.client() as admin:
        admin.config_set(setting, value)
    with pytest.warns(DurabilityWarning, match=risk):
        open_store(private_redis.url).close()


def test_require_refuses_and_ignore_skips(volatile_redis: RedisServer) -> None:
    with pytest.raises(UnsafeDeployment, match="appendonly is no") as err:
        open_store(with_query(volatile_redis.url, "durability=require"))
    assert isinstance(err.value, ConfigError)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        open_store(with_query(volatile_redis.url, "durability=ignore")).close()
    with pytest.raises(ConfigError, match="durability='maybe'"):
        open_store(with_query(volatile_redis.url, "durability=maybe"))


def test_async_store_checks_on_request(volatile_redis: RedisServer) -> None:
    async def check() -> None:
        store = AsyncRedisStore.from_url(volatile_redis.url)  # no I/O, no check
        deployment = await store.deployment()
        assert [node.appendonly for node in deployment.nodes] == [False]
        with pytest.warns(DurabilityWarning):
            await store.check_durability()
        with pytest.raises(UnsafeDeployment):
            await store.check_durability("require")
        await store.close()

    asyncio.run(check())


def test_config_disabled_falls_back_to_info(tmp_path: Path) -> None:
    server = RedisServer(tmp_path, "--appendonly", "yes", "--rename-command", "CONFIG", "")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            store = open_store(server.url)
        assert store.deployment().nodes == (  # type: ignore[attr-defined]
            NodeDurability(f"127.0.0.1:{server.port}", True, None, "noeviction"),
        )
        store.close()
    finally:
        server.stop()


def test_the_cluster_reports_every_master(cluster_url: str) -> None:
    store = RedisStore.from_url(cluster_url)
    nodes = store.deployment().nodes
    assert len(nodes) == 3 and all(node.appendonly is False for node in nodes)
    with pytest.warns(DurabilityWarning, match="(appendonly is no.*){3}"):
        open_store(cluster_url.replace("durability=ignore", "durability=warn")).close()
    store.close()

    async def check() -> None:
        async_store = AsyncRedisStore.from_url(cluster_url)
        assert len((await async_store.deployment()).nodes) == 3
        await async_store.close()

    asyncio.run(check())


def test_without_aof_a_restart_forgets_a_claim_and_the_work_runs_twice(
    volatile_redis: RedisServer,
) -> None:
    """Why the warning exists: the hazard, shown on the kind of server it warns about."""
    with pytest.warns(DurabilityWarning):
        ledger = Ledger(volatile_redis.url, namespace="hazard", lease=30)
    first = ledger.claim("charge-card-42")
    volatile_redis.restart()  # SIGKILL: nothing was on disk
    second = ledger.claim("charge-card-42")
    assert type(first).__name__ == type(second).__name__ == "Claim"  # two owners of one job
    ledger.close()


def _evicting(server: RedisServer, on: bool) -> None:
    """Turn eviction on (a small maxmemory, allkeys-lru) or off, then close the store's
    connections: its next call connects afresh, and the store checks again (a new
    connection makes a check due a second after the last one at the earliest)."""
    time.sleep(RECHECK_AFTER)
    with server.client() as admin:
        admin.config_set("maxmemory-policy", "allkeys-lru" if on else "noeviction")
        admin.config_set("maxmemory", "4mb" if on else "0")
        admin.client_kill_filter(_type="normal", skipme=True)


@pytest.mark.real_clock(RECHECK)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_store_made_unsafe_while_open_refuses_claims_until_safe_again(
    private_redis: RedisServer, mode: str
) -> None:
    """Invariant 21: opened safe with durability=require, then the server starts evicting:
    after the store's next new connection, claims are refused; safe again, they run."""
    url = with_query(private_redis.url, "durability=require")
    driver = LedgerDriver(url, mode)
    try:
        ledger = driver.ledger("payments", lease=30)
        claim = ledger.claim("order-1")
        assert is_claim(claim)
        _evicting(private_redis, True)
        assert ledger.status("order-1") is not None  # reads still answer, on a new connection
        with pytest.raises(UnsafeDeployment, match="maxmemory-policy is allkeys-lru"):
            ledger.claim("order-2")
        with pytest.raises(UnsafeDeployment):  # until a check finds it safe: no probe here
            ledger.claim("order-2")
        claim.commit({"charged": 12})  # an attempt under way still records its outcome
        _evicting(private_redis, False)
        assert ledger.status("order-1") is not None
        again = ledger.claim("order-2")
        assert is_claim(again)
        again.commit({"charged": 3})
    finally:
        driver.close()


@pytest.mark.real_clock(RECHECK)
def test_a_store_that_turns_unsafe_warns_with_durability_warn(private_redis: RedisServer) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ledger = Ledger(private_redis.url, namespace="payments")
    with ledger:
        _evicting(private_redis, True)
        assert ledger.status("order-1") is None
        with pytest.warns(DurabilityWarning, match="maxmemory-policy is allkeys-lru"):
            claim = ledger.claim("order-1")
        assert isinstance(claim, Claim)
        claim.commit("done")


def test_the_check_comes_due_again_every_30_s() -> None:
    now = [0.0]
    recheck = Recheck("require", "; ".join, clock=lambda: now[0])
    assert not recheck.due()
    now[0] = 29.9
    assert not recheck.due()
    now[0] = 30.0
    assert recheck.due()
    unsafe = NodeDurability("redis:6379", True, "everysec", "allkeys-lru")
    with pytest.raises(UnsafeDeployment, match="maxmemory-policy is allkeys-lru"):
        recheck.checked(unsafe.risks())
    assert not recheck.due()
    with pytest.raises(UnsafeDeployment):
        recheck.refuse()
    recheck.connected()
    assert not recheck.due()  # a second after the last check at the earliest
    now[0] = 31.0
    assert recheck.due()
    recheck.checked(NodeDurability("redis:6379", True, "everysec", "noeviction").risks())
    recheck.refuse()  # safe again
