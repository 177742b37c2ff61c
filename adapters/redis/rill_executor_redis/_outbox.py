"""The outbox index of a namespace, and one ``lease_notices`` pass over it on a Redis Cluster.

``lease_notices`` must not scan the keyspace, so each namespace has an index: a sorted set
of the ids of its jobs that may have due notices, scored by when to look at them.

- Standalone Redis: the scripts that make, lease and settle notices keep the index exact in
  the same script (a standalone server lets a script reach keys of any slot): it holds the
  jobs with pending notices, scored by when the first can be leased, and the watched jobs
  still processing, scored by their lease end (``outbox_due``: their lapse notice);
  ``lease.lua`` leases across jobs in one script, earliest due first.
- Redis Cluster: a script reaches only its own slot, and the index lives in another slot
  than the job. The index is kept a superset that never misses a job with a pending
  notice. Notices come only from watches, so before a claim with a watch the store puts
  the job in the index, due now, under a fresh token that the claim script also writes
  into the job (``outbox_watch.lua``: one more round trip for those claims only). A pass
  (``ClusterPass``) reads the due entries, leases each job's notices with a script on its
  slot, and re-scores the entries in one script on the index slot: the job's next due
  time; a job whose watches still wait for its finish is looked at again on the next
  pass; a job with neither is dropped. An entry changes only if the job's token is the
  index's one: a claim with a watch that came meanwhile (its token in the index, not yet
  in the job) keeps the entry. A pass leases job by job, in the index's order, so "earliest
  due first" holds between jobs, not between the notices of different jobs in one batch.
"""

from __future__ import annotations

import json
import uuid

from rill_executor.store import LeasedNotice, NoticeBatch, StoreProtocolError

from ._rows import JobNotices
from ._scripts import lease_args, pack

__all__ = ["ClusterPass", "new_token", "settled_update"]

_PAGE = 64  # index entries read at a time


def new_token() -> str:
    return uuid.uuid4().hex


class ClusterPass:
    """One ``lease_notices`` over a Cluster index, free of I/O: the store sends what it asks."""

    def __init__(self, owner: str, lease_us: int, limit: int) -> None:
        self.owner, self.lease_us, self.limit = owner, lease_us, limit
        self.page = max(limit, _PAGE)
        self.now = 0
        self.leased: list[LeasedNotice] = []
        self.seen: set[str] = set()
        self.updates: list[str] = []
        self.done = False

    def due_args(self) -> bytes:
        return pack(str(self.page))

    def candidates(self, reply: object) -> list[tuple[str, str]]:
        """The fresh (job id, score) entries of an ``outbox_due.lua`` reply."""
        try:
            now, flat = json.loads(reply.decode() if isinstance(reply, bytes) else str(reply))
            flat = flat or []  # cjson writes an empty list as {}
            self.now = int(now)
        except (ValueError, TypeError) as exc:
            raise StoreProtocolError(f"malformed outbox index reply {reply!r:.300}") from exc
        entries = list(zip(flat[::2], flat[1::2], strict=True))
        fresh = [(job_id, score) for job_id, score in entries if job_id not in self.seen]
        self.done = len(entries) < self.page or not fresh
        return fresh

    @property
    def full(self) -> bool:
        return len(self.leased) >= self.limit

    def job_args(self) -> bytes:
        return lease_args(self.owner, self.lease_us, self.limit - len(self.leased))

    def add(self, job_id: str, score: str, job: JobNotices) -> None:
        self.seen.add(job_id)
        self.leased.extend(job.leased)
        later = self.now + 1  # watches wait: look again on the next pass
        due = min(job.next_due or later, later) if job.watched else job.next_due
        self.updates += [job_id, job.token, score, "" if due is None else str(due)]

    def update_args(self) -> bytes | None:
        """The ``outbox_update.lua`` arguments for the jobs read since the last call."""
        if not self.updates:
            return None
        updates, self.updates = self.updates, []
        return pack(*updates)

    def batch(self) -> NoticeBatch:
        return NoticeBatch(self.leased, self.now)


def settled_update(job_id: str, job: JobNotices) -> bytes:
    """After a settle on a Cluster: the entry due at the job's next due time (at once if
    watches wait), or dropped if nothing is pending or watched."""
    due: int | None = 0 if job.watched else job.next_due
    return pack(job_id, job.token, "", "" if due is None else str(due))
