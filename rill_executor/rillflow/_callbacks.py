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
``passed_over``     (not sent: the URL is on no engine this executor serves;  pending again,
                    an executor that serves it sends it)                   try not counted
``redriven``        (no callback: a lapse notice, acted on by re-driving   delivered
                    the job; see ``_redrive``)
==================  =====================================================  ============
"""

from __future__ import annotations

import enum
import json
import random
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .. import JobState
from ..reports import ErrorInfo, NoticeInfo
from ..store import NoticeStatus
from ._timings import RETRY_BASE, RETRY_CAP

__all__ = [
    "MAX_CALLBACK_CHARS",
    "MAX_ERROR_MSG_CHARS",
    "Callback",
    "CallbackClass",
    "body_text",
    "callback_for",
    "classify",
    "engine_length",
    "error_code",
    "failed_body",
    "output_of",
    "pass_over_delay",
    "retry_delay",
    "settle_as",
    "too_large",
]

MAX_CALLBACK_CHARS = 6144
"""The engine refuses a longer callback body with 400 / error code 30109. It counts the
body as it re-serialises it: compact JSON, non-ASCII characters as they are, in Java
``String`` length (UTF-16 code units): see ``engine_length``."""

MAX_ERROR_MSG_CHARS = 1000
"""The longest ``error_msg`` a FAILED callback carries: the job's record keeps the whole
message; the engine only shows it."""


class CallbackClass(enum.StrEnum):
    OK = "ok"
    FINAL_DUPLICATE = "final_duplicate"
    MOVED_ON = "moved_on"
    REFUSED = "refused"
    RETRY_LATER = "retry_later"
    REDRIVEN = "redriven"
    PASSED_OVER = "passed_over"


@dataclass(frozen=True, slots=True)
class Callback:
    url: str
    body: str  # JSON text, exactly as sent


def output_of(result: Any) -> dict[str, Any]:
    """The task output a result becomes: a JSON object as it is, anything else as ``data``
    (the engine itself wraps a JSON array that way)."""
    return result if isinstance(result, dict) else {"data": result}


def body_text(output: dict[str, Any]) -> str:
    """The JSON text a callback sends for ``output``: compact, with non-ASCII characters as
    they are (as the engine counts them), escaped only where UTF-8 cannot carry them."""
    text = json.dumps(output, separators=(",", ":"), ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: only its escape can be sent
        return json.dumps(output, separators=(",", ":"))
    return text


def engine_length(text: str) -> int:
    """The length of ``text`` as the engine measures it: UTF-16 code units (a character
    outside the Basic Multilingual Plane, an emoji say, counts 2)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def too_large(body: str) -> str | None:
    """Why a callback body cannot be sent (over the engine's limit), or None if it can."""
    size = engine_length(body)
    if size <= MAX_CALLBACK_CHARS:
        return None
    return (
        f"the callback body would be {size} characters of JSON, over the {MAX_CALLBACK_CHARS}"
        " a Rill Flow callback may carry; write the data as an output object"
        " (claim.outputs.put) and return its reference instead"
    )


def _with_query(url: str, **extra: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in extra]
    return urlunsplit(parts._replace(query=urlencode([*query, *extra.items()])))


def failed_body(error_code: str, message: str) -> str:
    """A FAILED callback's body, ``message`` shortened until it fits well under the limit."""
    message = message[:MAX_ERROR_MSG_CHARS]
    while True:
        body = body_text({"error_code": error_code[:200], "error_msg": message})
        if engine_length(body) <= MAX_CALLBACK_CHARS // 2 or not message:
            return body
        message = message[: len(message) // 2]


def callback_for(info: NoticeInfo, result: Any) -> Callback:
    """The callback a notice becomes: the committed output, or ``status=FAILED`` with the
    error as ``error_code`` / ``error_msg`` (fields the engine records for diagnostics).

    A committed output too large to send (one a commit here refuses, so written another
    way, e.g. by ``resolve``) is reported as a failure rather than never: the engine's task
    must not wait for a callback that cannot come."""
    url = info.target["url"]
    if info.state is JobState.SUCCEEDED:
        body = body_text(output_of(result))
        problem = too_large(body)
        if problem is None:
            return Callback(_with_query(url), body)
        error = ErrorInfo(type="CallbackTooLarge", message=problem, retryable=False)
    else:
        error = info.error or ErrorInfo(type="Error", message="failed", retryable=False)
    body = failed_body(error.type, error.message)
    return Callback(_with_query(url, status="FAILED"), body)


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
    if kind in (CallbackClass.RETRY_LATER, CallbackClass.PASSED_OVER):
        return NoticeStatus.PENDING
    return NoticeStatus.DROPPED


def retry_delay(
    attempts: int, *, seed: str, base: float = RETRY_BASE, cap: float = RETRY_CAP
) -> float:
    """Seconds before the next try after ``attempts`` tries: full jitter, a draw between 0
    and a ceiling doubling from ``base`` up to ``cap`` (``_timings`` says why those).

    The draw is the same for the same ``seed`` and ``attempts`` (a notice's own seed, so
    that the notices one engine outage held back do not all come back in the same second,
    and a test can know each delay)."""
    ceiling = min(cap, base * 2.0 ** min(max(attempts - 1, 0), 64))
    return random.Random(f"{seed}:{attempts}").uniform(0.0, ceiling)


def pass_over_delay(age: float, *, base: float = 1.0, cap: float = 10.0) -> float:
    """Seconds before a notice this executor may not send is due again, ``age`` seconds
    after it was made: a tenth of its age, from ``base`` to ``cap``. No try is counted, so
    the delay grows with the age instead; an executor that may send it finds it due at most
    ``cap`` after it starts."""
    return float(min(cap, max(base, age / 10)))
