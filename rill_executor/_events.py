"""The job's event log: what happened to a job outside its attempts' own writes.

An attempt's claim, heartbeats and finish are recorded by the writes themselves; a write
that was refused writes nothing, by design. Some refusals must still be on the record: a
completion token presented after its attempt was superseded, or after it expired, is the
trace of a worker that finished late, and an operator reviewing the job needs to see it.
Those go to the job's event log, a JSON array kept beside the attempt history: each entry
a JSON object made here, stamped ``at`` by the store on its clock, the newest
``MAX_EVENTS`` kept (a flood of refusals cannot grow a record without bound).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ._errors import InvalidPayload
from ._text import store_json

__all__ = ["MAX_EVENTS", "TOKEN_REFUSED", "appended_event", "encode_event"]

MAX_EVENTS = 64
MAX_DETAIL_CHARS = 2000
TOKEN_REFUSED = "token_refused"  # a completion token presented and refused
_KIND = re.compile(r"[a-z][a-z0-9_.]{0,63}")


def encode_event(
    kind: str,
    *,
    attempt_id: str | None = None,
    fence: int | None = None,
    reason: str | None = None,
    detail: str | None = None,
) -> str:
    """The JSON object a store appends (see ``appended_event``), its strings escaped as
    stores keep them (``rill_executor._text``); ``InvalidPayload`` for a bad ``kind`` or
    ``fence``. A long ``detail`` is cut."""
    if not isinstance(kind, str) or not _KIND.fullmatch(kind):
        raise InvalidPayload(
            f"event kind {kind!r} must be lower-case letters, digits, '_' or '.', starting"
            " with a letter, at most 64 characters, e.g. 'token_refused'"
        )
    if fence is not None and (isinstance(fence, bool) or not isinstance(fence, int)):
        raise InvalidPayload(f"event fence must be an int or None, not {fence!r}")
    if detail is not None and len(detail) > MAX_DETAIL_CHARS:
        detail = detail[:MAX_DETAIL_CHARS] + "… (truncated)"
    event = {
        "kind": kind,
        "attempt_id": attempt_id,
        "fence": fence,
        "reason": reason,
        "detail": detail,
    }
    return store_json(json.dumps(event, separators=(",", ":"), ensure_ascii=False))


def appended_event(events: str | None, event: str, now: int) -> str:
    """The log ``events`` (JSON array) with ``event`` stamped ``at`` = ``now`` appended, the
    newest ``MAX_EVENTS`` kept: what ``Store.record_event`` writes."""
    entries: list[Any] = json.loads(events or "[]")
    entries.append({**json.loads(event), "at": now})
    return json.dumps(entries[-MAX_EVENTS:], separators=(",", ":"), ensure_ascii=False)
