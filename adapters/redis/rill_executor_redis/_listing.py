"""Listing a namespace's jobs on Redis: a ``SCAN`` over job keys, read and filtered here.

Redis keeps no index of a namespace's jobs (a claim touches only its job's slot, so that
every operation stays one script on one slot), so a listing scans: ``SCAN`` with the job-key
pattern, one step at a time, on each primary in turn (one on a standalone server), then one
pipelined ``HMGET`` of the keys a step found, filtered with the core's ``listed`` on the
node's clock. A page ends after the step that filled it, so it holds every match of its
steps: possibly more than ``limit``, never a job lost between pages. ``SCAN`` returns
every key present for the whole scan at least once, and may return a key twice.

The cursor says where to go on: ``<node index>:<SCAN cursor>``, node indexes in the order
of the primaries' names.

``list_statuses`` scans the same way, and reads each key a step found whole: one pipelined
``EVALSHA`` of ``status.lua`` a key, so each job is read atomically (its record, attempts
and event log together) and a step still costs one ``SCAN`` and one round trip.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rill_executor.store import (
    JobPage,
    JobQuery,
    JobRow,
    StatusPage,
    StoreStatus,
    UsageError,
    listed,
)

from ._keys import PREFIX, job_id_of
from ._rows import job_from_fields, status_from

__all__ = ["MATCH", "STEP", "Scan", "scan_reply", "time_reply"]

MATCH = f"{PREFIX}:{{*}}:job"  # braces are literal in a SCAN pattern
STEP = 512  # keys a SCAN step looks at


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class Scan:
    """One page of a listing, free of I/O: the store runs each ``step`` and ``add``s it."""

    query: JobQuery
    nodes: int
    node: int = 0
    cursor: int = 0
    done: bool = False
    found: list[JobRow] = field(default_factory=list)
    statuses: list[StoreStatus] = field(default_factory=list)
    now: int = 0

    def __post_init__(self) -> None:
        if self.query.after is None:
            return
        try:
            node, cursor = (int(part) for part in self.query.after.split(":"))
        except ValueError:
            node, cursor = -1, -1
        if not (0 <= node < self.nodes and cursor >= 0):
            raise UsageError(
                f"cursor {self.query.after!r} is not one this store returned"
                " (or the cluster's primaries changed since)"
            )
        self.node, self.cursor = node, cursor

    def step(self) -> tuple[int, int] | None:
        """The (node index, SCAN cursor) to scan next, or None when the page is complete."""
        if self.done or len(self.found) + len(self.statuses) >= self.query.limit:
            return None
        return self.node, self.cursor

    def add(self, cursor: int, keys: list[Any], values: list[list[Any]], now: int) -> None:
        """What one step found: the next SCAN cursor, the keys and their HMGET replies."""
        self.now = max(self.now, now)
        for key, fields in zip(keys, values, strict=True):
            job_id = job_id_of(key)
            if fields[0] is None:  # expired between the SCAN and the read
                continue
            job = job_from_fields(job_id, [None if v is None else _text(v) for v in fields])
            if listed(job, self.query, now):
                self.found.append(job)
        self._advance(cursor)

    def add_whole(self, cursor: int, keys: list[Any], replies: list[Any], now: int) -> None:
        """What one step found read whole: the next SCAN cursor, the keys and their
        ``status.lua`` replies (each judged on its own read's time)."""
        self.now = max(self.now, now)
        for key, reply in zip(keys, replies, strict=True):
            found = status_from(job_id_of(key), reply)
            if found is None:  # expired between the SCAN and the read
                continue
            if listed(found.job, self.query, found.now):
                self.statuses.append(found)
        self._advance(cursor)

    def _advance(self, cursor: int) -> None:
        if cursor == 0:
            self.node, self.cursor = self.node + 1, 0
            self.done = self.node >= self.nodes
        else:
            self.cursor = cursor

    def page(self) -> JobPage:
        cursor = None if self.done else f"{self.node}:{self.cursor}"
        return JobPage(self.found, cursor, self.now)

    def status_page(self) -> StatusPage:
        cursor = None if self.done else f"{self.node}:{self.cursor}"
        return StatusPage(self.statuses, cursor, self.now)


def scan_reply(reply: Any) -> tuple[int, list[Any]]:
    """(next cursor, keys) of a ``SCAN``; a Cluster client answers {node: cursor} for one
    targeted node."""
    cursor, keys = reply
    if isinstance(cursor, dict):
        (cursor,) = cursor.values()
    return int(cursor), list(keys)


def time_reply(reply: Any) -> int:
    """Microseconds since the epoch from a ``TIME`` reply ((seconds, microseconds));
    a Cluster client may wrap a targeted node's reply as {node: reply}."""
    if isinstance(reply, dict):
        (reply,) = reply.values()
    seconds, micros = reply
    return int(seconds) * 1_000_000 + int(micros)
