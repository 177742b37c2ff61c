"""The store contract (rill_executor.testing) on a standalone Redis and on a Redis Cluster.

Each kit test runs through both ``Ledger`` (RedisStore) and ``AsyncLedger`` (AsyncRedisStore).
"""

import pytest

from rill_executor.testing import StoreConformance


class TestRedis(StoreConformance):
    exact_listing = False  # a SCAN
    expires_records = True  # a finished record expires at retain_until by itself

    @pytest.fixture
    def store_url(self, redis_url: str) -> str:
        return redis_url


class TestRedisCluster(StoreConformance):
    exact_listing = False
    expires_records = True

    @pytest.fixture
    def store_url(self, cluster_url: str) -> str:
        return cluster_url
