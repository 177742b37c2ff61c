"""Which versions of the code may write to a store: read, and raised, when a store opens.

The key ``rill:store-id`` is a hash: the store's identity (``id``), the newest version of
this library that opened it (``version``) and the oldest that may write to it
(``min_writer``); ``lua/open.lua`` creates it, or turns the string of version 10 and older
into it. A process whose version is below ``min_writer`` refuses the store
(``IncompatibleStore``): a newer version relies on invariants it would break. The numbers
are the SQL schema's (rill_executor_sql.SCHEMA_VERSION): version 11 is the first to record
them on Redis. Processes of version 10 and older read the key with ``GET``: they fail at
open (``WRONGTYPE``) once a process of version 11 has opened the store. The process that
upgrades a standalone store puts every job where the outbox index says it belongs
(``_flows.reindex``): version 8 and older left watched running jobs out of it.
"""

from __future__ import annotations

import uuid
from functools import cache
from importlib.resources import files
from typing import Any, NamedTuple

from rill_executor.store import IncompatibleStore, StoreProtocolError

__all__ = ["MIN_WRITER", "STORE_VERSION", "Opened", "open_args", "open_script", "opened"]

STORE_VERSION = 11  # the version of this code
MIN_WRITER = 11  # the oldest version that keeps the invariants this code relies on


@cache
def open_script() -> str:
    return files(__package__).joinpath("lua", "open.lua").read_text("utf-8")


def open_args() -> tuple[str, int, int]:
    """A new identity (used if the store has none), this code's version, its oldest writer."""
    return uuid.uuid4().hex, STORE_VERSION, MIN_WRITER


class Opened(NamedTuple):
    store_id: str
    upgraded: bool  # this open upgraded a store of version 10 or older: reindex it


def opened(reply: Any, where: str) -> Opened:
    """The store's identity from ``open.lua``'s reply, once this code may write to it."""
    try:
        found, _, min_writer, before = reply
        store_id = found.decode() if isinstance(found, bytes) else str(found)
        oldest, upgraded = int(min_writer), int(before) == 0
    except (TypeError, ValueError) as exc:
        raise StoreProtocolError(f"Redis at {where} answered {reply!r} to opening") from exc
    if oldest > STORE_VERSION:
        raise IncompatibleStore(
            f"Redis at {where} admits writers of version {oldest} or newer; this library"
            f" is version {STORE_VERSION} and could break the invariants of its records."
            " Nothing was written: run a newer rill-executor-redis here"
            " (docs/operations.md, Upgrading)"
        )
    return Opened(store_id, upgraded)
