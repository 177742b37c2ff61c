"""``wrap_errors``: the one place where redis-py's errors become rill-executor's.

    redis-py                                             rill_executor
    connection refused, host not found                   StoreUnavailable: not reachable,
                                                         nothing was sent (applied=False)
    ClusterDown / MasterDown, TryAgain, READONLY, OOM,   StoreUnavailable: refused, nothing
    NOPERM, BUSY                                         written (applied=False)
    ConnectionError (incl. BusyLoading, Authentication), StoreUnavailable: may have been
    TimeoutError, RedisClusterException, OSError,        applied (applied=None)
    AttributeError from a connection closed under a
    call (redis-py's asyncio Cluster client)
    RedisClusterException "cluster mode is not enabled"  ConfigError: use redis://
    any other ResponseError (WRONGTYPE, script errors)   StoreProtocolError

The scripts are atomic, but a reply lost on the wire leaves the caller unsure whether the
operation was applied; the message says so. redis-py does not resend (see ``_client``).
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager

from redis.exceptions import (
    ClusterError,
    NoPermissionError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from rill_executor import ConfigError
from rill_executor.store import StoreError, StoreProtocolError, StoreUnavailable

__all__ = ["REDIS_ERRORS", "translate", "wrap_errors"]

REDIS_ERRORS = (RedisError, RedisClusterException, OSError)
"""What a redis-py call raises when Redis, the network or the cluster fails it."""

_UNKNOWN_OUTCOME = (
    "it may or may not have been applied. Retrying is safe: no claim or commit is ever"
    " applied twice"
)
_NOT_A_CLUSTER = "cluster mode is not enabled"


@contextmanager
def wrap_errors(operation: str, where: str, job_id: str = "") -> Iterator[None]:
    """Run a Redis call; re-raise its failure as a ``StoreError`` (``raise … from exc``)."""
    try:
        yield
    except REDIS_ERRORS as exc:
        raise translate(exc, operation, where, job_id) from exc


def translate(
    exc: BaseException, operation: str, where: str, job_id: str = ""
) -> StoreError | ConfigError:
    what = f"{operation} of job {job_id[:16]}" if job_id else operation
    detail = f"{type(exc).__name__}: {exc}"
    if _unreachable(exc):
        return StoreUnavailable(
            f"Redis at {where} is not reachable ({detail}); nothing was sent. Check that a"
            f" Redis server is running and listening there ({_ping(where)}) and that the"
            " store URL names its host and port; start it if it is not (redis-server, or"
            " your service manager)",
            applied=False,
        )
    if isinstance(exc, RedisClusterException) and _NOT_A_CLUSTER in str(exc).lower():
        return ConfigError(
            f"Redis at {where} is not a Redis Cluster node ({detail}). For a standalone"
            " server use redis://host:port/0 (or rediss://); for a cluster, point"
            " redis+cluster:// at one of its nodes"
        )
    if isinstance(exc, (RedisConnectionError, RedisTimeoutError, OSError, AttributeError)):
        return StoreUnavailable(
            f"Redis at {where} did not answer the {what} ({detail}); {_UNKNOWN_OUTCOME}"
        )
    if isinstance(exc, OutOfMemoryError):
        return StoreUnavailable(
            f"Redis at {where} refused the {what}: it is at maxmemory ({detail}). Nothing was"
            " written; free memory or raise maxmemory (keep maxmemory-policy noeviction)",
            applied=False,
        )
    if isinstance(exc, ReadOnlyError):
        return StoreUnavailable(
            f"Redis at {where} is a read-only replica ({detail}), e.g. during a failover."
            " Nothing was written; point the store URL at the primary or retry later",
            applied=False,
        )
    if isinstance(exc, NoPermissionError):
        return StoreUnavailable(
            f"Redis at {where} refused the {what} ({detail}): the ACL user needs +evalsha,"
            " +script, +time and read/write access to keys rill:*",
            applied=False,
        )
    if isinstance(exc, (ClusterError, TryAgainError)) or _busy(exc):
        return StoreUnavailable(
            f"Redis at {where} cannot serve the {what} right now ({detail}); nothing was"
            " written, retry later",
            applied=False,
        )
    if isinstance(exc, RedisClusterException):
        return StoreUnavailable(
            f"Redis Cluster at {where} cannot serve the {what} ({detail}). Check it with"
            f" `redis-cli --cluster check {_address(where)}`: the node in the store URL must"
            " belong to the cluster and every slot must be covered; retry once it is"
        )
    if isinstance(exc, ResponseError):
        return StoreProtocolError(
            f"Redis at {where} rejected the {what} ({detail}). If this says WRONGTYPE,"
            " something other than rill-executor wrote to keys under rill:{…}"
        )
    return StoreUnavailable(f"Redis at {where} failed the {what} ({detail})")


def _unreachable(exc: BaseException) -> bool:
    """Refused or unresolvable: the connection never opened, so nothing was sent."""
    seen: BaseException | None = exc
    for _ in range(5):  # redis-py chains its own errors over the socket's
        if seen is None:
            return False
        if isinstance(seen, (ConnectionRefusedError, socket.gaierror)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _address(where: str) -> str:
    match = re.match(r"(\S+):(\d+)", where)
    return f"{match[1]}:{match[2]}" if match else "host:port"


def _ping(where: str) -> str:
    match = re.match(r"(\S+):(\d+)", where)
    return f"redis-cli -h {match[1]} -p {match[2]} ping" if match else "redis-cli ping"


def _busy(exc: BaseException) -> bool:
    # BUSY (another script is running), LOADING and MASTERDOWN arrive as plain errors on
    # some redis-py versions.
    return isinstance(exc, ResponseError) and str(exc).startswith(
        ("BUSY", "LOADING", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN")
    )
