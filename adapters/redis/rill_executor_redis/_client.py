"""redis-py clients for a store URL, with the adapter's timeouts and resend policy.

Resend policy: a command is sent again once, at once, after a *connection* error (the
server or the network closed the connection: a restart, ``CLIENT KILL``, an idle timeout
of a proxy) and never after a timeout; Cluster clients also retry once after refreshing
their slot map (a failover, ``CLUSTERDOWN``). A lost reply leaves it open whether the
first send was applied, and a resend of an applied call is harmless by construction:
a resent claim finds its own attempt holding the lease and answers in progress (the job
runs after the lease, never twice), a resent heartbeat extends the lease again, a resent
commit is rejected as stale and the committed result is replayed to the next duplicate.

Timeouts: 5 s to connect, 10 s for a reply, unless the URL says otherwise: a dead peer
ends in ``StoreUnavailable`` instead of a call that hangs.
"""

from __future__ import annotations

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.retry
import redis.cluster
import redis.retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from ._url import StoreUrl

__all__ = ["AsyncClient", "SyncClient", "async_client", "sync_client"]

SyncClient = redis.Redis | redis.cluster.RedisCluster
AsyncClient = redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster

_RESENDS = 1
_SOCKET_TIMEOUT = 10.0
_CONNECT_TIMEOUT = 5.0


def sync_client(url: StoreUrl) -> SyncClient:
    retry = redis.retry.Retry(NoBackoff(), _RESENDS, supported_errors=(RedisConnectionError,))
    if url.cluster:
        return redis.cluster.RedisCluster.from_url(
            url.client_url,
            retry=retry,
            socket_timeout=_SOCKET_TIMEOUT,
            socket_connect_timeout=_CONNECT_TIMEOUT,
        )
    return redis.Redis.from_url(
        url.client_url,
        retry=retry,
        socket_timeout=_SOCKET_TIMEOUT,
        socket_connect_timeout=_CONNECT_TIMEOUT,
    )


def async_client(url: StoreUrl) -> AsyncClient:
    retry = redis.asyncio.retry.Retry(
        NoBackoff(), _RESENDS, supported_errors=(RedisConnectionError,)
    )
    if url.cluster:
        return redis.asyncio.cluster.RedisCluster.from_url(
            url.client_url,
            retry=retry,
            socket_timeout=_SOCKET_TIMEOUT,
            socket_connect_timeout=_CONNECT_TIMEOUT,
        )
    return redis.asyncio.Redis.from_url(
        url.client_url,
        retry=retry,
        socket_timeout=_SOCKET_TIMEOUT,
        socket_connect_timeout=_CONNECT_TIMEOUT,
    )
