"""rill-executor-redis: the Redis job store, standalone and Cluster.

Open it by URL through rill-executor (``Ledger("redis://host:6379/0", namespace=…)``), or
wrap a redis-py client: ``RedisStore(redis.Redis(...))``. See docs/redis.md.
"""

from ._deployment import (
    Deployment,
    Durability,
    DurabilityWarning,
    NodeDurability,
    UnsafeDeployment,
)
from ._keys import job_keys
from ._store import AsyncRedisStore, RedisStore, open_async_redis_store, open_redis_store

__all__ = [
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

__version__ = "0.1.0"
