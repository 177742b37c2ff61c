"""SQL job store for rill-executor: PostgreSQL, SQLite (the embedded default) and MariaDB.

from rill_executor import Ledger
ledger = Ledger("postgresql+psycopg://app@db/jobs", namespace="transcode")
"""

from ._migrations import SCHEMA_VERSION
from ._store import AsyncSqlStore, SqlStore, open_async_sql_store, open_sql_store, upgrade_schema

__all__ = [
    "SCHEMA_VERSION",
    "AsyncSqlStore",
    "SqlStore",
    "open_async_sql_store",
    "open_sql_store",
    "upgrade_schema",
]
