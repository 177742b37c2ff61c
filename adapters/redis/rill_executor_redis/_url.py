"""Store URLs: which client to build, and the options that are ours rather than redis-py's.

    redis://[user:password@]host:port/db[?options]      one server (or a primary)
    rediss://…                                           the same over TLS
    redis+cluster://[user:password@]host:port[?options]  Redis Cluster, any node as seed
    rediss+cluster://…                                   Cluster over TLS

Options of ours: ``durability=warn|require|ignore`` (see ``_deployment``). Every other
query option goes to redis-py (``socket_timeout``, ``ssl_ca_certs``, ``client_name``…),
checked here before any client exists, so that a mistake is a ``ConfigError`` naming the
option: a name redis-py's client for the URL does not take (``redis_py_options``), and a
value redis-py's own parsers refuse.

The names a client takes are read from redis-py itself, for each client: a standalone
client passes its URL's options on to its connection pool and, at the first connection,
to each connection (both constructors' keyword arguments); the asyncio Cluster client
takes its own constructor's; the synchronous Cluster client passes on to its nodes only
the names of ``redis.cluster.REDIS_ALLOWED_KEYS`` (read under the adapter's ``redis<9``
bound; without it, the keywords of ``redis.Redis``, each node's client), to each node's
pool and connections, and drops the others without a word. Two are refused although
redis-py knows them: ``retry`` and ``redis_connect_func`` are the adapter's (its resend
policy, see ``_client``; its on-connect hook), and a URL's text would replace them.
"""

from __future__ import annotations

import enum
import functools
import inspect
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.connection
import redis.cluster
import redis.connection
from redis.connection import URL_QUERY_ARGUMENT_PARSERS, to_bool

from rill_executor import ConfigError
from rill_executor.store import unknown_url_option

__all__ = ["Durability", "StoreUrl", "parse_url", "redis_py_options"]

_OURS = ("durability",)
_THE_ADAPTERS = frozenset({"retry", "redis_connect_func"})  # see the module docs

_SCHEMES = {
    "redis": ("redis", False),
    "rediss": ("rediss", False),
    "redis+cluster": ("redis", True),
    "rediss+cluster": ("rediss", True),
}


_EXAMPLES = {  # what the numeric redis-py options take, with a valid value
    "db": "a database number, e.g. db=0",
    "socket_timeout": "a number of seconds, e.g. socket_timeout=5",
    "socket_connect_timeout": "a number of seconds, e.g. socket_connect_timeout=5",
    "timeout": "a number of seconds, e.g. timeout=5",
    "health_check_interval": "whole seconds, e.g. health_check_interval=30",
    "max_connections": "a whole number, e.g. max_connections=50",
    "socket_read_size": "a number of bytes, e.g. socket_read_size=65536",
    "protocol": "2 or 3, e.g. protocol=3",
}


class Durability(enum.StrEnum):
    """What to do when the deployment can lose acknowledged writes (see ``_deployment``)."""

    WARN = "warn"
    REQUIRE = "require"
    IGNORE = "ignore"


@dataclass(frozen=True, slots=True)
class StoreUrl:
    client_url: str  # for redis-py's from_url: plain redis:// or rediss://, our options removed
    cluster: bool
    durability: Durability
    where: str  # host:port, for messages: never the credentials


def parse_url(url: str, *, is_async: bool = False) -> StoreUrl:
    """The store URL ``url`` checked for the synchronous client, or (``is_async``) the
    asyncio one: each takes redis-py options of its own."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise ConfigError(
            f"unsupported Redis store URL scheme {scheme!r}; use redis://, rediss://,"
            " redis+cluster:// or rediss+cluster://"
        )
    client_scheme, cluster = _SCHEMES[scheme]
    if cluster and not parts.hostname:
        raise ConfigError(
            f"the {scheme}:// store URL names no node; give one node of the cluster as its"
            f" seed, e.g. {scheme}://node-1.internal:6379"
        )
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {name: value for name, value in query if name == "durability"}
    rest = [(name, value) for name, value in query if name != "durability"]
    try:
        durability = Durability(ours.get("durability", Durability.WARN.value))
    except ValueError:
        raise ConfigError(
            f"durability={ours['durability']!r} in the Redis store URL; use warn, require or ignore"
        ) from None
    try:
        port = parts.port or 6379
    except ValueError:
        raise ConfigError(
            f"the Redis store URL for host {parts.hostname!r} has an invalid port"
        ) from None
    taken = redis_py_options(cluster=cluster, tls=client_scheme == "rediss", is_async=is_async)
    for name, value in rest:
        if name not in taken:
            raise unknown_url_option(
                name,
                f"the {scheme}:// store URL",
                ("rill-executor-redis", _OURS),
                (f"redis-py's {_client_name(cluster, is_async)}", taken),
                "docs/redis.md (URLs)",
            )
        _check_option(name, value)
    where = f"{parts.hostname or 'localhost'}:{port}" + (" (cluster)" if cluster else "")
    client_url = urlunsplit(
        (client_scheme, parts.netloc, parts.path, urlencode(rest), parts.fragment)
    )
    return StoreUrl(client_url, cluster, durability, where)


def _check_option(name: str, value: str) -> None:
    """The redis-py option ``name=value`` as redis-py will parse it; ConfigError if it cannot."""
    parser = URL_QUERY_ARGUMENT_PARSERS.get(name)
    if not callable(parser) or parser is to_bool:  # redis-py takes any text for these
        return
    try:
        parser(value)
    except (TypeError, ValueError):
        valid = _EXAMPLES.get(name, "a value redis-py's from_url accepts for it")
        raise ConfigError(
            f"{name}={value!r} in the Redis store URL is not valid: give {valid}"
        ) from None


def _client_name(cluster: bool, is_async: bool) -> str:
    client = "Cluster client" if cluster else "client"
    return f"asyncio {client}" if is_async else client


@functools.cache
def redis_py_options(*, cluster: bool, tls: bool, is_async: bool) -> frozenset[str]:
    """The query options redis-py's client for a URL takes (see the module docs), less the
    adapter's own."""
    if cluster and is_async:
        names = _keywords(redis.asyncio.cluster.RedisCluster)
    else:
        module = redis.asyncio.connection if is_async else redis.connection
        connection = module.SSLConnection if tls else module.Connection
        names = _keywords(module.ConnectionPool) | _keywords(connection)
        if cluster:  # each node's pool gets those the Cluster client passes on
            names &= _passed_to_nodes()
    return frozenset(names - _THE_ADAPTERS)


def _passed_to_nodes() -> set[str]:
    """The options redis-py's synchronous Cluster client passes on to its nodes' pools."""
    allowed = getattr(redis.cluster, "REDIS_ALLOWED_KEYS", None)
    disabled = getattr(redis.cluster, "KWARGS_DISABLED_KEYS", ())
    if not isinstance(allowed, tuple | list | set | frozenset) or not allowed:
        return _keywords(redis.Redis)  # each node's client
    return {str(name) for name in allowed} - {str(name) for name in disabled}


def _keywords(cls: type) -> set[str]:
    """The keyword arguments ``cls(...)`` takes: its ``__init__``'s, and those of each base
    class's ``__init__`` that it passes its ``**kwargs`` on to."""
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = list(inspect.signature(init).parameters.values())[1:]  # self
        names.update(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return names
