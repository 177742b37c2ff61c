"""redis-py clients for a store URL, with the adapter's timeouts and resend policy.

Resend policy: redis-py never sends an operation's script a second time. A connection
error or a timeout leaves it open whether the script ran, and only the ledger knows how
to resend safely: it resends a claim, heartbeat or finish once, as a resend, and a store
that finds the resend's own attempt already applied answers as the first send would have.
A resend hidden inside the driver would instead look like a second caller (a claim would
answer in progress to its own attempt, and the work would wait out the lease). So a
connection error surfaces at once as ``StoreUnavailable``.

Cluster clients still follow ``MOVED`` and ``ASK`` (the script did not run on the node
that redirected it) and refresh their slot map on the next call after a connection
error; they never re-execute a call that failed.

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

from ._url import StoreUrl

__all__ = ["AsyncClient", "SyncClient", "async_client", "sync_client"]

SyncClient = redis.Redis | redis.cluster.RedisCluster
AsyncClient = redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster

_RESENDS = 0  # see the module docs: the ledger resends, knowing it does
_SOCKET_TIMEOUT = 10.0
_CONNECT_TIMEOUT = 5.0


def sync_client(url: StoreUrl) -> SyncClient:
    retry = redis.retry.Retry(NoBackoff(), _RESENDS)
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
    retry = redis.asyncio.retry.Retry(NoBackoff(), _RESENDS)
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
