"""``open_store`` / ``open_async_store``: a URL's scheme names the adapter, via entry points.

An adapter distribution registers ``scheme = "package.module:factory"`` under the groups
``rill_executor.stores`` and ``rill_executor.async_stores``, and, if its stores have a
schema, ``scheme = "package.module:upgrade"`` under ``rill_executor.schema``.
``postgresql+psycopg://`` is looked up as ``postgresql+psycopg`` first, then ``postgresql``.
"""

from __future__ import annotations

import functools
from importlib.metadata import EntryPoint, entry_points
from typing import Any, cast

from ._errors import ConfigError
from ._outputs import OutputStore
from ._store import AsyncStore, Store

__all__ = ["open_async_store", "open_output_store", "open_store", "upgrade_schema"]

_HINTS = {
    "sqlite": "rill-executor-sql",
    "postgresql": "rill-executor-sql[postgres]",
    "mysql": "rill-executor-sql[mariadb]",
    "mariadb": "rill-executor-sql[mariadb]",
    "redis": "rill-executor-redis",
    "rediss": "rill-executor-redis",
    "redis+cluster": "rill-executor-redis",
    "s3": "rill-executor-s3",
}

# Spellings other tools accept (Heroku's DATABASE_URL, libpq) that SQLAlchemy refuses.
_SPELLINGS = {"postgres": "postgresql+psycopg"}


@functools.cache
def _installed(group: str) -> dict[str, EntryPoint]:
    """The entry points of ``group``, read once a process: reading them scans the metadata
    of every installed distribution (tens of milliseconds, more than opening a store)."""
    return {ep.name: ep for ep in entry_points(group=group)}


def _factory(url: str, group: str) -> Any:
    if not isinstance(url, str) or "://" not in url:
        raise ConfigError(
            f"store URL {url!r} has no scheme; use e.g. 'sqlite:///jobs.db',"
            " 'postgresql+psycopg://user@host/db' or 'memory://'"
        )
    scheme = url.split("://", 1)[0].lower()
    names = (scheme, scheme.split("+", 1)[0])
    found = _installed(group)
    if not any(name in found for name in names):
        _installed.cache_clear()  # an adapter installed since the last look is found
        found = _installed(group)
    for name in names:
        if name in found:
            return found[name].load()
    base = scheme.split("+", 1)[0]
    if base in _SPELLINGS:
        raise ConfigError(
            f"store URL scheme {scheme!r} is not one SQLAlchemy knows; write the URL as"
            f" '{_SPELLINGS[base]}://user:password@host:port/database' (the rest unchanged)"
        )
    hint = _HINTS.get(scheme) or _HINTS.get(base)
    install = f" Install {hint} (pip install '{hint}')." if hint else ""
    raise ConfigError(
        f"no store adapter for scheme {scheme!r}.{install} Installed schemes:"
        f" {', '.join(sorted(found)) or 'none'}"
    )


def open_store(url: str) -> Store:
    """Open a synchronous store by URL (``memory://``, ``sqlite:///jobs.db``, …)."""
    return cast(Store, _factory(url, "rill_executor.stores")(url))


def open_async_store(url: str) -> AsyncStore:
    """Open an asyncio store by URL; the same schemes as ``open_store``."""
    return cast(AsyncStore, _factory(url, "rill_executor.async_stores")(url))


def open_output_store(url: str) -> OutputStore:
    """Open an output store by URL (``s3://bucket/prefix?endpoint_url=…``)."""
    return cast(OutputStore, _factory(url, "rill_executor.output_stores")(url))


def upgrade_schema(url: str) -> list[int]:
    """Apply the store's missing schema migrations; returns the versions applied."""
    try:
        upgrade = _factory(url, "rill_executor.schema")
    except ConfigError:
        _factory(url, "rill_executor.stores")  # an unknown scheme says so
        return []  # a store without a schema
    return cast(list[int], upgrade(url))
