"""Completion callbacks to the engine: the request a notice becomes, and what its answer means.

The callback goes to the dispatch's ``X-Callback-Url`` (``/flow/trigger.json``): the JSON body
becomes the task's output, and a failure is reported with ``status=FAILED`` in the query (the
engine ignores a ``result_type`` body field there). The engine's answers, classified:

==================  =====================================================  ============
classification      the engine said                                        the notice
==================  =====================================================  ============
``ok``              200 ``{"result": "ok"}``                               delivered
``final_duplicate`` 30601 "repeated finish task …" / "… is finished"       delivered
``moved_on``        30601 "attempt finish wrong task …": the task went     dropped (the
                    back to READY; the next dispatch is answered from      result is kept)
                    the stored result
``refused``         400 (30109: body too large), other 4xx                 dropped
``retry_later``     5xx otherwise, 30101 (task lock), network errors       pending again
``redriven``        (no callback: a lapse notice, acted on by re-driving   delivered
                    the job; see ``_redrive``)
==================  =====================================================  ============
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .._notices import NoticeStatus
from .._records import JobState, NoticeInfo

__all__ = [
    "MAX_CALLBACK_CHARS",
    "Callback",
    "CallbackClass",
    "callback_for",
    "classify",
    "error_code",
    "output_of",
    "retry_delay",
    "settle_as",
]

MAX_CALLBACK_CHARS = 6144
"""The engine refuses a longer callback body with 400 / error code 30109."""


class CallbackClass(enum.StrEnum):
    OK = "ok"
    FINAL_DUPLICATE = "final_duplicate"
    MOVED_ON = "moved_on"
    REFUSED = "refused"
    RETRY_LATER = "retry_later"
    REDRIVEN = "redriven"


@dataclass(frozen=True, slots=True)
class Callback:
    url: str
    body: str  # JSON text


def output_of(result: Any) -> dict[str, Any]:
    """The task output a result becomes: a JSON object as it is, anything else as ``data``
    (the engine itself wraps a JSON array that way)."""
    return result if isinstance(result, dict) else {"data": result}


def _with_query(url: str, **extra: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in extra]
    return urlunsplit(parts._replace(query=urlencode([*query, *extra.items()])))


def callback_for(info: NoticeInfo, result: Any) -> Callback:
    """The callback a notice becomes: the committed output, or ``status=FAILED`` with the
    error as ``error_code`` / ``error_msg`` (fields the engine records for diagnostics)."""
    url = info.target["url"]
    if info.state is JobState.SUCCEEDED:
        body = output_of(result)
        return Callback(_with_query(url), json.dumps(body, separators=(",", ":")))
    error = info.error
    body = {
        "error_code": error.type if error else "Error",
        "error_msg": error.message if error else "failed",
    }
    return Callback(_with_query(url, status="FAILED"), json.dumps(body, separators=(",", ":")))


def _answer(body: str | None) -> dict[str, Any]:
    try:
        answer = json.loads(body or "")
    except ValueError:
        return {}
    return answer if isinstance(answer, dict) else {}


def error_code(body: str | None) -> str | None:
    """The engine's error code in its answer (``30601``…), if it gave one."""
    answer = _answer(body)
    code = answer.get("error_code") or answer.get("code")
    return None if code is None or code == "" else str(code)


def classify(status_code: int | None, body: str | None) -> tuple[CallbackClass, str]:
    """What the engine's answer means, and a short detail for the record."""
    if status_code is None:
        return CallbackClass.RETRY_LATER, f"no answer: {body}"
    answer = _answer(body)
    code = answer.get("error_code") or answer.get("code")
    message = str(answer.get("error") or answer.get("error_msg") or answer.get("msg") or "")
    detail = (
        f"HTTP {status_code}" + (f" {code}" if code else "") + (f": {message}" if message else "")
    )
    if 200 <= status_code < 300:
        return CallbackClass.OK, detail
    if str(code) == "30601":
        if "attempt finish wrong task" in message:
            return CallbackClass.MOVED_ON, detail
        if "repeated finish" in message or "is finished" in message:
            return CallbackClass.FINAL_DUPLICATE, detail
    if 400 <= status_code < 500:
        return CallbackClass.REFUSED, detail
    return CallbackClass.RETRY_LATER, detail


def settle_as(kind: CallbackClass) -> str:
    if kind in (CallbackClass.OK, CallbackClass.FINAL_DUPLICATE, CallbackClass.REDRIVEN):
        return NoticeStatus.DELIVERED
    if kind is CallbackClass.RETRY_LATER:
        return NoticeStatus.PENDING
    return NoticeStatus.DROPPED


def retry_delay(attempts: int, *, base: float = 1.0, cap: float = 300.0) -> float:
    """Seconds before the next try after ``attempts`` tries: doubling from ``base``."""
    return float(min(cap, base * 2 ** max(attempts - 1, 0)))
