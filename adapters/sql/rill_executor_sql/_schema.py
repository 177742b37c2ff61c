"""The schema: tables as SQLAlchemy metadata (the source of truth) and versioned migrations.

Times are BIGINT microseconds since the epoch on the database's clock; the job table is keyed
by ``job_id`` (SHA-256 of namespace and key), so no collation can merge two business keys.
A job's attempt history is a JSON array in its row, one entry appended when an attempt ends
(the running attempt is the row's owner): a fresh call writes one row, twice.
Version 1 creates the tables. Later versions append a function to ``MIGRATIONS``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    func,
    inspect,
    select,
)
from sqlalchemy.dialects import mysql, postgresql

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "installed_version",
    "jobs",
    "metadata",
    "upgrade",
]

metadata = MetaData()
_big_text = Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")
_json_array = _big_text.with_variant(postgresql.JSONB(), "postgresql")
_mysql: dict[str, Any] = {
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
    "mysql_engine": "InnoDB",
}

jobs = Table(
    "rill_jobs",
    metadata,
    Column("job_id", String(64), primary_key=True),
    Column("namespace", String(64), nullable=False),
    Column("job_key", String(512), nullable=False),
    Column("state", String(16), nullable=False),
    Column("fence", BigInteger, nullable=False),
    Column("owner_attempt", String(128)),
    Column("claimed_at", BigInteger),
    Column("lease_until", BigInteger),
    Column("fingerprint", String(64), nullable=False),
    Column("result_version", String(128)),
    Column("result", _big_text),
    Column("error", Text),
    Column("retryable", Boolean),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Column("finished_at", BigInteger),
    Column("retain_until", BigInteger),
    Column("attempts", _json_array, nullable=False),
    **_mysql,
)

versions = Table(
    "rill_schema",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("applied_at", BigInteger, nullable=False),
    **_mysql,
)


def _v1(conn: Connection) -> None:
    metadata.create_all(conn, tables=[jobs])


MIGRATIONS: dict[int, Callable[[Connection], None]] = {1: _v1}
SCHEMA_VERSION = max(MIGRATIONS)


def installed_version(conn: Connection) -> int | None:
    """The newest applied version, or None when the schema table is absent."""
    if not inspect(conn).has_table(versions.name):
        return None
    return conn.execute(select(func.max(versions.c.version))).scalar_one_or_none() or 0


def upgrade(conn: Connection, now_us: int) -> list[int]:
    """Apply every missing migration in order, in the caller's transaction."""
    versions.create(conn, checkfirst=True)
    have = installed_version(conn) or 0
    applied = []
    for version in sorted(v for v in MIGRATIONS if v > have):
        MIGRATIONS[version](conn)
        conn.execute(versions.insert().values(version=version, applied_at=now_us))
        applied.append(version)
    return applied
