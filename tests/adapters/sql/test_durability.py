"""The SQL servers' settings that make a commit not durable, checked at open and again while
the store is used (invariant 21), on real servers.

PostgreSQL: ``synchronous_commit`` turned off for the store's database (``ALTER DATABASE``
on a database of this test's own: new sessions take it) while a store with
``durability=require`` runs; once its pool has replaced its connections (as
``pool_recycle`` does every hour), claims are refused until the setting is back. MariaDB's
``innodb_flush_log_at_trx_commit`` is global to the server, shared by other suites: it is
only read here (the test server is safe), and its values judged in
``test_what_each_setting_risks``.
"""

from __future__ import annotations

import time
import uuid
import warnings
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, make_url

from rill_executor import Claim, ConfigError, Ledger
from rill_executor._recheck import RECHECK_AFTER
from rill_executor.store import UnsafeDeployment
from rill_executor_sql import SqlStore
from rill_executor_sql._durability import risks_of
from tests.clocks import RECHECK

from ...conftest import ensure_database


def _with(url: str, query: str) -> str:
    return url + ("&" if "?" in url else "?") + query


@pytest.fixture
def own_postgres(postgres_url: str) -> Iterator[str]:
    """A database of this test's own, whose settings it may change."""
    url = ensure_database(postgres_url, f"{make_url(postgres_url).database}_durability")
    SqlStore(url, upgrade=True).close()
    yield url
    _set_synchronous_commit(url, None)


def _set_synchronous_commit(url: str, value: str | None) -> None:
    database = make_url(url).database
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            change = (
                "RESET synchronous_commit" if value is None else f"SET synchronous_commit = {value}"
            )
            conn.exec_driver_sql(f'ALTER DATABASE "{database}" {change}')
    finally:
        admin.dispose()


def _new_connections(ledger: Ledger) -> None:
    """The pool opens new sessions, as after its pool_recycle; a read makes one (a second
    after the last check at the earliest, when a new connection makes the next one due)."""
    time.sleep(RECHECK_AFTER)
    store = ledger.store
    assert isinstance(store, SqlStore)
    store.engine.dispose()
    ledger.status("order-1")


@pytest.mark.real_clock(RECHECK)
def test_a_postgres_store_whose_commits_turn_non_durable_refuses_claims(own_postgres: str) -> None:
    namespace = f"payments-{uuid.uuid4().hex[:8]}"
    with Ledger(_with(own_postgres, "durability=require"), namespace=namespace) as ledger:
        claim = ledger.claim("order-1")
        assert isinstance(claim, Claim)
        _set_synchronous_commit(own_postgres, "off")
        _new_connections(ledger)
        with pytest.raises(UnsafeDeployment, match="synchronous_commit is off"):
            ledger.claim("order-2")
        with pytest.raises(UnsafeDeployment):  # until a check finds it safe again
            ledger.claim("order-2")
        claim.commit({"charged": 12})  # an attempt under way still records its outcome
        _set_synchronous_commit(own_postgres, None)
        _new_connections(ledger)
        again = ledger.claim("order-2")
        assert isinstance(again, Claim)
        again.commit({"charged": 3})


def test_a_postgres_store_opened_non_durable_warns_or_refuses(own_postgres: str) -> None:
    _set_synchronous_commit(own_postgres, "off")
    with pytest.raises(UnsafeDeployment) as err:
        SqlStore(_with(own_postgres, "durability=require"))
    assert isinstance(err.value, ConfigError)
    with pytest.warns(Warning, match="synchronous_commit is off"):
        SqlStore(own_postgres).close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SqlStore(_with(own_postgres, "durability=ignore")).close()


def test_a_safe_mariadb_opens_silently_and_bad_policies_are_refused(mariadb_url: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store = SqlStore(_with(mariadb_url, "durability=require"))
        store.close()
    with pytest.raises(ConfigError, match="durability='maybe'"):
        SqlStore(_with(mariadb_url, "durability=maybe"))


def test_what_each_setting_risks() -> None:
    assert risks_of("postgresql", ("on", "on")) == []
    assert risks_of("postgresql", ("on", "local")) == []
    assert [r.split(" is ")[0] for r in risks_of("postgresql", ("off", "off"))] == [
        "fsync",
        "synchronous_commit",
    ]
    assert risks_of("mysql", (1,)) == [] and risks_of("mysql", (3,)) == []
    for lax in (0, 2):
        (risk,) = risks_of("mysql", (lax,))
        assert risk.startswith(f"innodb_flush_log_at_trx_commit is {lax}")
