"""Shared fixtures: the real database servers the suite needs.

PostgreSQL, MariaDB and Redis are required, never skipped: a missing server fails the run
with the command that starts it. Override the URLs with RILL_TEST_POSTGRES_URL,
RILL_TEST_MARIADB_URL and RILL_TEST_REDIS_URL. Under pytest-xdist each worker has a
database of its own on each SQL server, and on Redis too: the URL's database number plus the
worker's (``gw0`` the URL's own, ``gw1`` the next, …), emptied when the session starts, so
a session never scans what another one (or a failed setup) left. Two suites run at once on
one Redis need bases at least their worker count apart (``/0`` and ``/4`` with ``-n 4``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis
from sqlalchemy import create_engine, make_url, text

from .otel import otel  # noqa: F401  # the fixture of the tracing tests

POSTGRES_URL = os.environ.get(
    "RILL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
MARIADB_URL = os.environ.get("RILL_TEST_MARIADB_URL", "mysql+pymysql://root@127.0.0.1:3306/test")


def pytest_configure(config: pytest.Config) -> None:
    # ``--dist loadscope`` hands the workers whole modules (classes), by default the ones of
    # most tests first; the collection order below puts the longest first instead.
    if getattr(config.option, "dist", "no") == "loadscope":
        config.option.loadscopereorder = False


def _scope(item: pytest.Item) -> str:
    """What ``--dist loadscope`` keeps on one worker: a test's class, or else its module."""
    return item.nodeid.split("[", 1)[0].rsplit("::", 1)[0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test marked ``real_clock`` says why it must wait on a real clock: the named set of
    tests that do (``pytest -m real_clock --collect-only -q`` lists them; every other test
    runs on a virtual clock, or waits for nothing but the work it starts).

    Under pytest-xdist, the modules (classes) with the most ``slow`` tests come first, then
    those with the most tests: a module of a few long drills dealt out last would leave the
    other worker idle until it ends.
    """
    if os.environ.get("PYTEST_XDIST_WORKER"):
        slow: dict[str, int] = {}
        count: dict[str, int] = {}
        for item in items:
            scope = _scope(item)
            count[scope] = count.get(scope, 0) + 1
            slow[scope] = slow.get(scope, 0) + (item.get_closest_marker("slow") is not None)
        items.sort(key=lambda item: (-slow[_scope(item)], -count[_scope(item)]))  # stable
    for item in items:
        for mark in item.iter_markers("real_clock"):
            why = mark.args[0] if len(mark.args) == 1 and not mark.kwargs else None
            if not isinstance(why, str) or not why.strip():
                raise pytest.UsageError(
                    f"{item.nodeid}: @pytest.mark.real_clock takes one string, why the test"
                    f" must wait on a real clock; got args={mark.args!r} kwargs={mark.kwargs!r}"
                )


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    """With ``-m real_clock``: each test that waits on a real clock, with why."""
    if config.option.markexpr != "real_clock":
        return []
    lines = [f"{len(items)} tests wait on a real clock:"]
    for item in items:
        mark = item.get_closest_marker("real_clock")
        lines.append(f"  {item.nodeid}: {mark.args[0] if mark else '?'}")
    return lines


def worker_redis_url(url: str, worker: str | None) -> str:
    """The Redis database of pytest-xdist worker ``worker`` (``gw1``…): the database number
    in ``url``'s path plus the worker's; without xdist (None), ``url`` itself."""
    if worker is None:
        return url
    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    return parts._replace(path=f"/{base + int(worker.removeprefix('gw'))}").geturl()


REDIS_URL = worker_redis_url(
    os.environ.get("RILL_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
    os.environ.get("PYTEST_XDIST_WORKER"),
)

_START = {
    "postgresql": "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
    "mysql": "start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd",
}


def ensure_database(url: str, name: str) -> str:
    """The URL of database ``name`` on ``url``'s server, created if it is missing."""
    base = make_url(url)
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            if base.get_backend_name() == "postgresql":
                found = conn.execute(
                    text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}
                ).first()
                if found is None:
                    conn.execute(text(f'CREATE DATABASE "{name}"'))
            else:
                conn.execute(text(f"CREATE DATABASE IF NOT EXISTS `{name}`"))
    finally:
        admin.dispose()
    return base.set(database=name).render_as_string(hide_password=False)


def _fresh_database(url: str, family: str) -> str:
    """Check the server answers, drop our tables, and install the schema from scratch."""
    try:
        url = _worker_database(url)
        engine = create_engine(url)
        with engine.begin() as conn:
            for table in ("rill_attempts", "rill_jobs", "rill_fences", "rill_schema"):
                conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
        engine.dispose()
    except Exception as exc:
        pytest.fail(
            f"the {family} test server at {url} is not reachable ({exc}).\n"
            f"Start it with: {_START[family]}\nor point the tests elsewhere with"
            f" RILL_TEST_{'POSTGRES' if family == 'postgresql' else 'MARIADB'}_URL",
            pytrace=False,
        )
    from rill_executor_sql import SqlStore

    SqlStore(url, upgrade=True).close()
    return url


def _worker_database(url: str) -> str:
    """The database of this pytest-xdist worker (``test_gw0``, …): workers never share a
    table; without xdist, ``url`` itself."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        return url
    return ensure_database(url, f"{make_url(url).database}_{worker}")


@pytest.fixture(scope="session")
def postgres_url() -> str:
    return _fresh_database(POSTGRES_URL, "postgresql")


@pytest.fixture(scope="session")
def mariadb_url() -> str:
    return _fresh_database(MARIADB_URL, "mysql")


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path: Path = tmp_path_factory.mktemp("sqlite") / "jobs.db"
    yield f"sqlite:///{path}"


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The standalone Redis, this session's database of it (emptied first); its durability
    warning is off (the test server keeps nothing on disk on purpose;
    tests/adapters/redis/test_deployment.py tests the warning)."""
    try:
        with redis.Redis.from_url(REDIS_URL, socket_timeout=2) as client:
            client.flushdb()  # this session's own database: start from nothing
    except redis.ResponseError as exc:  # e.g. "DB index is out of range"
        pytest.fail(
            f"the Redis database of {REDIS_URL} cannot be used ({exc}): each pytest-xdist"
            " worker takes the database of RILL_TEST_REDIS_URL plus its number; choose a"
            " lower one, or raise the server's `databases`",
            pytrace=False,
        )
    except redis.RedisError as exc:
        pytest.fail(
            f"the Redis test server at {REDIS_URL} is not reachable ({exc}).\n"
            "Start it with: redis-server --daemonize yes --save '' --appendonly no\n"
            "or point the tests elsewhere with RILL_TEST_REDIS_URL",
            pytrace=False,
        )
    return REDIS_URL + ("&" if "?" in REDIS_URL else "?") + "durability=ignore"
