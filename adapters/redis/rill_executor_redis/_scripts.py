"""The Lua scripts, one per store operation, and the arguments each call sends.

The ``.lua`` files in ``lua/`` are the source of truth; ``common.lua`` is prepended to each.
Sync and asyncio stores send the same ``EVALSHA``: the script's SHA-1, the job's two keys
(``_keys``), and one argument that packs all the others (``pack``).
"""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

from rill_executor.store import (
    MAX_EVENTS,
    AttemptOutcome,
    AttemptRef,
    ClaimRequest,
    Completion,
    JobState,
    NoticeSettlement,
    Resolution,
    StoreProtocolError,
)

__all__ = [
    "Op",
    "Script",
    "claim_args",
    "event_args",
    "finish_args",
    "heartbeat_args",
    "lease_args",
    "pack",
    "register_output_args",
    "resolve_args",
    "script",
    "settle_args",
    "source",
]

SEPARATOR = b"\xff"  # never part of UTF-8 text: the packed values need no escaping


class Op(enum.StrEnum):
    CLAIM = "claim"
    HEARTBEAT = "heartbeat"
    REGISTER_OUTPUT = "register_output"
    FINISH = "finish"
    STATUS = "status"
    EVENT = "event"
    RESOLVE = "resolve"
    LEASE = "lease"  # standalone: every due job of a namespace in one script
    LEASE_JOB = "lease_job"  # Cluster: one job
    SETTLE = "settle"
    OUTBOX_WATCH = "outbox_watch"  # Cluster: on the namespace's index slot
    OUTBOX_DUE = "outbox_due"
    OUTBOX_UPDATE = "outbox_update"
    PURGE = "purge"  # a batch of jobs past retention (see _purge)
    REINDEX = "reindex"  # standalone: a batch of jobs, once, when a store is upgraded


@dataclass(frozen=True, slots=True)
class Script:
    """One operation's script: its text, and the SHA-1 that ``EVALSHA`` calls it by."""

    op: Op
    source: str
    sha: str
    sha_bytes: bytes  # the same, ASCII, as ``_wire`` sends it


@cache
def source(op: Op) -> str:
    """The full text of ``op``'s script: the shared prelude, then the operation."""
    lua = files(__package__).joinpath("lua")
    return (
        lua.joinpath("common.lua").read_text("utf-8")
        + "\n"
        + lua.joinpath(f"{op.value}.lua").read_text("utf-8")
    )


@cache
def script(op: Op) -> Script:
    text = source(op)
    sha = hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()
    return Script(op, text, sha, sha.encode())


def pack(*values: str) -> bytes:
    """The script's arguments as its one ``ARGV``: UTF-8, joined by ``SEPARATOR``.

    One argument instead of up to nine: redis-py encodes and frames each argument of a
    command in Python, and that costs more than the split in Lua (``args`` in common.lua).
    """
    return SEPARATOR.join([value.encode("utf-8") for value in values])


def claim_args(request: ClaimRequest, token: str = "", *, indexed: bool) -> tuple[bytes, ...]:
    """The claim's arguments; a second packed value only for an origin, a trace or a watch,
    so a plain claim costs the script what it did before the outbox. ``token``: the watch token
    a Cluster store gave the job in its outbox index; ``indexed``: whether the script keeps
    the index itself (standalone): a takeover of a watched job re-indexes it, with a watch
    or without."""
    claim = pack(
        request.namespace,
        request.key,
        request.fingerprint,
        request.result_version or "",  # the core never passes an empty version
        request.attempt_id,
        str(request.lease_us),
        _flag(indexed),
    )
    if request.origin is None and request.trace is None and request.watch is None:
        return (claim,)
    watch_id, target = "", ""
    if request.watch is not None:  # the target travels as JSON text, never re-encoded
        watch = json.loads(request.watch)
        watch_id, target = watch["id"], json.dumps(watch["target"], separators=(",", ":"))
    outbox = pack(
        request.origin or "",  # JSON text is never empty: '' means none
        request.trace or "",  # a traceparent is never empty either
        watch_id,  # a watch id is never empty
        target,
        token,
    )
    return claim, outbox


def event_args(event: str) -> bytes:
    return pack(event, str(MAX_EVENTS))


def resolve_args(resolution: Resolution, *, indexed: bool) -> bytes:
    return pack(
        resolution.action,
        resolution.reason,
        resolution.actor,
        _flag(resolution.force),
        resolution.result or "",  # JSON text is never empty: '' means the committed one
        resolution.error or "",
        str(resolution.retention_us),
        str(MAX_EVENTS),
        _flag(indexed),
    )


def lease_args(owner: str, lease_us: int, limit: int) -> bytes:
    return pack(owner, str(lease_us), str(limit))


def settle_args(settlement: NoticeSettlement, *, indexed: bool) -> bytes:
    detail = settlement.detail
    return pack(
        settlement.notice_id,
        settlement.owner,
        settlement.status,
        settlement.outcome,
        detail or "",
        _flag(detail is not None),
        str(settlement.retry_in_us),
        _flag(indexed),
        _flag(settlement.tried),
    )


def _flag(value: bool) -> str:
    return "1" if value else ""


def heartbeat_args(ref: AttemptRef, lease_us: int) -> bytes:
    return pack(ref.attempt_id, str(ref.fence), str(lease_us))


def register_output_args(ref: AttemptRef, output: str) -> bytes:
    return pack(ref.attempt_id, str(ref.fence), output)


def finish_args(ref: AttemptRef, completion: Completion, *, indexed: bool) -> bytes:
    if completion.state is JobState.PROCESSING:
        raise StoreProtocolError("a completion must be SUCCEEDED or FAILED, got PROCESSING")
    outcome = (
        AttemptOutcome.SUCCEEDED
        if completion.state is JobState.SUCCEEDED
        else AttemptOutcome.FAILED
    )
    retryable = "" if completion.retryable is None else ("1" if completion.retryable else "0")
    return pack(
        ref.attempt_id,
        str(ref.fence),
        completion.state.value,
        outcome.value,
        completion.result or "",  # JSON text is never empty: '' means none
        completion.error or "",
        retryable,
        str(completion.retention_us),
        completion.outputs,
        _flag(indexed),
    )
