"""The settings of a SQL server that make a commit not durable, as a client reads them,
and the store URL's ``durability=warn|require|ignore`` (as the Redis store's).

A commit the server acknowledged and then lost (a crash) lets the next duplicate claim the
job again: the work runs twice. Readable by any client:

- PostgreSQL: ``fsync`` off (a machine crash loses or corrupts committed transactions) and
  ``synchronous_commit`` off for the store's sessions (a commit is acknowledged before its
  WAL is on disk; set for a role, a database or a session, so it can change under a
  running store);
- MariaDB: ``innodb_flush_log_at_trx_commit`` 0 or 2 (the redo log is flushed about once a
  second, not at each commit).

The check runs at open and again while the store is used (``rill_executor.store.Recheck``:
before the first claim after a new connection, at most every 30 s otherwise). SQLite is
not checked.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import URL

from rill_executor import ConfigError
from rill_executor.store import Recheck

__all__ = ["POLICIES", "read_risks", "recheck", "split_durability"]

POLICIES = ("warn", "require", "ignore")

_READS = {
    "postgresql": "SELECT current_setting('fsync'), current_setting('synchronous_commit')",
    "mysql": "SELECT @@innodb_flush_log_at_trx_commit",
}


def split_durability(url: URL, family: str) -> tuple[str, URL]:
    """The URL's ``durability`` (default ``warn``; SQLite: ``ignore``) and the URL without it."""
    policy = url.query.get("durability", "warn" if family in _READS else "ignore")
    if policy not in POLICIES:
        raise ConfigError(f"durability={policy!r} in the store URL; use warn, require or ignore")
    return str(policy), url.difference_update_query(["durability"])


def risks_of(family: str, row: tuple[Any, ...]) -> list[str]:
    """What the settings read by ``_READS[family]`` risk (empty: nothing)."""
    found = []
    if family == "postgresql":
        fsync, synchronous_commit = row
        if fsync == "off":
            found.append(
                "fsync is off: a machine crash loses or corrupts committed transactions"
                " (set fsync = on)"
            )
        if synchronous_commit == "off":
            found.append(
                "synchronous_commit is off for this store's sessions: a commit is acknowledged"
                " before it is on disk, and a crash loses the last ones (ALTER ROLE or ALTER"
                " DATABASE … SET synchronous_commit = on, or RESET it)"
            )
    elif str(row[0]) in ("0", "2"):
        found.append(
            f"innodb_flush_log_at_trx_commit is {row[0]}: a commit is acknowledged before the"
            " redo log is on disk, and a crash loses about a second of commits (SET GLOBAL"
            " innodb_flush_log_at_trx_commit = 1)"
        )
    return found


def read_risks(conn: Any, family: str) -> list[str]:
    """The risks of the server's settings, read on ``conn`` (a SQLAlchemy connection)."""
    row = conn.exec_driver_sql(_READS[family]).one()
    return risks_of(family, tuple(row))


def recheck(policy: str, family: str, where: str) -> Recheck:
    def describe(risks: list[str]) -> str:
        return (
            f"{where} can lose acknowledged claims or commits, and a lost claim or commit"
            f" means a duplicate runs the work again: {'; '.join(risks)}. See"
            " docs/stores.md; add ?durability=ignore to the URL to silence this"
        )

    return Recheck(policy if family in _READS else "ignore", describe)
