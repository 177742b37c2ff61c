"""Opening the store by URL through the core's registry, and the package's public names."""

from __future__ import annotations

import asyncio
from importlib.metadata import entry_points

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

import rill_executor_redis
from rill_executor import ConfigError, Ledger, open_async_store, open_store
from rill_executor.store import AsyncStore, Store, StoreUnavailable
from rill_executor_redis import AsyncRedisStore, RedisStore

from .conftest import QUIET, free_port, with_query

SCHEMES = {"redis", "rediss", "redis+cluster", "rediss+cluster"}


def test_public_names_are_pinned() -> None:
    assert rill_executor_redis.__all__ == [
        "AsyncRedisStore",
        "Deployment",
        "Durability",
        "DurabilityWarning",
        "NodeDurability",
        "RedisStore",
        "UnsafeDeployment",
        "job_keys",
        "open_async_redis_store",
        "open_redis_store",
    ]


def test_entry_points_name_every_scheme() -> None:
    for group in ("rill_executor.stores", "rill_executor.async_stores"):
        assert {ep.name for ep in entry_points(group=group)} >= SCHEMES


def test_standalone_urls(redis_url: str) -> None:
    store = open_store(redis_url)
    assert isinstance(store, RedisStore) and isinstance(store, Store)
    assert isinstance(store.client, redis.Redis)
    store.close()
    async_store = open_async_store(redis_url)
    assert isinstance(async_store, AsyncRedisStore) and isinstance(async_store, AsyncStore)
    assert isinstance(async_store.client, redis.asyncio.Redis)
    asyncio.run(async_store.close())


def test_cluster_urls(cluster_url: str) -> None:
    store = open_store(cluster_url)
    assert isinstance(store, RedisStore)
    assert isinstance(store.client, redis.cluster.RedisCluster)
    store.close()
    async_store = open_async_store(cluster_url)
    assert isinstance(async_store, AsyncRedisStore)
    assert isinstance(async_store.client, redis.asyncio.cluster.RedisCluster)
    asyncio.run(async_store.close())


def test_redis_py_options_pass_through(redis_url: str) -> None:
    store = RedisStore.from_url(with_query(redis_url, "socket_timeout=3&client_name=rill-x"))
    kwargs = store.client.connection_pool.connection_kwargs  # type: ignore[union-attr]
    assert kwargs["socket_timeout"] == 3 and kwargs["client_name"] == "rill-x"
    assert kwargs["socket_connect_timeout"] == 5.0  # the adapter's default stays
    store.close()


def test_bad_urls_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unsupported Redis store URL scheme"):
        RedisStore.from_url("redis+sentinel://127.0.0.1:26379")
    with pytest.raises(ConfigError, match="invalid port"):
        RedisStore.from_url("redis://127.0.0.1:notaport/0")


def test_an_unreachable_server_is_unavailable_and_the_password_stays_secret() -> None:
    url = f"redis://user:s3cret-pw@127.0.0.1:{free_port()}/0?{QUIET}"
    ledger = Ledger(url, namespace="down", lease=30)
    with pytest.raises(StoreUnavailable) as err:
        ledger.claim("k")
    assert "did not answer the claim" in str(err.value)
    assert "s3cret-pw" not in str(err.value)
    with pytest.raises(StoreUnavailable):
        open_store(url.replace(QUIET, "durability=warn"))  # the check at open needs Redis
