"""What the SQL store says when it cannot work: each error names the cause and the fix."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from rill_executor import (
    AsyncLedger,
    Claim,
    ConfigError,
    JobState,
    JobStatus,
    Ledger,
    ResultTooLarge,
    StoreUnavailable,
)
from rill_executor.store import AttemptRef, Completion, Store, StoreStatus
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


# -- MariaDB's max_allowed_packet ------------------------------------------------------------

_ROOM = 64 * 1024 * 1024  # the ledger's own limit out of the way: the server's is the one hit


def _server_packet_limit(url: str) -> int:
    engine = create_engine(url)
    with engine.connect() as conn:
        limit = int(conn.execute(text("SELECT @@max_allowed_packet")).scalar_one())
    engine.dispose()
    return limit


def _unchanged(store: Store, job: str, before: StoreStatus | None) -> None:
    after = store.status(job)
    assert before is not None and after is not None
    assert (after.job, after.attempts) == (before.job, before.attempts)


def test_a_statement_over_max_allowed_packet_is_a_usage_error_that_writes_nothing(
    mariadb_url: str,
) -> None:
    limit = _server_packet_limit(mariadb_url)
    ledger = Ledger(mariadb_url, namespace=f"pkt-{uuid.uuid4().hex}", max_result_bytes=_ROOM)
    store = ledger.store
    claim = ledger.claim("k")
    assert isinstance(claim, Claim)
    ref = AttemptRef(claim.job_id, claim.attempt_id, claim.fence)
    before = store.status(claim.job_id)
    big = json.dumps("x" * (limit + 1024 * 1024))
    done = Completion(JobState.SUCCEEDED, big, None, None, retention_us=3_600_000_000)

    with pytest.raises(ResultTooLarge, match="max_allowed_packet of") as caught:
        store.finish(ref, done)
    assert caught.value.limit == limit and caught.value.size == len(big)
    assert "max_result_bytes" in str(caught.value) and "output object" in str(caught.value)
    _unchanged(store, claim.job_id, before)

    with pytest.raises(ConfigError, match="max_allowed_packet"):
        store.register_output(ref, big)  # not a result: the server setting is still named
    _unchanged(store, claim.job_id, before)

    claim.commit("small")  # the connection and the attempt are as they were
    assert store.status(claim.job_id).job.state is JobState.SUCCEEDED  # type: ignore[union-attr]
    ledger.close()


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_handler_result_over_max_allowed_packet_raises_result_too_large(
    mariadb_url: str, kind: str
) -> None:
    limit = _server_packet_limit(mariadb_url)
    namespace = f"pkt-{uuid.uuid4().hex}"

    def value() -> str:
        return "x" * (limit + 1024 * 1024)

    if kind == "sync":
        ledger = Ledger(mariadb_url, namespace=namespace, max_result_bytes=_ROOM)
        handler = ledger.idempotent(key=lambda: "k", name="big")(value)
        with pytest.raises(ResultTooLarge, match="max_allowed_packet"):
            handler()
        status = ledger.status("k", handler="big")
        ledger.close()
    else:

        async def run() -> JobStatus | None:
            async with AsyncLedger(mariadb_url, namespace=namespace, max_result_bytes=_ROOM) as a:

                @a.idempotent(key=lambda: "k", name="big")
                async def handler() -> str:
                    return value()

                with pytest.raises(ResultTooLarge, match="max_allowed_packet"):
                    await handler()
                return await a.status("k", handler="big")

        status = asyncio.run(run())
    assert status is not None and status.state is not JobState.SUCCEEDED
    assert status.result is None


# -- an async store left open ----------------------------------------------------------------

_LEFT_OPEN = """
import asyncio
from rill_executor import AsyncLedger

async def main() -> None:
    ledger = AsyncLedger({url!r}, namespace="left-open")  # never closed

    @ledger.idempotent(key=lambda n: str(n), name="double")
    async def double(n: int) -> int:
        return 2 * n

    assert await double({n}) == {twice}

asyncio.run(main())
"""


@pytest.mark.parametrize("family", ["mariadb", "postgres", "sqlite"])
def test_an_async_store_left_open_exits_without_noise(
    request: pytest.FixtureRequest, family: str
) -> None:
    url = str(request.getfixturevalue(f"{family}_url"))
    n = uuid.uuid4().int % 10**9
    script = _LEFT_OPEN.format(url=url, n=n, twice=2 * n)
    done = subprocess.run(
        [sys.executable, "-W", "always::ResourceWarning", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr


@pytest.mark.parametrize("family", ["postgres", "mariadb"])
def test_a_server_that_goes_away_after_the_open_is_store_unavailable(
    request: pytest.FixtureRequest, family: str
) -> None:
    """A connect that fails once the store is open (PostgreSQL's raw path checks a
    connection out of the pool itself) is ``StoreUnavailable``, never the driver's error."""
    from rill_executor.testing.drill import FaultProxy

    base = make_url(str(request.getfixturevalue(f"{family}_url")))
    assert base.host is not None and base.port is not None
    proxy = FaultProxy(base.host, base.port)
    url = base.set(port=proxy.port).render_as_string(hide_password=False)
    namespace = f"gone-{uuid.uuid4().hex[:8]}"
    try:
        with Ledger(url, namespace=namespace) as ledger:
            first = ledger.claim("before")  # open, with a pooled connection
            assert isinstance(first, Claim)
            first.commit("ok")
            proxy.retarget(None)
            proxy.close()  # every pooled connection dropped; a new one is refused
            with pytest.raises(StoreUnavailable):
                ledger.claim("after")

        async def claim_after_the_server_went_away() -> None:
            again = FaultProxy(base.host or "", base.port)
            ledger = AsyncLedger(
                base.set(port=again.port).render_as_string(hide_password=False),
                namespace=namespace,
            )
            try:
                await ledger.status("before")
                again.retarget(None)
                again.close()
                with pytest.raises(StoreUnavailable):
                    await ledger.claim("after")
            finally:
                await ledger.close()

        asyncio.run(claim_after_the_server_went_away())
    finally:
        proxy.close()
