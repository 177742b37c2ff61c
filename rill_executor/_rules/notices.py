"""The outbox: completion notices kept in the job record, and the rules for them (no I/O).

A claim may carry a *watch*: a dispatch that waits for the job's end (for Rill Flow, the
engine's callback URL of one task). The store keeps the watches of a running job with it; the
fenced ``finish`` turns every watch into a *notice* in the same atomic write, and a claim that
finds the job already ended turns its watch into a notice at once. A notice is therefore
only ever made for an outcome that won a fenced finish, and it is durable before anything is
sent. Deliverers lease notices (so that several processes never send one twice at the same
time), send them, and settle them: delivered, dropped (the engine will never take it), or
pending again after a delay.

A watched job whose owner dies, or cannot reach the store to finish, would leave its
watchers waiting for ever: nobody else writes its end. So a processing job with watches
is due for the deliverers when its owner's lease runs out (``outbox_due``), and the lease
of notices adds a *lapse notice* to it then (``lapse_notices``: state ``processing``, no
watch, one per fence), judged on the store's clock. A deliverer that leases it re-drives
the job (runs it again, or ends it as a retryable failure the watchers are told of).

Watches and notices are JSON in the job record: ``watchers`` is an object (watch id →
target), ``notices`` an array. The target is opaque to stores.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic_core import PydanticSerializationError, to_json

from .._errors import InvalidPayload
from .._records import JobState
from .._text import printable, printable_json

if TYPE_CHECKING:
    from .._records import JobRow, NoticeInfo
    from .._store import NoticeSettlement

MAX_WATCH_ID_CHARS = 256


@dataclass(frozen=True, slots=True)
class Watch:
    """Ask to be told when the job ends: ``id`` names who waits (one notice per id and
    outcome; for Rill Flow, the engine task), ``target`` where to send it (JSON data)."""

    id: str
    target: Any

    def encode(self) -> str:
        if not isinstance(self.id, str) or not 0 < len(self.id) <= MAX_WATCH_ID_CHARS:
            raise InvalidPayload(
                f"watch id {self.id!r} must be a non-empty str of at most"
                f" {MAX_WATCH_ID_CHARS} characters"
            )
        printable(self.id, "watch id", InvalidPayload)
        target = json.loads(encode_json(self.target, "watch"))
        printable_json(target, "a string of the watch target", InvalidPayload)
        return _dump({"id": self.id, "target": target})


def encode_json(value: Any, what: str) -> str:
    """``value`` as compact JSON text, or ``InvalidPayload`` naming ``what``."""
    try:
        return to_json(value).decode()
    except (PydanticSerializationError, ValueError, TypeError) as exc:
        raise InvalidPayload(f"the {what} must be JSON data: {exc}") from exc


@dataclass(frozen=True, slots=True)
class DueNotice:
    """A notice leased to this deliverer: send it, then settle it before the lease ends."""

    job_id: str
    namespace: str
    key: str
    owner: str
    info: NoticeInfo
    result: Any  # the committed result (JSON data) for a notice of success, else None


__all__ = [
    "DueNotice",
    "NoticeStatus",
    "Watch",
    "add_watch",
    "finish_notices",
    "is_lapse",
    "is_unsent",
    "lapse_notices",
    "lease_notice",
    "leasable",
    "notice_due",
    "outbox_due",
    "replay_notice",
    "settle_notice",
]

_COMPACT = (",", ":")


class NoticeStatus:
    PENDING = "pending"
    DELIVERED = "delivered"
    DROPPED = "dropped"


_ENCODER = json.JSONEncoder(separators=_COMPACT)  # json.dumps builds one a call otherwise


def _dump(value: Any) -> str:
    return _ENCODER.encode(value)


def add_watch(watchers: str, watch: str | None) -> str:
    """``watchers`` with ``watch`` ({"id", "target"}) added; a later watch with the same id
    replaces the earlier one (a re-dispatch of one engine task: its newest callback wins)."""
    if watch is None:
        return watchers
    entry = json.loads(watch)
    found = json.loads(watchers or "{}")
    found[entry["id"]] = entry["target"]
    return _dump(found)


def _notice(
    seq: int, watch_id: str, target: Any, fence: int, state: str, error: str | None, now: int
) -> dict[str, Any]:
    return {
        "id": f"{fence}.{seq}",
        "watch": watch_id,
        "target": target,
        "fence": fence,
        "state": state,  # the job outcome it reports: succeeded / failed
        "error": None if error is None else json.loads(error),
        "status": NoticeStatus.PENDING,
        "attempts": 0,
        "due": now,
        "lease_owner": None,
        "lease_until": None,
        "outcome": None,
        "detail": None,
        "created_at": now,
        "settled_at": None,
    }


def finish_notices(
    notices: str, watchers: str, fence: int, state: str, error: str | None, now: int
) -> str:
    """The notices after a finish at ``fence``: one more per watch, reporting ``state``."""
    found = json.loads(notices or "[]")
    for watch_id, target in json.loads(watchers or "{}").items():
        found.append(_notice(len(found) + 1, watch_id, target, fence, state, error, now))
    return _dump(found)


def replay_notice(
    notices: str, watch: str, fence: int, state: str, error: str | None, now: int
) -> str:
    """The notices after a claim found the job ended at ``fence``: the watch is answered from
    the stored outcome. A notice of the same watch and fence to the same target answers it
    (the engine's resend of a dispatch: a second callback would only be refused as a
    duplicate); a pending one not being sent takes the new target instead of a second notice
    (a quick re-dispatch: one callback is enough). One being sent (leased) keeps its target,
    and the new one gets a notice of its own: the redo it answers must hear too."""
    entry = json.loads(watch)
    found = json.loads(notices or "[]")
    for notice in found:
        if notice["watch"] != entry["id"] or notice["fence"] != fence:
            continue
        if notice["status"] != NoticeStatus.DROPPED and notice["target"] == entry["target"]:
            return _dump(found)
        if notice["status"] == NoticeStatus.PENDING and (notice["lease_until"] or 0) <= now:
            notice["target"] = entry["target"]
            return _dump(found)
    found.append(_notice(len(found) + 1, entry["id"], entry["target"], fence, state, error, now))
    return _dump(found)


def leasable(notice: dict[str, Any], now: int) -> bool:
    lease = notice["lease_until"]
    return (
        notice["status"] == NoticeStatus.PENDING
        and notice["due"] <= now
        and (lease is None or lease <= now)
    )


def notice_due(notices: str) -> int | None:
    """When the earliest pending notice may next be leased (its due time or the end of its
    lease); None when nothing is pending. SQL stores index this."""
    due = [
        max(n["due"], n["lease_until"] or 0)
        for n in json.loads(notices or "[]")
        if n["status"] == NoticeStatus.PENDING
    ]
    return min(due) if due else None


def is_unsent(notice: dict[str, Any]) -> bool:
    """Pending, and given back unsent (``NoticeSettlement.tried`` False) by every deliverer
    that leased it: it waits for one that may send it (``NoticeInfo.unsent``)."""
    return (
        notice["status"] == NoticeStatus.PENDING
        and notice["attempts"] == 0
        and notice["outcome"] is not None
    )


def is_lapse(notice: dict[str, Any]) -> bool:
    """A lapse notice (see the module docs), not a job outcome to report."""
    return bool(notice["state"] == JobState.PROCESSING.value)


def _lapse_due(job: JobRow, found: list[dict[str, Any]]) -> bool:
    """True while ``job`` waits for a lapse notice: processing, watched, and none yet for
    its owner's fence."""
    return (
        job.state is JobState.PROCESSING
        and job.lease_until is not None
        and bool(json.loads(job.watchers or "{}"))
        and not any(is_lapse(n) and n["fence"] == job.fence for n in found)
    )


def outbox_due(job: JobRow) -> int | None:
    """When ``job``'s outbox next needs a deliverer: its earliest pending notice
    (``notice_due``) or, for a watched job still processing, its owner's lease end
    (``lapse_notices``), whichever comes first; None when neither. SQL stores index it."""
    due = notice_due(job.notices)
    if job.lease_until is not None and _lapse_due(job, json.loads(job.notices or "[]")):
        return job.lease_until if due is None else min(due, job.lease_until)
    return due


def lapse_notices(job: JobRow, now: int) -> str | None:
    """``job``'s notices with a lapse notice added, if it is processing with watches and
    its owner's lease ran out at ``now``; None when no lapse notice is due."""
    if job.state is not JobState.PROCESSING or (job.lease_until or 0) > now:
        return None  # decided before any JSON is read: the common case of a lease poll
    if job.watchers in ("", "{}"):
        return None  # nobody waits: no lapse to tell
    found = json.loads(job.notices or "[]")
    if not _lapse_due(job, found):
        return None
    found.append(_notice(len(found) + 1, "", None, job.fence, JobState.PROCESSING.value, None, now))
    return _dump(found)


def lease_notice(notice: dict[str, Any], owner: str, lease_us: int, now: int) -> None:
    notice["lease_owner"] = owner
    notice["lease_until"] = now + lease_us
    notice["attempts"] += 1


def settle_notice(notices: str, settlement: NoticeSettlement, now: int) -> str | None:
    """The notices with ``settlement`` applied, or None if its owner does not hold the
    notice's lease any more (another deliverer may have it: nothing is written)."""
    found = json.loads(notices or "[]")
    for notice in found:
        if notice["id"] != settlement.notice_id:
            continue
        lease = notice["lease_until"]
        held = notice["lease_owner"] == settlement.owner and lease is not None and lease > now
        if not held or notice["status"] != NoticeStatus.PENDING:
            return None
        again = settlement.status == NoticeStatus.PENDING
        notice.update(
            attempts=notice["attempts"] - (0 if settlement.tried else 1),
            status=settlement.status,
            lease_owner=None,
            lease_until=None,
            outcome=settlement.outcome,
            detail=settlement.detail,
            settled_at=None if again else now,
            due=now + settlement.retry_in_us if again else notice["due"],
        )
        return _dump(found)
    return None
