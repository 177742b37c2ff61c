"""The schema: tables as SQLAlchemy metadata (the source of truth; ``_migrations`` brings
an older database to it).

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
``rill_store`` holds the store's identity, one row created with the schema (``store_id``),
and the oldest version of this library that may write to the store (``min_writer``): a
process of an older version refuses the store (``IncompatibleStore``). Version 11 moved the
row from key 1 to ``STORE_ROW``: processes of version 10 and older read row 1, which they
cannot find, and refuse the store (``SchemaMissing``) rather than break its invariants.
On PostgreSQL the schema has a function too, ``rill_claim`` (``_migrations``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

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
    select,
    text,
)
from sqlalchemy.dialects import mysql, postgresql

__all__ = [
    "JSON_COLUMNS",
    "STORE_ROW",
    "StoreRecord",
    "fences",
    "identity",
    "jobs",
    "metadata",
    "read_store",
    "versions",
]

metadata = MetaData()
_big_text = Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")
_json_array = _big_text.with_variant(postgresql.JSONB(), "postgresql")
JSON_COLUMNS = frozenset({"attempts", "outputs", "watchers", "notices", "events"})  # jsonb on PG
_V2: dict[str, Any] = {"info": {"since": 2}}  # columns a version 1 table lacks
_V4: dict[str, Any] = {"info": {"since": 4}}
_V5: dict[str, Any] = {"info": {"since": 5}}
_V7: dict[str, Any] = {"info": {"since": 7}}
_V11: dict[str, Any] = {"info": {"since": 11}}
STORE_ROW = 2  # the key of rill_store's row since version 11 (version 3 wrote it as 1)
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
    Column("min_writer", Integer, nullable=False, **_V11),
    **_mysql,
)


class StoreRecord(NamedTuple):
    store_id: str
    min_writer: int  # the oldest schema version whose code may write to the store


def read_store(conn: Connection) -> StoreRecord | None:
    """The store's identity and oldest writer version: read once when a store opens."""
    row = conn.execute(
        select(identity.c.store_id, identity.c.min_writer).where(identity.c.singleton == STORE_ROW)
    ).one_or_none()
    return None if row is None else StoreRecord(row.store_id, int(row.min_writer))
