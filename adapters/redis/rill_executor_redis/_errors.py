"""``wrap_errors``: the one place where redis-py's errors become rill-executor's.

    redis-py                                             rill_executor
    ConnectionError (incl. BusyLoading, Authentication), StoreUnavailable
    TimeoutError, ClusterDown / MasterDown, TryAgain,
    READONLY, OOM, NOPERM, BUSY, RedisClusterException,
    OSError
    any other ResponseError (WRONGTYPE, script errors)   StoreProtocolError

The scripts are atomic, but a reply lost on the wire leaves the caller unsure whether the
operation was applied; the message says so, and why retrying is safe (see ``_client``).
"""

from __future__ import annotations

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

from rill_executor.store import StoreError, StoreProtocolError, StoreUnavailable

__all__ = ["REDIS_ERRORS", "translate", "wrap_errors"]

REDIS_ERRORS = (RedisError, RedisClusterException, OSError)
"""What a redis-py call raises when Redis, the network or the cluster fails it."""

_UNKNOWN_OUTCOME = (
    "it may or may not have been applied. Retrying later is safe: a repeated claim finds the"
    " job in progress until the lease ends, a repeated commit is rejected as stale, neither"
    " is applied twice"
)


@contextmanager
def wrap_errors(operation: str, where: str, job_id: str = "") -> Iterator[None]:
    """Run a Redis call; re-raise its failure as a ``StoreError`` (``raise … from exc``)."""
    try:
        yield
    except REDIS_ERRORS as exc:
        raise translate(exc, operation, where, job_id) from exc


def translate(exc: BaseException, operation: str, where: str, job_id: str = "") -> StoreError:
    what = f"{operation} of job {job_id[:16]}" if job_id else operation
    detail = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, (RedisConnectionError, RedisTimeoutError, OSError)):
        return StoreUnavailable(
            f"Redis at {where} did not answer the {what} ({detail}); {_UNKNOWN_OUTCOME}"
        )
    if isinstance(exc, OutOfMemoryError):
        return StoreUnavailable(
            f"Redis at {where} refused the {what}: it is at maxmemory ({detail}). Nothing was"
            " written; free memory or raise maxmemory (keep maxmemory-policy noeviction)"
        )
    if isinstance(exc, ReadOnlyError):
        return StoreUnavailable(
            f"Redis at {where} is a read-only replica ({detail}), e.g. during a failover."
            " Nothing was written; point the store URL at the primary or retry later"
        )
    if isinstance(exc, NoPermissionError):
        return StoreUnavailable(
            f"Redis at {where} refused the {what} ({detail}): the ACL user needs +evalsha,"
            " +script, +time and read/write access to keys rill:*"
        )
    if isinstance(exc, (ClusterError, TryAgainError, RedisClusterException)) or _busy(exc):
        return StoreUnavailable(
            f"Redis at {where} cannot serve the {what} right now ({detail}); nothing was"
            " written, retry later"
        )
    if isinstance(exc, ResponseError):
        return StoreProtocolError(
            f"Redis at {where} rejected the {what} ({detail}). If this says WRONGTYPE,"
            " something other than rill-executor wrote to keys under rill:{…}"
        )
    return StoreUnavailable(f"Redis at {where} failed the {what} ({detail})")


def _busy(exc: BaseException) -> bool:
    # BUSY (another script is running), LOADING and MASTERDOWN arrive as plain errors on
    # some redis-py versions.
    return isinstance(exc, ResponseError) and str(exc).startswith(
        ("BUSY", "LOADING", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN")
    )
