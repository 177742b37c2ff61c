"""Store URLs: which client to build, and the options that are ours rather than redis-py's.

    redis://[user:password@]host:port/db[?options]      one server (or a primary)
    rediss://…                                           the same over TLS
    redis+cluster://[user:password@]host:port[?options]  Redis Cluster, any node as seed
    rediss+cluster://…                                   Cluster over TLS

Options of ours: ``durability=warn|require|ignore`` (see ``_deployment``). Every other
query option goes to redis-py (``socket_timeout``, ``ssl_ca_certs``, ``client_name``…),
checked here with redis-py's own parsers so that a bad value is a ``ConfigError`` naming
the option, before any client exists.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from redis.connection import URL_QUERY_ARGUMENT_PARSERS, to_bool

from rill_executor import ConfigError

__all__ = ["Durability", "StoreUrl", "parse_url"]

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


def parse_url(url: str) -> StoreUrl:
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
    for name, value in rest:
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
