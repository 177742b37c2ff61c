"""Purging a namespace's records past retention on Redis: a ``SCAN``, then ``purge.lua``.

As a listing (``_listing``), a purge scans: ``SCAN`` with the job-key pattern, one step at
a time, on each primary in turn, with ``COUNT`` sized to what the page may still delete.
The job ids a step found go to ``purge.lua``, which checks every rule again on the
server's clock and deletes in the same script: one ``EVALSHA`` for a batch on a standalone
server, one per job, pipelined, on a Cluster (a script reaches one slot only). A job
claimed again since the ``SCAN`` is live and stays.

A batch holds at most what the page may still delete, so a page deletes at most ``limit``
records; ids a step found beyond that travel in the cursor to the next page, so none is
skipped. A batch also holds at most ``_BATCH`` jobs: Redis runs one script at a time and a
claim that arrives meanwhile waits for it, so each script stays short (about 1 ms at most).
A page ends once it has looked at ``_LOOK`` times its ``limit`` keys or taken ``_STEPS``
steps, so a namespace with few records among many keys of others costs several short
calls rather than one long one.

The cursor says where to go on: ``<node index>:<SCAN cursor>``, then ``:<id>,<id>...``
when ids wait, node indexes in the order of the primaries' names (as in ``_listing``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from rill_executor.store import PurgePage, PurgeRequest, StoreProtocolError, UsageError

from ._keys import job_id_of
from ._scripts import pack

__all__ = ["Purge", "purge_args"]

_COUNT = (16, 250)  # the SCAN COUNT hint: what the page may still delete, within these
_LOOK = 10  # a page looks at no more than this many times its limit of keys
_STEPS = 100  # and takes no more SCAN steps than this
_BATCH = 50  # jobs per purge.lua (or pipeline): a script blocks the server while it runs
_CURSOR = re.compile(r"(\d+):(\d+)(?::((?:[0-9a-f]{64},)*[0-9a-f]{64}))?")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def purge_args(request: PurgeRequest, *, indexed: bool) -> bytes:
    return pack(
        request.namespace,
        str(request.dangling_after_us),
        "1" if request.dry_run else "",
        "1" if indexed else "",
    )


@dataclass
class Purge:
    """One ``purge`` page, free of I/O: the store runs each ``step`` and ``batch``."""

    request: PurgeRequest
    nodes: int
    node: int = 0
    cursor: int = 0
    waiting: list[str] = field(default_factory=list)  # found, not yet sent
    done: bool = False
    purged: int = 0
    kept: int = 0
    looked: int = 0
    steps: int = 0
    now: int = 0
    tokens: list[tuple[str, str]] = field(default_factory=list)  # purged, with a watch token

    def __post_init__(self) -> None:
        after = self.request.after
        if after is None:
            return
        match = _CURSOR.fullmatch(after)
        # past the last node only while ids found there wait
        if match is None or not int(match[1]) < self.nodes + (1 if match[3] else 0):
            raise UsageError(
                f"cursor {after!r} is not one this store returned"
                " (or the cluster's primaries changed since)"
            )
        self.node, self.cursor = int(match[1]), int(match[2])
        self.waiting = match[3].split(",") if match[3] else []
        self.done = self.node >= self.nodes

    @property
    def room(self) -> int:
        """How many more records this page may delete."""
        return self.request.limit - self.purged

    def batch(self) -> list[str]:
        """The job ids to send to ``purge.lua`` next; none once the page is full."""
        return self.waiting[: min(self.room, _BATCH)] if self.room > 0 else []

    def step(self) -> tuple[int, int, int] | None:
        """The (node index, SCAN cursor, COUNT) to scan next, or None when the page ends."""
        if self.done or self.waiting or self.room <= 0:
            return None
        if self.looked >= _LOOK * self.request.limit or self.steps >= _STEPS:
            return None
        return self.node, self.cursor, max(_COUNT[0], min(self.room, _COUNT[1]))

    def scanned(self, cursor: int, keys: list[Any]) -> None:
        """What one ``SCAN`` step found: the next cursor and the job keys."""
        self.looked += len(keys)
        self.steps += 1
        ids = (job_id_of(key) for key in keys)
        self.waiting = list(dict.fromkeys(ids))  # SCAN may return a key twice
        if cursor == 0:
            self.node, self.cursor = self.node + 1, 0
            self.done = self.node >= self.nodes
        else:
            self.cursor = cursor

    def add(self, job_ids: list[str], replies: list[Any]) -> None:
        """The ``purge.lua`` replies for ``job_ids``: one for all (standalone) or one each."""
        self.waiting = self.waiting[len(job_ids) :]
        codes, tokens = "", []
        for reply in replies:
            now, part, joined = _reply(reply)
            self.now = max(self.now, now)
            codes += part
            tokens += joined.split(",")
        if len(codes) != len(job_ids) or len(tokens) != len(job_ids):
            raise StoreProtocolError(f"purge.lua answered {codes!r} for {len(job_ids)} jobs")
        for job_id, code, token in zip(job_ids, codes, tokens, strict=True):
            if code == "1":
                self.purged += 1
                if token and not self.request.dry_run:
                    self.tokens.append((job_id, token))
            elif code == "2":
                self.kept += 1

    def outbox_update(self) -> bytes | None:
        """Redis Cluster: the ``outbox_update.lua`` arguments that drop the index entries of
        the jobs purged since the last call (each only under the token its job had)."""
        if not self.tokens:
            return None
        tokens, self.tokens = self.tokens, []
        return pack(*[part for job_id, token in tokens for part in (job_id, token, "", "")])

    def page(self, now: int) -> PurgePage:
        """The page; ``now`` is the server's time when nothing was sent to ``purge.lua``."""
        cursor = None
        if not self.done or self.waiting:
            cursor = f"{self.node}:{self.cursor}"
            if self.waiting:
                cursor += ":" + ",".join(self.waiting)
        return PurgePage(self.purged, self.kept, cursor, self.now or now)


def _reply(reply: Any) -> tuple[int, str, str]:
    try:
        now, codes, tokens = json.loads(_text(reply))
        return int(now), str(codes), str(tokens)
    except (ValueError, TypeError) as exc:
        raise StoreProtocolError(f"malformed purge reply {reply!r:.300}") from exc
