"""The ``rill-executor`` command: its entry point (the demo, a process), its schema upgrade
and its errors for store URLs that cannot work."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from rill_executor_sql import SCHEMA_VERSION

from .cli import run


def test_demo_walks_through_every_answer() -> None:
    # The installed entry point as a process: what pip put on the path starts the group.
    done = run("demo", "--lease", "0.5", process=True)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "handler ran (1 run so far)" in out
    assert "replayed as Transcoded, handler not run (1 run so far)" in out
    assert "-> JobInProgress: attempt" in out
    assert "joined the running attempt" in out and "segment 2: 1 run for 3 calls" in out
    assert "takeover, fence 2" in out
    assert "-> StaleAttempt (superseded)" in out
    assert "expired" in out and "succeeded" in out


def test_schema_upgrade_applies_once(postgres_url: str) -> None:
    base = make_url(postgres_url)
    name = f"rill_cli_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    try:
        url = base.set(database=name).render_as_string(hide_password=False)
        first = run("schema", "upgrade", "--store", url)
        upgraded = f"schema upgraded to version {SCHEMA_VERSION}"
        assert first.returncode == 0 and upgraded in first.stdout, first
        again = run("schema", "upgrade", "--store", url)
        assert again.returncode == 0 and "up to date" in again.stdout
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))
        admin.dispose()


@pytest.mark.parametrize(
    ("url", "code", "message"),
    [
        ("nowhere.db", 2, "has no scheme"),
        ("cassandra://host/x", 2, "no store adapter for scheme 'cassandra'"),
        ("postgresql+psycopg://postgres@127.0.0.1:1/test", 4, "is unavailable"),
        ("postgres://postgres@127.0.0.1:5432/test", 2, "write the URL as 'postgresql+psycopg://"),
    ],
)
def test_bad_or_unreachable_store_urls_exit_with_one_line(
    url: str, code: int, message: str
) -> None:
    done = run("schema", "upgrade", "--store", url)
    assert done.returncode == code
    assert done.stderr.startswith("error: ") and message in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("server", ["postgres", "mariadb"])
@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"database": "no_such_db_xyz"}, "the database 'no_such_db_xyz' does not exist"),
        ({"username": "no_such_role"}, "the server refused these credentials"),
    ],
)
def test_schema_upgrade_on_a_missing_database_or_role_says_so(
    request: pytest.FixtureRequest, server: str, change: dict[str, str], message: str
) -> None:
    base = make_url(request.getfixturevalue(f"{server}_url"))
    url = base.set(**change).render_as_string(hide_password=False)  # type: ignore[arg-type]
    done = run("schema", "upgrade", "--store", url)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: ") and message in done.stderr
    if "username" in change:
        assert "schema upgrade" not in done.stderr
