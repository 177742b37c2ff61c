"""The stores the command-line tests run against: SQLite, PostgreSQL and Redis."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def store_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_url"))
