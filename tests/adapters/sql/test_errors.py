"""What the SQL store says when it cannot work: each error names the cause and the fix."""

from __future__ import annotations

import asyncio

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
