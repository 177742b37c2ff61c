"""Manual resolution: an operator decides a job's outcome, fenced, with reason and actor.

Every action bumps the job's fence and clears its owner, so an attempt still running (a
zombie on a paused host) can never write again, and ends that attempt in the history:
``fenced`` if its lease was live (only with ``force``), ``abandoned`` if it had run out.
The decision goes to the job's event log with who, why, when and the state before, in the
same atomic write.

A resolved record is kept for the job's own retention (the one its finish recorded), so an
operator's command never changes a namespace's policy; a job that never finished keeps the
resolving ledger's. The actions:

- ``reuse``: the job is SUCCEEDED with its committed result, or with the result given;
- ``redo``: the record stops binding (its retention ends now), so the next claim runs the
  work again, whatever its fingerprint: how a poisoned record is cleared;
- ``terminate``: a terminal failure, as a handler's ``TerminalError`` would record.

``reuse`` and ``terminate`` answer the job's waiting dispatches (its watches) with notices,
as a finish does; ``redo`` leaves them waiting for the run it asks for.
"""

from __future__ import annotations

import enum
import getpass
import inspect
import json
import socket
import typing
from dataclasses import replace
from typing import Any

from pydantic import TypeAdapter

from .._codec import adapter_for, encode_error, encode_result, type_name
from .._errors import InvalidPayload, ResolutionRefused
from .._idempotent import HANDLER_NAME
from .._records import AttemptOutcome, ErrorInfo, JobRow, JobState
from .._store import Resolution, StoreAnswer
from .._text import escape_text, store_json
from .events import RESOLVED
from .notices import finish_notices

__all__ = [
    "NO_RESULT",
    "RESOLVED",
    "RESOLVED_ERROR",
    "ResolveAction",
    "ResolveRefusal",
    "check_resolve",
    "default_actor",
    "refusal_of",
    "is_resolution",
    "recorded_retention",
    "resolution_error",
    "resolution_request",
    "result_type",
    "resolution_event",
    "resolved_attempt",
    "resolved_row",
]

RESOLVED_ERROR = "resolved:"  # the prefix of the error type a redo or terminate records


class ResolveAction(enum.StrEnum):
    REUSE = "reuse"
    REDO = "redo"
    TERMINATE = "terminate"


class ResolveRefusal(enum.StrEnum):
    MISSING = "missing"  # no such job
    LIVE_LEASE = "live_lease"  # its owner's lease is live and the resolution is not forced
    NO_RESULT = "no_result"  # reuse, but there is no committed result and none was given


def _live(job: JobRow, now: int) -> bool:
    return job.state is JobState.PROCESSING and (job.lease_until or 0) > now


def check_resolve(job: JobRow | None, resolution: Resolution, now: int) -> ResolveRefusal | None:
    """Why ``resolution`` must not be applied to ``job``, or None."""
    if job is None:
        return ResolveRefusal.MISSING
    if _live(job, now) and not resolution.force:
        return ResolveRefusal.LIVE_LEASE
    committed = job.state is JobState.SUCCEEDED and job.result is not None
    if resolution.action == ResolveAction.REUSE and resolution.result is None and not committed:
        return ResolveRefusal.NO_RESULT
    return None


def recorded_retention(job: JobRow) -> int | None:
    """The retention the job's finish gave it, ``retain_until - finished_at`` (µs): what a
    resolution keeps, whoever resolves it. None for a job that never finished, and for one a
    redo released (it binds nothing: ``retain_until = finished_at``); a resolution of those
    keeps the resolving ledger's retention."""
    if job.state is JobState.PROCESSING or job.retain_until is None or job.finished_at is None:
        return None
    kept = job.retain_until - job.finished_at
    return kept if kept > 0 else None


def resolved_attempt(job: JobRow, now: int) -> AttemptOutcome | None:
    """How the owner's running attempt ends, or None when no attempt is running."""
    if job.state is not JobState.PROCESSING:
        return None
    return AttemptOutcome.FENCED if _live(job, now) else AttemptOutcome.ABANDONED


def resolved_row(job: JobRow, resolution: Resolution, now: int) -> JobRow:
    """The job after ``resolution`` (which ``check_resolve`` allowed)."""
    fence = job.fence + 1
    ended = replace(
        job,
        fence=fence,
        owner_attempt=None,
        claimed_at=None,
        lease_until=None,
        outputs="[]",
        origin=None,
        updated_at=now,
        finished_at=now,
    )
    if resolution.action == ResolveAction.REDO:
        return replace(
            ended,
            state=JobState.FAILED,
            result=None,
            error=resolution.error,
            retryable=True,
            retain_until=now,
        )
    if resolution.action == ResolveAction.REUSE:
        state, result, error, retryable = (
            JobState.SUCCEEDED,
            resolution.result or job.result,
            None,
            None,
        )
    else:
        state, result, error, retryable = JobState.FAILED, None, resolution.error, False
    notices = finish_notices(job.notices, job.watchers, fence, state.value, error, now)
    return replace(
        ended,
        state=state,
        result=result,
        error=error,
        retryable=retryable,
        retain_until=now + (recorded_retention(job) or resolution.retention_us),
        watchers="{}",
        notices=notices,
    )


def resolution_event(job: JobRow, resolution: Resolution, now: int) -> str:
    """The event-log entry of ``resolution`` (without ``at``, which the store stamps)."""
    before: dict[str, Any] = {
        "state": job.state.value,
        "fence": job.fence,
        "owner_attempt": job.owner_attempt,
        "lease_live": _live(job, now),
    }
    event = {
        "kind": RESOLVED,
        "attempt_id": None,
        "fence": job.fence + 1,
        "reason": resolution.reason,
        "detail": resolution.action,
        "actor": resolution.actor,
        "data": {"force": resolution.force, "before": before},
    }
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False)


# -- the ledger's side: the request, and what a refusal means --------------------------------

MAX_REASON_CHARS = 1000
MAX_ACTOR_CHARS = 200
NO_RESULT: Any = object()  # resolve(..., result=) not given


def default_actor() -> str:
    """Who acts when nobody says: the OS user at this host."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no login name (e.g. a container's numeric uid)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def resolution_error(action: str, message: str) -> str:
    """The error a redo or terminate records, JSON: its type ``resolved:redo`` or
    ``resolved:terminate`` tells it from a handler's failure."""
    retryable = action == ResolveAction.REDO
    return encode_error(message, retryable=retryable, error_type=RESOLVED_ERROR + action)


def is_resolution(error: ErrorInfo | None) -> bool:
    """Whether ``error`` is an operator's redo or terminate, not a handler's failure."""
    return error is not None and error.type.startswith(RESOLVED_ERROR)


def _text(value: object, what: str, limit: int, example: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise InvalidPayload(
            f"{what} must be a non-empty str of at most {limit} characters, e.g. {example!r};"
            f" got {value!r}"
        )
    return value.strip()


def result_type(handler: object) -> tuple[TypeAdapter[Any], str] | None:
    """A decorated handler's return type (its adapter and name), which a reuse's result
    must replay as; None when the handler is not known here (given by name, or none)."""
    if not callable(handler) or getattr(handler, HANDLER_NAME, None) is None:
        return None
    hint = typing.get_type_hints(inspect.unwrap(handler)).get("return", Any)
    return adapter_for(hint), type_name(hint)


def resolution_request(
    action: object,
    *,
    reason: object,
    actor: object,
    force: bool,
    result: Any,
    retention_us: int,
    max_result_bytes: int,
    returns: tuple[TypeAdapter[Any], str] | None = None,
) -> Resolution:
    """A validated ``Resolution``; ``InvalidPayload`` (nothing sent) for bad input, and
    ``InvalidResult`` for a result that would not replay as ``returns``, the handler's
    return type (see ``result_type``)."""
    if action not in tuple(ResolveAction):
        choices = ", ".join(a.value for a in ResolveAction)
        raise InvalidPayload(f"resolution action must be one of {choices}, not {action!r}")
    why = _text(reason, "reason", MAX_REASON_CHARS, "poisoned record: output was corrupt")
    who = _text(default_actor() if actor is None else actor, "actor", MAX_ACTOR_CHARS, "alice")
    if result is not NO_RESULT and action != ResolveAction.REUSE:
        raise InvalidPayload(f"a result is given only with reuse, not with {action}")
    stored = None
    if result is not NO_RESULT:
        adapter, expected = returns or (None, "")
        stored = encode_result(
            result,
            max_result_bytes,
            adapter,
            source="the resolution",
            expected=f"the handler's return type {expected}",
        )
    error = None
    if action != ResolveAction.REUSE:
        error = resolution_error(str(action), f"{why} (by {who})")
    return Resolution(
        action=str(action),
        reason=escape_text(why),
        actor=escape_text(who),
        force=bool(force),
        result=None if stored is None else store_json(stored),
        error=None if error is None else store_json(error),
        retention_us=retention_us,
    )


def refusal_of(
    answer: StoreAnswer, resolution: Resolution, *, namespace: str, key: str
) -> ResolutionRefused:
    """Why the store did not apply ``resolution``, as the error to raise."""
    why = check_resolve(answer.job, resolution, answer.now) or ResolveRefusal.LIVE_LEASE
    messages = {
        ResolveRefusal.MISSING: f"there is no job for {key!r} in namespace {namespace!r}",
        ResolveRefusal.LIVE_LEASE: (
            f"an attempt holds a live lease on {key!r}: wait for it, or force the resolution"
            " (force=True, --force) to fence it off; the force is recorded"
        ),
        ResolveRefusal.NO_RESULT: (
            f"{key!r} has no committed result to reuse: give one (result=..., --result JSON),"
            " or redo or terminate it"
        ),
    }
    return ResolutionRefused(messages[why], namespace=namespace, key=key, reason=why.value)
