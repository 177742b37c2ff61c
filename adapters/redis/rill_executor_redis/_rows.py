"""Decoding script replies into the port's rows and answers.

Each script replies with one JSON text (Lua's cjson): an array of strings where an absent
hash field is ``false``, the job's fields in the order of ``FIELDS`` in common.lua. A
granted claim or finish replies instead with only what its caller cannot tell from its
own request, as values joined by the byte 0x1F (``SEP`` in common.lua, ``''`` where
absent; only the result version, sent last, can hold a control character), and the row
is completed here exactly as the port's ``claimed_row`` / ``finished_row`` builds it.
Anything else is a ``StoreProtocolError``: the keys were written by something other than
our scripts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from rill_executor.store import (
    AttemptOutcome,
    AttemptRef,
    AttemptRow,
    ClaimRequest,
    Completion,
    JobRow,
    JobState,
    LeasedNotice,
    NoticeBatch,
    StoreAnswer,
    StoreProtocolError,
    StoreStatus,
    claimed_row,
)

__all__ = [
    "FIELD_NAMES",
    "JobNotices",
    "answer_from",
    "claimed_from",
    "finished_from",
    "job_from_fields",
    "job_notices_from",
    "leased_from",
    "settled_from",
    "status_from",
]

# The FIELDS of common.lua, in that order.
FIELD_NAMES = (
    "ns", "key", "state", "fence", "owner", "claimed_at", "lease_until", "fp", "rv",
    "result", "error", "retryable", "created_at", "updated_at", "finished_at", "retain_until",
    "outputs", "origin", "watchers", "notices", "trace",
)  # fmt: skip
_FIELDS = len(FIELD_NAMES)


def job_from_fields(job_id: str, values: list[str | None]) -> JobRow:
    """The row from an ``HMGET`` of ``FIELD_NAMES`` (decoded; None where absent)."""
    try:
        return _job(job_id, list(values))
    except (ValueError, IndexError, TypeError) as exc:
        raise _malformed(job_id, values, exc) from exc


_SEP = "\x1f"  # common.lua's SEP


def answer_from(job_id: str, reply: object) -> StoreAnswer:
    """``[ok, now, field...]`` from claim, heartbeat, finish, register_output, resolve."""
    try:
        items = _array(_json(reply))
        job = _job(job_id, items[2:]) if len(items) > 2 else None
        return StoreAnswer(ok=items[0] == 1, job=job, now=_int(items[1]))
    except (ValueError, IndexError, TypeError) as exc:
        raise _malformed(job_id, reply, exc) from exc


def claimed_from(request: ClaimRequest, reply: object) -> StoreAnswer:
    """A claim's answer: granted, ``1, now, fence, created_at, watchers, notices`` and the
    rest of the row from the request; else ``answer_from``'s."""
    if not _granted(reply):
        return answer_from(request.job_id, reply)
    try:
        _, now_text, fence, created_at, watchers, notices = _text_reply(reply).split(_SEP)
        now = int(now_text)
        # The port's rule for a claimed row, with what only the server knows put in: a
        # first claim without a watch, the common case, has nothing to put in.
        job = claimed_row(None, request, now, last_fence=int(fence) - 1)
        if created_at != now_text or watchers or notices:
            job = replace(
                job,
                created_at=int(created_at),
                watchers=_watchers(watchers) if watchers else "{}",
                notices=_notices(notices) if notices else "[]",
            )
        return StoreAnswer(ok=True, job=job, now=now)
    except (ValueError, IndexError, TypeError) as exc:
        raise _malformed(request.job_id, reply, exc) from exc


def finished_from(ref: AttemptRef, completion: Completion, reply: object) -> StoreAnswer:
    """A finish's answer: applied, ``1, now, ns, key, claimed_at, fp, created_at, origin,
    trace, notices, rv`` and the rest of the row from the completion; else
    ``answer_from``'s."""
    if not _granted(reply):
        return answer_from(ref.job_id, reply)
    try:
        (_, now_text, ns, key, claimed_at, fp, created_at, origin, trace, notices,
         rv) = _text_reply(reply).split(_SEP, 10)  # fmt: skip
        now = int(now_text)
        job = JobRow(
            job_id=ref.job_id,
            namespace=ns,
            key=key,
            state=completion.state,
            fence=ref.fence,
            owner_attempt=ref.attempt_id,
            claimed_at=_opt_int(claimed_at or None),
            lease_until=None,
            fingerprint=fp,
            result_version=rv or None,
            result=completion.result,
            error=completion.error,
            retryable=completion.retryable,
            created_at=int(created_at),
            updated_at=now,
            finished_at=now,
            retain_until=now + completion.retention_us,
            outputs="[]",
            origin=origin or None,
            trace=trace or None,
            watchers="{}",
            notices=_notices(notices) if notices else "[]",
        )
        return StoreAnswer(ok=True, job=job, now=now)
    except (ValueError, IndexError, TypeError) as exc:
        raise _malformed(ref.job_id, reply, exc) from exc


def _granted(reply: object) -> bool:
    return reply[:2] == b"1\x1f" if isinstance(reply, bytes) else str(reply)[:2] == "1\x1f"


def _text_reply(reply: object) -> str:
    if isinstance(reply, bytes):
        return reply.decode("utf-8")
    if not isinstance(reply, str):  # str on a client with decode_responses=True
        raise TypeError(f"expected text, got {type(reply).__name__}")
    return reply


def status_from(job_id: str, reply: object) -> StoreStatus | None:
    """``[now]`` or ``[now, [field...], [attempt field, value, ...], events]`` from
    status."""
    try:
        items = _array(_json(reply))
        if len(items) == 1:
            return None
        return StoreStatus(
            job=_job(job_id, _array(items[1])),
            attempts=_attempts(_array(items[2])),
            now=_int(items[0]),
            events=_text(items[3]) or "[]",
        )
    except (ValueError, IndexError, TypeError) as exc:
        raise _malformed(job_id, reply, exc) from exc


def _job(job_id: str, values: list[Any]) -> JobRow:
    """The row from the job's FIELDS as the scripts reply them: strings, false if absent.

    The hot path of every reply: one pass turns false into None, then each field is
    converted once, in place; a missing required field fails in ``int``, ``JobState``
    or the explicit check.
    """
    if len(values) != _FIELDS:
        raise ValueError(f"expected {_FIELDS} job fields, got {len(values)}")
    fields: list[Any] = [None if value is False else value for value in values]
    (ns, key, state, fence, owner, claimed_at, lease_until, fp, rv, result, error, retryable,
     created_at, updated_at, finished_at, retain_until, outputs, origin, watchers,
     notices, trace) = fields  # fmt: skip
    if ns is None or key is None or fp is None:
        raise ValueError("a required field is absent")
    return JobRow(
        job_id=job_id,
        namespace=ns,
        key=key,
        state=JobState(state),
        fence=int(fence),
        owner_attempt=owner,
        claimed_at=_opt_int(claimed_at),
        lease_until=_opt_int(lease_until),
        fingerprint=fp,
        result_version=rv,
        result=result,
        error=error,
        retryable=None if retryable is None else retryable == "1",
        created_at=int(created_at),
        updated_at=int(updated_at),
        finished_at=_opt_int(finished_at),
        retain_until=_opt_int(retain_until),
        outputs=outputs or "[]",
        origin=origin,
        watchers="{}" if watchers is None else _watchers(watchers),
        notices="[]" if notices is None else _notices(notices),
        trace=trace,
    )


def _watchers(stored: str) -> str:
    """The port's ``{id: target}`` from the stored ``[[id, target JSON text], ...]``."""
    return _dump({watch_id: json.loads(target) for watch_id, target in json.loads(stored)})


def _notices(stored: str) -> str:
    return _dump([_notice(n) for n in json.loads(stored)])


_NUMBERS = ("fence", "attempts", "due", "lease_until", "created_at", "settled_at")


def _notice(stored: dict[str, Any]) -> dict[str, Any]:
    """The port's notice from the stored one: numbers kept as text, target and error as
    JSON text (see common.lua)."""
    notice = dict(stored)
    for name in _NUMBERS:
        value = notice[name]
        notice[name] = None if value is None else int(value)
    notice["target"] = json.loads(notice["target"])
    error = notice["error"]
    notice["error"] = None if error is None else json.loads(error)
    return notice


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class JobNotices:
    """What ``lease_job.lua`` leased of one job, and what the index should do with it."""

    leased: list[LeasedNotice]
    next_due: int | None  # the earliest time a pending notice can be leased, if any
    watched: bool  # watches wait for the job's finish
    token: str  # the job's watch token ('' = none)


def leased_from(namespace: str, reply: object) -> NoticeBatch:
    """``[now, [[job id, namespace, key, notice, result], ...]]`` from lease.lua."""
    try:
        items = _array(_json(reply))
        notices = [_leased(*entry) for entry in _array(items[1])]
        return NoticeBatch(notices, _int(items[0]))
    except (ValueError, IndexError, TypeError, KeyError) as exc:
        raise _malformed(f"namespace {namespace!r} outbox", reply, exc) from exc


def job_notices_from(job_id: str, reply: object) -> JobNotices:
    """``[now, [notice...], ns, key, result, next due, watched, token]`` from lease_job.lua."""
    try:
        _, notices, ns, key, result, due, watched, token = _array(_json(reply))
        leased = [_leased(job_id, ns, key, notice, result) for notice in _array(notices)]
        return JobNotices(leased, int(due) if due else None, watched == "1", token)
    except (ValueError, IndexError, TypeError, KeyError) as exc:
        raise _malformed(job_id, reply, exc) from exc


def _leased(job_id: str, ns: str, key: str, notice: str, result: str | bool) -> LeasedNotice:
    stored = json.loads(notice)
    return LeasedNotice(job_id, ns, key, _dump(_notice(stored)), _text(result))


def settled_from(job_id: str, reply: object) -> tuple[str | None, JobNotices]:
    """``[ok, next due, watched, token, namespace]`` from settle.lua: the job's namespace
    if the notice was settled, else None."""
    try:
        ok, due, watched, token, ns = _array(_json(reply))
        job = JobNotices([], int(due) if due else None, watched == "1", token)
        return (ns if ok == 1 else None), job
    except (ValueError, IndexError, TypeError) as exc:
        raise _malformed(job_id, reply, exc) from exc


def _attempts(flat: Sequence[object]) -> list[AttemptRow]:
    """Attempt rows from the history hash: ``<fence>:<part>`` fields, and ``fence``."""
    parts: dict[int, dict[str, str | None]] = {}
    for name, value in zip(flat[::2], flat[1::2], strict=True):
        fence, colon, part = _required(_text(name)).partition(":")
        if colon:  # not the last-fence field
            parts.setdefault(int(fence), {})[part] = _text(value)
    return [
        AttemptRow(
            fence=fence,
            attempt_id=_required(p.get("id")),
            started_at=_int(p.get("start")),
            ended_at=_opt_int(p.get("end")),
            outcome=AttemptOutcome(_required(p.get("outcome"))),
            error=p.get("error"),
            outputs=p.get("outputs") or "[]",
            origin=p.get("origin"),
            trace=p.get("trace"),
        )
        for fence, p in sorted(parts.items())
    ]


def _json(reply: object) -> Any:
    if isinstance(reply, bytes):  # decoded first: json.loads sniffs the encoding of bytes
        reply = reply.decode("utf-8")
    if not isinstance(reply, str):  # str on a client with decode_responses=True
        raise TypeError(f"expected JSON text, got {type(reply).__name__}")
    return json.loads(reply)


def _array(value: object) -> list[Any]:
    if value == {}:  # cjson writes an empty table (an empty history) as {}
        return []
    if not isinstance(value, list):
        raise TypeError(f"expected an array, got {type(value).__name__}")
    return value


def _text(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if value is False:  # an absent hash field
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise TypeError(f"unexpected {type(value).__name__} in reply")


def _required(value: str | None) -> str:
    if value is None:
        raise ValueError("a required field is absent")
    return value


def _int(value: object) -> int:
    return int(_required(_text(value)))


def _opt_int(value: str | None) -> int | None:
    return None if value is None else int(value)


def _malformed(job_id: str, reply: object, exc: Exception) -> StoreProtocolError:
    what = job_id if job_id.startswith("namespace") else f"job {job_id}"
    return StoreProtocolError(
        f"Redis returned a malformed record for {what} ({exc}): {reply!r:.300}."
        " Something other than rill-executor wrote to its keys"
    )
