"""Test sessions that share a Redis server keep apart: each pytest-xdist worker has a
database of its own, the one of RILL_TEST_REDIS_URL plus its number (tests/conftest.py)."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import pytest

from ...conftest import worker_redis_url


def test_this_session_has_a_redis_database_of_its_own(redis_url: str) -> None:
    base = urlsplit(os.environ.get("RILL_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    own = int(base.path.strip("/") or 0) + (0 if worker is None else int(worker[2:]))
    assert urlsplit(redis_url).path == f"/{own}"


@pytest.mark.parametrize(
    ("url", "worker", "expected"),
    [
        ("redis://h:6379/4", None, "redis://h:6379/4"),
        ("redis://h:6379/4", "gw0", "redis://h:6379/4"),
        ("redis://h:6379/4", "gw1", "redis://h:6379/5"),
        ("redis://h:6379", "gw2", "redis://h:6379/2"),
        ("redis://u:p@h:6379/0?socket_timeout=5", "gw3", "redis://u:p@h:6379/3?socket_timeout=5"),
    ],
)
def test_a_worker_takes_the_base_database_plus_its_number(
    url: str, worker: str | None, expected: str
) -> None:
    assert worker_redis_url(url, worker) == expected
