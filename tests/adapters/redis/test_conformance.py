"""The store contract (rill_executor.testing) on a standalone Redis and on a Redis Cluster.

Each kit test runs through both ``Ledger`` (RedisStore) and ``AsyncLedger`` (AsyncRedisStore).
"""

import pytest

from rill_executor.testing import StoreConformance


class TestRedis(StoreConformance):
    exact_listing = False  # a SCAN

    @pytest.fixture
    def store_url(self, redis_url: str) -> str:
        return redis_url


class TestRedisCluster(StoreConformance):
    exact_listing = False

    @pytest.fixture
    def store_url(self, cluster_url: str) -> str:
        return cluster_url
