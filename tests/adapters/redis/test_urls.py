"""Opening the store by URL through the core's registry, and the package's public names."""

from __future__ import annotations

import asyncio
import uuid
from importlib.metadata import entry_points
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

import rill_executor_redis
from rill_executor import AsyncLedger, ConfigError, Ledger, open_async_store, open_store
from rill_executor.store import AsyncStore, Store, StoreUnavailable
from rill_executor_redis import AsyncRedisStore, RedisStore
from rill_executor_redis.testing import RedisServer, free_port

from .conftest import QUIET, with_query

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
    with pytest.raises(StoreUnavailable) as err:  # at open, or at the first call
        Ledger(url, namespace="down", lease=30).claim("k")
    assert "is not reachable" in str(err.value)
    assert "s3cret-pw" not in str(err.value)
    with pytest.raises(StoreUnavailable):
        open_store(url.replace(QUIET, "durability=warn"))  # the check at open needs Redis


OPENERS = [open_store, open_async_store, RedisStore.from_url, AsyncRedisStore.from_url]


@pytest.mark.parametrize("scheme", ["redis", "redis+cluster"])
def test_a_bad_redis_py_option_names_the_option_and_a_valid_value(scheme: str) -> None:
    url = f"{scheme}://127.0.0.1:{free_port()}?socket_timeout=abc&{QUIET}"
    for opener in OPENERS:
        with pytest.raises(ConfigError, match=r"socket_timeout='abc' .* socket_timeout=5"):
            opener(url)


def test_a_cluster_url_needs_a_node() -> None:
    with pytest.raises(ConfigError, match=r"names no node.*redis\+cluster://node-1"):
        open_store(f"redis+cluster://?{QUIET}")


def _first_claim(url: str) -> None:
    async def claim() -> None:
        async with AsyncLedger(url, namespace=f"o{uuid.uuid4().hex[:12]}", lease=30) as ledger:
            await ledger.claim("k")

    asyncio.run(claim())


@pytest.mark.parametrize("scheme", ["redis", "redis+cluster"])
def test_a_refused_connection_at_open_says_where_and_how_to_check(scheme: str) -> None:
    port = free_port()
    url = f"{scheme}://127.0.0.1:{port}"
    # The async store opens (an app that opens it at import starts), and says so at its
    # first call, its durability check included.
    asyncio.run(open_async_store(url).close())
    for open_it in (open_store, _first_claim, lambda u: _first_claim(with_query(u, QUIET))):
        with pytest.raises(StoreUnavailable) as err:
            open_it(url)
        message = str(err.value)
        assert f"Redis at 127.0.0.1:{port}" in message and "is not reachable" in message
        assert f"redis-cli -h 127.0.0.1 -p {port} ping" in message
        assert "nothing was sent" in message and "applied" not in message


def test_a_cluster_url_on_a_standalone_server_is_a_config_error(redis_url: str) -> None:
    url = f"redis+cluster://{urlsplit(redis_url).netloc}?{QUIET}"
    for open_it in (open_store, _first_claim):
        with pytest.raises(ConfigError, match=r"is not a Redis Cluster node.*use redis://"):
            open_it(url)


def test_a_cluster_that_does_not_cover_its_slots_says_how_to_check_it(tmp_path: Path) -> None:
    node = RedisServer(tmp_path, "--cluster-enabled", "yes", "--cluster-config-file", "n.conf")
    try:  # a cluster node that was never given slots
        url = f"redis+cluster://127.0.0.1:{node.port}?{QUIET}"
        for open_it in (open_store, _first_claim):
            with pytest.raises(StoreUnavailable) as err:
                open_it(url)
            assert "slots are not covered" in str(err.value)
            assert f"redis-cli --cluster check 127.0.0.1:{node.port}" in str(err.value)
    finally:
        node.stop()
