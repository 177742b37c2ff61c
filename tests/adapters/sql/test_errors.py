"""What the SQL store says when it cannot work: each error names the cause and the fix."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from rill_executor import AsyncLedger, ConfigError, Ledger
from rill_executor_sql import SqlStore, upgrade_schema

SERVERS = ["postgres", "mariadb"]


def _url(request: pytest.FixtureRequest, server: str, **change: str) -> str:
    base = make_url(request.getfixturevalue(f"{server}_url"))
    return base.set(**change).render_as_string(hide_password=False)  # type: ignore[arg-type]


_REFUSED = [
    ({"database": "no_such_db_xyz"}, r"database 'no_such_db_xyz' does not exist"),
    ({"username": "no_such_role"}, r"refused these credentials.*Fix the user name or password"),
]
_FIX = {"postgres": "createdb no_such_db_xyz", "mariadb": "CREATE DATABASE no_such_db_xyz"}


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize(("change", "message"), _REFUSED)
def test_a_refused_connection_says_why_and_not_to_upgrade(
    request: pytest.FixtureRequest, server: str, change: dict[str, str], message: str
) -> None:
    url = _url(request, server, **change)
    for attempt in (lambda: SqlStore(url), lambda: upgrade_schema(url)):
        with pytest.raises(ConfigError, match=message) as caught:
            attempt()
        assert "schema upgrade" not in str(caught.value) or "database" in change
        if "database" in change:
            assert _FIX[server] in str(caught.value)

    async def first_use() -> None:
        async with AsyncLedger(url, namespace="n") as ledger:
            await ledger.status("k")

    with pytest.raises(ConfigError, match=message):
        asyncio.run(first_use())


@pytest.mark.parametrize("server", SERVERS)
def test_a_missing_database_through_the_ledger_is_a_config_error(
    request: pytest.FixtureRequest, server: str
) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        Ledger(_url(request, server, database="no_such_db_xyz"), namespace="n")


_BLOCKED = """
import sys
sys.modules[{module!r}] = None  # as if the extra were not installed
from rill_executor import ConfigError, {ledger}
try:
    {ledger}({url!r}, namespace="n")
except ConfigError as exc:
    print(exc)
"""


@pytest.mark.parametrize(
    ("server", "module", "ledger", "extra"),
    [
        ("postgres", "psycopg", "Ledger", "postgres"),
        ("postgres", "psycopg", "AsyncLedger", "postgres"),
        ("mariadb", "pymysql", "Ledger", "mariadb"),
        ("mariadb", "aiomysql", "AsyncLedger", "mariadb"),
    ],
)
def test_a_missing_driver_names_the_extra_to_install(
    request: pytest.FixtureRequest, server: str, module: str, ledger: str, extra: str
) -> None:
    url = _url(request, server)
    script = _BLOCKED.format(module=module, ledger=ledger, url=url)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert f"pip install 'rill-executor-sql[{extra}]'" in done.stdout


def test_the_cli_without_the_driver_names_the_extra(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['psycopg'] = None\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    cli = Path(sys.executable).parent / "rill-executor"
    done = subprocess.run(
        [cli, "schema", "upgrade", "--store", _url(request, "postgres")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "pip install 'rill-executor-sql[postgres]'" in done.stderr


@pytest.mark.parametrize("scheme", ["postgres", "postgres+psycopg"])
def test_the_postgres_spelling_points_to_postgresql_psycopg(scheme: str) -> None:
    with pytest.raises(ConfigError, match=r"write the URL as 'postgresql\+psycopg://"):
        Ledger(f"{scheme}://postgres@127.0.0.1:5432/db", namespace="n")
