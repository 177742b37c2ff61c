"""The schema's versions: what each changed, and bringing a database to the current one.

A new database gets the current tables (``_schema.metadata``); an older one gets the
``MIGRATIONS`` it lacks, in the caller's transaction. ``rill_store.min_writer`` says which
versions of the code may write to the store (version 11 on): a version that changes what the
rows must keep raises it, and brings the rows it finds to the new rule.

On PostgreSQL the schema has a function too, ``rill_claim`` (version 10, ``claim_function``
in ``_queries``): the claim, which reads a job before it starts an insert. Its result
columns are the job's: a version that changes them, or its parameters, replaces it
(``DROP FUNCTION``, then create it again).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from sqlalchemy import Connection, MetaData, Table, func, inspect, select, text, update

from rill_executor.store import JobState, outbox_due

from ._flows import job_row
from ._queries import claim_function
from ._schema import STORE_ROW, _mysql, fences, identity, jobs, metadata, versions

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "create_v1", "installed_version", "upgrade"]


def _v2_outputs(conn: Connection) -> None:
    """Version 2: the outputs the running attempt registered (S3 output objects)."""
    kind = jobs.c.outputs.type.compile(dialect=conn.dialect)
    conn.execute(text(f"ALTER TABLE rill_jobs ADD COLUMN outputs {kind} NOT NULL DEFAULT '[]'"))


def _v3_store_id(conn: Connection) -> None:
    """Version 3: the store's identity, carried by the keys of its output objects."""
    v3 = Table(
        identity.name,
        MetaData(),
        *(c._copy() for c in identity.columns if not c.info.get("since")),
        **_mysql,
    )
    v3.create(conn, checkfirst=True)
    if conn.execute(select(v3.c.store_id)).first() is None:  # kept by a later version too
        conn.execute(v3.insert().values(singleton=1, store_id=uuid.uuid4().hex))


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
        conn.exec_driver_sql(claim_function())


def _v9_lapse(conn: Connection) -> None:
    """Version 9: a takeover of a watched job keeps it due at its new lease's end, when a
    lapse notice would be added (PostgreSQL's ``rill_claim``; nothing to do elsewhere)."""
    _v8_claim_function(conn)


def _v10_watched_insert(conn: Connection) -> None:
    """Version 10: ``rill_claim`` takes the claim's watch (``p_watch``, defaulting to none,
    so a process still on version 9's call goes on working): a first claim with a watch
    inserts its job watched in one statement (PostgreSQL; nothing to do elsewhere)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(
            "DROP FUNCTION IF EXISTS rill_claim(varchar, varchar, varchar, varchar, bigint,"
            " varchar, varchar, text, varchar)"
        )
        _v8_claim_function(conn)


def _v11_writers(conn: Connection) -> None:
    """Version 11: the store says which code may write to it, and keeps out the code that
    cannot read that. ``rill_store`` gets ``min_writer`` (11) and its row moves to key
    ``STORE_ROW``: a process of version 10 or older finds no row 1 and refuses the store.
    A watched job still running gets the lapse due a process of version 8 or older left
    out (``outbox_due``), so the job is re-driven if its owner has died."""
    if "min_writer" not in {c["name"] for c in inspect(conn).get_columns(identity.name)}:
        # (a new schema over a kept rill_store may have it: upgrade, version 0)
        kind = "INTEGER NOT NULL DEFAULT 11"
        conn.execute(text(f"ALTER TABLE rill_store ADD COLUMN min_writer {kind}"))
    conn.execute(
        update(identity).where(identity.c.singleton == 1).values(singleton=STORE_ROW, min_writer=11)
    )
    running = conn.execute(select(jobs).where(jobs.c.state == JobState.PROCESSING.value))
    for row in running.mappings().all():
        due = outbox_due(job_row(row))
        if due != row["notice_due"]:
            conn.execute(update(jobs).where(jobs.c.job_id == row["job_id"]).values(notice_due=due))


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
    10: _v10_watched_insert,
    11: _v11_writers,
}
SCHEMA_VERSION = 11


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
        _v11_writers(conn)
        conn.execute(versions.insert().values(version=SCHEMA_VERSION, applied_at=now_us))
        return [SCHEMA_VERSION]
    applied = []
    for version in sorted(v for v in MIGRATIONS if v > have):
        MIGRATIONS[version](conn)
        conn.execute(versions.insert().values(version=version, applied_at=now_us))
        applied.append(version)
    return applied
