"""The conformance kit against SQLite (a file), PostgreSQL and MariaDB."""

import pytest

from rill_executor.testing import StoreConformance


class TestSQLite(StoreConformance):
    @pytest.fixture
    def store_url(self, sqlite_url: str) -> str:
        return sqlite_url


class TestPostgres(StoreConformance):
    @pytest.fixture
    def store_url(self, postgres_url: str) -> str:
        return postgres_url


class TestMariaDB(StoreConformance):
    @pytest.fixture
    def store_url(self, mariadb_url: str) -> str:
        return mariadb_url
