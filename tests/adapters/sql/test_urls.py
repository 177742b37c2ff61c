"""A SQL store URL's query options: each is the store's, SQLAlchemy's or the driver's, or the
store refuses to open, before it reads or writes anything (docs/stores.md, "URL options")."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from sqlalchemy import create_engine, inspect, make_url
from sqlalchemy.dialects.mysql.pymysql import MySQLDialect_pymysql
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite

from rill_executor import ConfigError, open_async_store, open_store
from rill_executor.store import upgrade_schema
from rill_executor_sql import AsyncSqlStore, SqlStore
from rill_executor_sql._options import driver_options

from ...conftest import ensure_database
from ..url_options import assert_refusal
from .test_bounds import _with

HOSTILE = ["bogus", "sslmod", "\x00\x1b[31mred", "\u202eevil", "é" * 200]
FAMILY = {"postgres": "PostgreSQL", "mariadb": "MariaDB", "sqlite": "SQLite"}


def _open_async(url: str) -> None:
    async def use() -> None:
        store = open_async_store(url)
        try:
            await store.ping()  # type: ignore[attr-defined]
        finally:
            await store.close()

    asyncio.run(use())


OPENERS = {
    "sync": lambda url: open_store(url).close(),
    "async": _open_async,
    "upgrade": upgrade_schema,  # the path that writes the schema
}


def _refused_db(request: pytest.FixtureRequest, server: str, tmp_path: Path) -> str:
    """The URL of a database no store opened yet: a fresh SQLite file's, or an empty one of
    the server's."""
    if server == "sqlite":
        return f"sqlite:///{tmp_path / 'never.db'}"
    url = str(request.getfixturevalue(f"{server}_url"))
    fresh = ensure_database(url, f"{make_url(url).database}_refused")
    engine = create_engine(fresh)
    try:
        with engine.begin() as conn:
            for table in inspect(conn).get_table_names():
                conn.exec_driver_sql(f"DROP TABLE {table}")
    finally:
        engine.dispose()
    return fresh


def _tables(url: str, tmp_path: Path) -> list[str]:
    if url.startswith("sqlite"):
        return ["<the file>"] if (tmp_path / "never.db").exists() else []
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return inspect(conn).get_table_names()
    finally:
        engine.dispose()


@pytest.mark.parametrize("server", ["postgres", "mariadb", "sqlite"])
@pytest.mark.parametrize("how", sorted(OPENERS))
def test_an_option_nobody_takes_is_refused_at_open_and_nothing_is_written(
    request: pytest.FixtureRequest, server: str, how: str, tmp_path: Path
) -> None:
    url = _refused_db(request, server, tmp_path)
    opener: Callable[[str], object] = OPENERS[how]
    for name in HOSTILE:
        with pytest.raises(ConfigError) as err:
            opener(_with(url, f"{quote(name)}=1&durability=ignore"))
        assert_refusal(
            str(err.value),
            name,
            f"the {FAMILY[server]} store URL",
            lists=("durability", "(rill-executor-sql)"),
            docs="docs/stores.md",
        )
    assert _tables(url, tmp_path) == []


def test_a_typo_gets_the_close_name(postgres_url: str) -> None:
    with pytest.raises(ConfigError, match=r"unknown option 'sslmod' .*did you mean 'sslmode'"):
        SqlStore(_with(postgres_url, "sslmod=disable"))


@pytest.mark.parametrize(
    ("server", "options"),
    [
        ("postgres", "sslmode=disable&application_name=rill-urls&keepalives=1&connect_timeout=3"),
        ("postgres", "options=-c%20work_mem%3D8MB&target_session_attrs=any"),
        ("mariadb", "program_name=rill-urls&init_command=SET%20%40rill%3D1&charset=utf8mb4"),
        ("sqlite", "cached_statements=64&detect_types=0&busy_timeout=2"),
    ],
)
def test_the_drivers_options_still_open_the_store(
    request: pytest.FixtureRequest, server: str, options: str, tmp_path: Path
) -> None:
    if server == "sqlite":
        url = f"sqlite:///{tmp_path / 'jobs.db'}"
    else:
        url = str(request.getfixturevalue(f"{server}_url"))
    url = _with(url, options + "&durability=ignore")
    store = SqlStore(url)
    try:
        store.ping()
    finally:
        store.close()
    _open_async(url)


def test_a_sqlite_uri_takes_sqlites_uri_parameters(tmp_path: Path) -> None:
    url = f"sqlite:///file:{tmp_path / 'jobs.db'}?mode=rwc&uri=true"
    SqlStore(url).close()
    assert (tmp_path / "jobs.db").exists()
    with pytest.raises(ConfigError, match="unknown option 'mode'"):
        SqlStore(f"sqlite:///{tmp_path / 'other.db'}?mode=rwc")  # not a URI: dropped


@pytest.mark.parametrize(
    ("server", "option", "instead"),
    [
        ("sqlite", "timeout=3", "busy_timeout"),
        ("sqlite", "check_same_thread=true", None),
        ("sqlite", "isolation_level=DEFERRED", None),
        ("mariadb", "write_timeout=3", "read_timeout"),
    ],
)
def test_an_option_the_store_sets_itself_is_refused_with_the_one_to_set(
    request: pytest.FixtureRequest, server: str, option: str, instead: str | None, tmp_path: Path
) -> None:
    if server == "sqlite":
        url = f"sqlite:///{tmp_path / 'jobs.db'}"
    else:
        url = str(request.getfixturevalue(f"{server}_url"))
    name = option.split("=", maxsplit=1)[0]
    expected = f"option {name} does not apply to .*the store sets it"
    expected += f" from {instead}; set {instead} instead" if instead else "$"
    for opener in (SqlStore, AsyncSqlStore):
        with pytest.raises(ConfigError, match=expected):
            opener(_with(url, option))
    assert not (tmp_path / "jobs.db").exists()


def test_an_option_of_pymysql_that_aiomysql_lacks_is_refused_for_asyncio(mariadb_url: str) -> None:
    url = _with(mariadb_url, "compress=false&durability=ignore")
    with pytest.raises(ConfigError, match=r"unknown option 'compress'.*\(aiomysql"):
        AsyncSqlStore(url)


# -- the names, as the driver and SQLAlchemy take them -------------------------------------------


def test_the_postgres_options_are_the_ones_libpq_parses() -> None:
    label, names = driver_options("postgresql", False) or ("", frozenset())
    assert "libpq" in label and {"sslmode", "application_name", "options"} <= names
    for name in names:
        psycopg.conninfo.conninfo_to_dict(f"{name}=1")  # libpq refuses a name it lacks
    with pytest.raises(psycopg.ProgrammingError, match='invalid connection option "bogus"'):
        psycopg.conninfo.conninfo_to_dict("bogus=1")


@pytest.mark.parametrize("name", ["ssl_ca", "ssl_key", "ssl_cert", "ssl_capath", "ssl_cipher"])
def test_sqlalchemys_mysql_ssl_options_reach_the_driver(name: str) -> None:
    """SQLAlchemy gathers them into the driver's ``ssl``: neither driver takes them itself."""
    url = make_url(f"mysql+pymysql://u@h/db?{name}=x")
    _, kwargs = MySQLDialect_pymysql().create_connect_args(url)
    assert kwargs["ssl"] == {name.removeprefix("ssl_"): "x"} and name not in kwargs
    for is_async in (False, True):
        assert name in (driver_options("mysql", is_async) or ("", frozenset()))[1]


def test_sqlalchemys_sqlite_options_reach_the_driver_and_others_are_dropped() -> None:
    dialect = SQLiteDialect_pysqlite()
    _, names = driver_options("sqlite", False) or ("", frozenset())
    for name in names:
        value = "true" if name == "uri" else "1"
        _, kwargs = dialect.create_connect_args(make_url(f"sqlite:///x.db?{name}={value}"))
        assert name in kwargs
    _, kwargs = dialect.create_connect_args(make_url("sqlite:///x.db?bogus=1"))
    assert "bogus" not in kwargs  # what the store refuses, SQLAlchemy drops without a word
