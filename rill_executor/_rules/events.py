"""The job's event log: what happened to a job outside its attempts' own writes.

An attempt's claim, heartbeats and finish are recorded by the writes themselves; a write
that was refused writes nothing, by design. Some refusals must still be on the record: a
completion token presented after its attempt was superseded, or after it expired, is the
trace of a worker that finished late, and an operator reviewing the job needs to see it.
Those go to the job's event log, a JSON array kept beside the attempt history: each entry
a JSON object made here, stamped ``at`` by the store on its clock.

The log keeps its first ``MAX_EVENTS`` reported entries and counts the ones it drops after
them, so whoever can get entries written (a worker holding an expired token, say) cannot
push the genuine record out, nor grow the record without bound. An operator's resolution
(``resolved``) is always kept, like the attempt it fences. The count is the log's last
element, ``{"dropped": n, "at": when the last was dropped}``: the only one without a
``kind``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .._errors import InvalidPayload
from .._text import store_json

__all__ = ["MAX_EVENTS", "TOKEN_REFUSED", "appended_event", "encode_event", "split_log"]

MAX_EVENTS = 64
MAX_DETAIL_CHARS = 2000
TOKEN_REFUSED = "token_refused"  # a completion token presented and refused
RESOLVED = "resolved"  # an operator's resolution (rill_executor._rules.resolution)
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


def split_log(entries: list[Any]) -> tuple[list[Any], int]:
    """The log's entries and how many were dropped (its trailing count, if any)."""
    if entries and "kind" not in entries[-1]:
        return entries[:-1], int(entries[-1]["dropped"])
    return entries, 0


def appended_event(events: str | None, event: str, now: int) -> str:
    """The log ``events`` (JSON array) with ``event`` stamped ``at`` = ``now`` appended, or
    counted as dropped once ``MAX_EVENTS`` reported entries are kept (a resolution is always
    appended): what ``Store.record_event`` and ``Store.resolve`` write."""
    entries, dropped = split_log(json.loads(events or "[]"))
    entry = {**json.loads(event), "at": now}
    reported = sum(e["kind"] != RESOLVED for e in entries)
    if entry["kind"] == RESOLVED or reported < MAX_EVENTS:
        entries.append(entry)
    else:
        dropped += 1
    if dropped:
        entries.append({"dropped": dropped, "at": now})
    return json.dumps(entries, separators=(",", ":"), ensure_ascii=False)
