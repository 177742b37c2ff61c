"""A Rill Flow dispatch, parsed: who sent it, where to call back, and the task's input.

The engine sends ``POST {resource}?execution_id=E&name=T`` with ``X-Callback-Url`` (for every
pattern), ``X-Mode: async`` for the asynchronous patterns, a ``traceparent`` when its
deployment runs the OpenTelemetry agent, and the task's input as a JSON object that also
holds ``execution_id``. A task with ``requestType: GET`` is sent as a GET without a body:
its input is in the query parameters instead, beside the engine's own ``execution_id`` and
``name``. Nothing identifies the attempt: a resend carries the same ``ts``, so each
dispatch gets an attempt id of its own here.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .. import UsageError
from ..integration import printable

__all__ = ["MAX_DISPATCH_BYTES", "BadDispatch", "Dispatch", "parse_dispatch"]

MAX_DISPATCH_BYTES = 1024 * 1024
"""The largest dispatch body accepted by default; the engine's own contexts are far smaller."""


class BadDispatch(UsageError):
    """A request that is not a valid Rill Flow dispatch; it is answered 400 and claims nothing."""


@dataclass(frozen=True, slots=True)
class Dispatch:
    execution_id: str
    task_name: str
    mode: str  # "sync" or "async"
    callback_url: str | None
    ts: str | None  # from the callback URL: the same for a resend, new for a retry
    flow_server: str | None
    traceparent: str | None
    tracestate: str | None
    body: dict[str, Any]  # the task's input, ``execution_id`` included

    @property
    def is_async(self) -> bool:
        return self.mode == "async"

    @property
    def task(self) -> str:
        """The engine task this dispatch is for: ``{execution_id}/{task_name}``."""
        return f"{self.execution_id}/{self.task_name}"

    def new_attempt_id(self) -> str:
        """An attempt id for this dispatch: its ``ts`` (when known) and a random part."""
        stamp = self.ts if self.ts and self.ts.isdigit() else "d"
        return f"{stamp}-{secrets.token_hex(6)}"

    def origin(self) -> dict[str, Any]:
        """What an attempt answering this dispatch records in its history."""
        return {
            "engine": "rillflow",
            "execution_id": self.execution_id,
            "task_name": self.task_name,
            "ts": self.ts,
            "mode": self.mode,
        }

    def input(self) -> dict[str, Any]:
        """The task's input without the engine's ``execution_id``."""
        return {k: v for k, v in self.body.items() if k != "execution_id"}


def _one(query: Mapping[str, str], name: str) -> str:
    value = query.get(name)
    if not value:
        raise BadDispatch(
            f"the dispatch has no {name!r} query parameter; Rill Flow sends"
            " ?execution_id=…&name=… with every dispatch"
        )
    return printable(value, f"the dispatch's {name!r}", BadDispatch)


def _ts(callback_url: str | None) -> str | None:
    if not callback_url:
        return None
    values = parse_qs(urlsplit(callback_url).query).get("ts")
    return printable(values[0], "the callback URL's 'ts'", BadDispatch) if values else None


_ENGINE_QUERY = ("execution_id", "name")


def _query_input(execution_id: str, query: Mapping[str, str]) -> dict[str, Any]:
    """A GET dispatch's input: its query parameters but the engine's own (each as text; the
    handler's input type converts them), with ``execution_id`` as a POST body has it."""
    found = {k: v for k, v in query.items() if k not in _ENGINE_QUERY}
    return {"execution_id": execution_id, **found}


def parse_dispatch(
    query: Mapping[str, str],
    headers: Mapping[str, str],
    body: bytes,
    *,
    max_bytes: int = MAX_DISPATCH_BYTES,
    method: str = "POST",
) -> Dispatch:
    """The dispatch in a request, or ``BadDispatch`` saying what is wrong with it (e.g. a
    control character in ``execution_id``: it names the engine task, so it must be printable).

    ``headers`` must be case-insensitive (Starlette's are). A GET dispatch has no body: its
    input is its query parameters (a parameter given twice: the last value).
    """
    execution_id, task_name = _one(query, "execution_id"), _one(query, "name")
    parsed = (
        _query_input(execution_id, query)
        if method.upper() == "GET"
        else _body_input(body, max_bytes)
    )
    callback = headers.get("x-callback-url") or None
    mode = "async" if (headers.get("x-mode") or "").lower() == "async" else "sync"
    if mode == "async" and not callback:
        raise BadDispatch(
            "an async dispatch (X-Mode: async) needs an X-Callback-Url header to report to"
        )
    return Dispatch(
        execution_id=execution_id,
        task_name=task_name,
        mode=mode,
        callback_url=callback,
        ts=_ts(callback),
        flow_server=headers.get("x-flow-server") or None,
        traceparent=headers.get("traceparent") or None,
        tracestate=headers.get("tracestate") or None,
        body=parsed,
    )


def _body_input(body: bytes, max_bytes: int) -> dict[str, Any]:
    """A POST dispatch's input: its body, a JSON object."""
    if len(body) > max_bytes:
        raise BadDispatch(
            f"the dispatch body is {len(body)} bytes, over the limit of {max_bytes}; pass large"
            " inputs by reference (e.g. an object URI) instead of inline"
        )
    parsed: Any = {}
    if body.strip():
        try:
            parsed = json.loads(body)
        except ValueError as exc:
            raise BadDispatch(f"the dispatch body is not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise BadDispatch(
            f"the dispatch body must be a JSON object (the task's input), got"
            f" {type(parsed).__name__}"
        )
    return parsed
