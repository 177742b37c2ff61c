"""Store URLs: which client to build, and the options that are ours rather than redis-py's.

    redis://[user:password@]host:port/db[?options]      one server (or a primary)
    rediss://…                                           the same over TLS
    redis+cluster://[user:password@]host:port[?options]  Redis Cluster, any node as seed
    rediss+cluster://…                                   Cluster over TLS

Options of ours: ``durability=warn|require|ignore`` (see ``_deployment``). Every other
query option goes to redis-py (``socket_timeout``, ``ssl_ca_certs``, ``client_name``…).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from rill_executor import ConfigError

from ._deployment import Durability

__all__ = ["StoreUrl", "parse_url"]

_SCHEMES = {
    "redis": ("redis", False),
    "rediss": ("rediss", False),
    "redis+cluster": ("redis", True),
    "rediss+cluster": ("rediss", True),
}


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
    where = f"{parts.hostname or 'localhost'}:{port}" + (" (cluster)" if cluster else "")
    client_url = urlunsplit(
        (client_scheme, parts.netloc, parts.path, urlencode(rest), parts.fragment)
    )
    return StoreUrl(client_url, cluster, durability, where)
