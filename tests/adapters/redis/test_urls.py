"""Opening the store by URL through the core's registry, and the package's public names."""

from __future__ import annotations

import asyncio
import inspect
import uuid
import warnings
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

import rill_executor_redis
from rill_executor import AsyncLedger, ConfigError, Ledger, open_async_store, open_store
from rill_executor.store import AsyncStore, Store, StoreUnavailable
from rill_executor_redis import AsyncRedisStore, RedisStore
from rill_executor_redis._url import redis_py_options
from rill_executor_redis.testing import RedisServer, free_port

from ..url_options import assert_refusal
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


# -- an option no client takes -------------------------------------------------------------

HOSTILE = ["bogus", "socket_timout", "\x00\x1b[31mred", "\u202eevil", "é" * 200]


@pytest.fixture(scope="module")
def untouched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A server of the module's own, that no refused store may connect to."""
    server = RedisServer(tmp_path_factory.mktemp("untouched"))
    yield server
    server.stop()


def _connections(server: RedisServer) -> int:
    with server.client() as client:
        return int(client.info("stats")["total_connections_received"])


def _open_async(url: str) -> None:
    asyncio.run(open_async_store(url).close())


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("opener", [open_store, _open_async], ids=["sync", "async"])
def test_an_option_no_client_takes_is_refused_at_open_before_any_connection(
    untouched: RedisServer, scheme: str, opener: Callable[[str], object]
) -> None:
    before = _connections(untouched)
    for name in HOSTILE:
        url = f"{scheme}://127.0.0.1:{untouched.port}?{quote(name)}=1&socket_timeout=2"
        with pytest.raises(ConfigError) as err:
            opener(url)  # durability=warn: an open that got past the check would connect
        assert_refusal(
            str(err.value),
            name,
            f"the {scheme}:// store URL",
            lists=("durability (rill-executor-redis)", "socket_timeout"),
            docs="docs/redis.md",
        )
    assert _connections(untouched) == before + 1  # _connections' own: no store connected
    with untouched.client() as client:
        assert client.dbsize() == 0


def test_a_typo_gets_the_close_name() -> None:
    with pytest.raises(ConfigError, match=r"\(did you mean 'socket_timeout'\?\)"):
        open_store(f"redis://127.0.0.1:{free_port()}/0?socket_timout=3&{QUIET}")


@pytest.mark.parametrize("name", ["retry", "redis_connect_func"])
def test_the_adapters_own_client_settings_are_refused(name: str) -> None:
    for opener in OPENERS:
        with pytest.raises(ConfigError, match=f"unknown option '{name}'"):
            opener(f"redis://127.0.0.1:{free_port()}/0?{name}=x&{QUIET}")


def test_an_option_the_sync_cluster_client_drops_is_refused_there_only() -> None:
    """redis-py's synchronous Cluster client passes only some options on to its nodes, and
    drops the others without a word; its asyncio one takes ``health_check_interval``."""
    url = f"redis+cluster://127.0.0.1:{free_port()}?health_check_interval=30&{QUIET}"
    with pytest.raises(ConfigError, match=r"unknown option 'health_check_interval'.*Cluster"):
        open_store(url)
    asyncio.run(AsyncRedisStore.from_url(url).close())  # opens nothing: accepted


@pytest.mark.parametrize("tls", [False, True], ids=["redis", "rediss"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_every_option_let_through_is_one_redis_py_takes(tls: bool, is_async: bool) -> None:
    """Each name the check lets through reaches a connection redis-py builds without a
    TypeError: the names read from redis-py are ones it takes."""
    scheme = "rediss" if tls else "redis"
    pool_class = redis.asyncio.ConnectionPool if is_async else redis.ConnectionPool
    pool_own = set(inspect.signature(pool_class.__init__).parameters)
    taken = redis_py_options(cluster=False, tls=tls, is_async=is_async)
    assert {"socket_timeout", "client_name", "health_check_interval"} <= taken
    assert ("ssl_ca_certs" in taken) is tls
    for name in sorted(taken - pool_own):
        pool = pool_class.from_url(f"{scheme}://127.0.0.1:{free_port()}/0")
        pool.connection_kwargs[name] = None
        try:
            with warnings.catch_warnings():  # lib_name…: deprecated, still taken
                warnings.simplefilter("ignore", DeprecationWarning)
                pool.make_connection()
        except TypeError as exc:
            assert "unexpected keyword argument" not in str(exc), name


def test_without_redis_pys_list_the_sync_cluster_takes_what_its_nodes_take(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(redis.cluster, "REDIS_ALLOWED_KEYS")
    redis_py_options.cache_clear()
    try:
        fallback = redis_py_options(cluster=True, tls=False, is_async=False)
        assert {"socket_timeout", "client_name", "health_check_interval"} <= fallback
        assert "retry" not in fallback and "bogus" not in fallback
    finally:
        monkeypatch.undo()
        redis_py_options.cache_clear()
    assert "health_check_interval" not in redis_py_options(cluster=True, tls=False, is_async=False)
