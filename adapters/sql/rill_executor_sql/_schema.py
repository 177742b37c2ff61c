"""The schema: tables as SQLAlchemy metadata (the source of truth) and versioned migrations.

Times are BIGINT microseconds since the epoch on the database's clock; the job table is keyed
by ``job_id`` (SHA-256 of namespace and key), so no collation can merge two business keys.
A job's attempt history is a JSON array in its row, one entry appended when an attempt ends
(the running attempt is the row's owner): a fresh call writes one row, twice. Its event log
(``events``, e.g. refused completion tokens) is another JSON array, read only by status.
The outbox lives in the job row too: ``watchers`` (JSON object) and ``notices`` (JSON array),
with ``notice_due`` (when its earliest pending notice may be leased) indexed per namespace so
that deliverers find due notices without a scan. ``origin`` and ``trace`` (a W3C traceparent)
belong to the running attempt and move into its history entry when it ends.
Purging a record past retention deletes its row and leaves its last fence in ``rill_fences``
until ``keep_until`` (one retention later), so the next claim of the key continues from it;
``ix_rill_jobs_namespace`` walks a namespace in job id order, as purge and listing do.
A new database gets the current tables; an older one gets the ``MIGRATIONS`` it lacks.
``rill_store`` holds the store's identity, one row created with the schema (``store_id``).
On PostgreSQL the schema has a function too, ``rill_claim`` (version 9, ``claim_function`` in
``_queries``): the claim, which reads a job before it starts an insert. Its result columns are
the job's: a version that changes them replaces it (``DROP FUNCTION``, then create it again).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.dialects import mysql, postgresql

__all__ = [
    "JSON_COLUMNS",
    "MIGRATIONS",
    "create_v1",
    "fences",
    "SCHEMA_VERSION",
    "installed_version",
    "jobs",
    "metadata",
    "read_store_id",
    "upgrade",
]

metadata = MetaData()
_big_text = Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")
_json_array = _big_text.with_variant(postgresql.JSONB(), "postgresql")
JSON_COLUMNS = frozenset({"attempts", "outputs", "watchers", "notices", "events"})  # jsonb on PG
_V2: dict[str, Any] = {"info": {"since": 2}}  # columns a version 1 table lacks
_V4: dict[str, Any] = {"info": {"since": 4}}
_V5: dict[str, Any] = {"info": {"since": 5}}
_V7: dict[str, Any] = {"info": {"since": 7}}
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
    Column("outputs", _json_array, nullable=False, server_default="[]", **_V2),
    Column("origin", Text, **_V4),  # JSON: what the running attempt answers
    Column("watchers", _json_array, nullable=False, server_default="{}", **_V4),
    Column("notices", _json_array, nullable=False, server_default="[]", **_V4),
    Column("notice_due", BigInteger, **_V4),  # notice_due(notices): None when none pending
    Column("events", _json_array, nullable=False, server_default="[]", **_V5),
    Column("trace", String(128), **_V7),  # W3C traceparent of the running attempt's span
    # Only rows with a pending notice (PostgreSQL, SQLite; MariaDB has no partial index):
    # a claim inserts no entry, and a commit without watchers changes none.
    Index(
        "ix_rill_jobs_notice_due",
        "namespace",
        "notice_due",
        postgresql_where=text("notice_due IS NOT NULL"),
        sqlite_where=text("notice_due IS NOT NULL"),
    ),
    # namespace and job_id never change: the index costs the hot-path updates nothing.
    Index("ix_rill_jobs_namespace", "namespace", "job_id", info={"since": 6}),
    **_mysql,
)

fences = Table(
    "rill_fences",
    metadata,
    # The last fence of a purged job, for the next claim of its key (see _flows.purge).
    Column("job_id", String(64), primary_key=True),
    Column("namespace", String(64), nullable=False),
    Column("fence", BigInteger, nullable=False),
    Column("keep_until", BigInteger, nullable=False),
    Index("ix_rill_fences_keep_until", "namespace", "keep_until"),
    **_mysql,
)

versions = Table(
    "rill_schema",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("applied_at", BigInteger, nullable=False),
    **_mysql,
)

identity = Table(
    "rill_store",
    metadata,
    # One row, kept by its fixed key: two upgraders racing cannot both insert one.
    Column("singleton", Integer, primary_key=True, autoincrement=False),
    Column("store_id", String(64), nullable=False),
    **_mysql,
)


def _v2_outputs(conn: Connection) -> None:
    """Version 2: the outputs the running attempt registered (S3 output objects)."""
    kind = jobs.c.outputs.type.compile(dialect=conn.dialect)
    conn.execute(text(f"ALTER TABLE rill_jobs ADD COLUMN outputs {kind} NOT NULL DEFAULT '[]'"))


def _v3_store_id(conn: Connection) -> None:
    """Version 3: the store's identity, carried by the keys of its output objects."""
    identity.create(conn, checkfirst=True)
    if read_store_id(conn) is None:
        conn.execute(identity.insert().values(singleton=1, store_id=uuid.uuid4().hex))


def _v4_outbox(conn: Connection) -> None:
    """Version 4: the outbox (watches, completion notices) and what each attempt answered."""
    kind = jobs.c.notices.type.compile(dialect=conn.dialect)
    for column, default in (("watchers", "'{}'"), ("notices", "'[]'")):
        conn.execute(
            text(f"ALTER TABLE rill_jobs ADD COLUMN {column} {kind} NOT NULL DEFAULT {default}")
        )
    conn.execute(text("ALTER TABLE rill_jobs ADD COLUMN origin TEXT"))
    conn.execute(text("ALTER TABLE rill_jobs ADD COLUMN notice_due BIGINT"))
    (index,) = (i for i in jobs.indexes if i.name == "ix_rill_jobs_notice_due")
    index.create(conn)


def _v5_events(conn: Connection) -> None:
    """Version 5: the job's event log (refused completion tokens)."""
    kind = jobs.c.events.type.compile(dialect=conn.dialect)
    conn.execute(text(f"ALTER TABLE rill_jobs ADD COLUMN events {kind} NOT NULL DEFAULT '[]'"))


def _v6_purge(conn: Connection) -> None:
    """Version 6: purging records past retention (the fences they leave, the walk index)."""
    fences.create(conn, checkfirst=True)
    (index,) = (i for i in jobs.indexes if i.name == "ix_rill_jobs_namespace")
    index.create(conn)


def _v7_trace(conn: Connection) -> None:
    """Version 7: the trace context (W3C traceparent) of the running attempt's span, and
    the notice index for pending notices only where the database has partial indexes."""
    conn.execute(text("ALTER TABLE rill_jobs ADD COLUMN trace VARCHAR(128)"))
    if conn.dialect.name in ("postgresql", "sqlite"):
        (index,) = (i for i in jobs.indexes if i.name == "ix_rill_jobs_notice_due")
        index.drop(conn)
        index.create(conn)


def _v8_claim_function(conn: Connection) -> None:
    """Version 8: PostgreSQL claims through ``rill_claim`` (nothing to do elsewhere)."""
    if conn.dialect.name == "postgresql":
        from ._queries import claim_function  # it reads this module's tables

        conn.exec_driver_sql(claim_function())


def _v9_lapse(conn: Connection) -> None:
    """Version 9: a takeover of a watched job keeps it due at its new lease's end, when a
    lapse notice would be added (PostgreSQL's ``rill_claim``; nothing to do elsewhere)."""
    _v8_claim_function(conn)


def read_store_id(conn: Connection) -> str | None:
    """The store's identity: read once when a store opens."""
    return conn.execute(
        select(identity.c.store_id).where(identity.c.singleton == 1)
    ).scalar_one_or_none()


# Each version's change to the one before. A new database gets ``metadata`` as it is now;
# an older one gets the changes it lacks. Version 1 is the first released table (see
# ``_v1_jobs``), so an upgrade from it is tested against a fresh install.
MIGRATIONS: dict[int, Callable[[Connection], None]] = {
    2: _v2_outputs,
    3: _v3_store_id,
    4: _v4_outbox,
    5: _v5_events,
    6: _v6_purge,
    7: _v7_trace,
    8: _v8_claim_function,
    9: _v9_lapse,
}
SCHEMA_VERSION = 9


def create_v1(conn: Connection, now_us: int) -> None:
    """The schema as version 1 left it: to test upgrades from it."""
    v1 = MetaData()
    Table(
        jobs.name,
        v1,
        *(c._copy() for c in jobs.columns if not c.info.get("since")),
        **_mysql,
    )
    versions.to_metadata(v1).create(conn, checkfirst=True)
    v1.create_all(conn)
    conn.execute(versions.insert().values(version=1, applied_at=now_us))


def installed_version(conn: Connection) -> int | None:
    """The newest applied version, or None when the schema table is absent."""
    if not inspect(conn).has_table(versions.name):
        return None
    return conn.execute(select(func.max(versions.c.version))).scalar_one_or_none() or 0


def upgrade(conn: Connection, now_us: int) -> list[int]:
    """Bring the schema to ``SCHEMA_VERSION`` in the caller's transaction."""
    versions.create(conn, checkfirst=True)
    have = installed_version(conn) or 0
    if have == 0:
        metadata.create_all(conn, tables=[jobs, fences])
        _v3_store_id(conn)
        _v8_claim_function(conn)
        conn.execute(versions.insert().values(version=SCHEMA_VERSION, applied_at=now_us))
        return [SCHEMA_VERSION]
    applied = []
    for version in sorted(v for v in MIGRATIONS if v > have):
        MIGRATIONS[version](conn)
        conn.execute(versions.insert().values(version=version, applied_at=now_us))
        applied.append(version)
    return applied
