"""Dispatching one task to an executor: the request the engine builds, the resend, the verdict.

Built from the engine's ``HttpInvokeHelperImpl`` (request parameters, ``X-Mode``, the two
invocations of ``invokeRequest``) and ``FunctionTaskRunner`` (how a sync answer becomes an
output and a status).
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlencode

import httpx

from rill_executor.store import SYSTEM_CLOCK

from ._model import DispatchRecord, Pattern, Task, TaskStatus

__all__ = [
    "DispatchRefused",
    "PreparedDispatch",
    "Transport",
    "auth_requested",
    "judge_sync_answer",
    "prepare",
    "send",
]

FORM = "application/x-www-form-urlencoded"


class Stamps(Protocol):
    """The clock a dispatch is stamped with (``started_at``, ``elapsed``)."""

    def time_ns(self) -> int: ...

    def monotonic_ns(self) -> int: ...


class DispatchRefused(Exception):
    """The engine's HTTP client could not write the request: nothing was sent."""


@dataclass(frozen=True)
class Transport:
    """The engine's HTTP client: OkHttp timeouts and the one identical resend.

    The engine resends only when its ``ENABLE_FUNCTION_DISPATCH_RET_CHECK`` switch is on,
    as deployments run it; ``resend=False`` simulates the switch off.
    """

    connect_timeout: float = 0.5
    read_timeout: float = 1.5
    write_timeout: float = 1.5
    resend: bool = True

    def client(self) -> httpx.Client:
        timeout = httpx.Timeout(
            connect=self.connect_timeout,
            read=self.read_timeout,
            write=self.write_timeout,
            pool=None,
        )
        return httpx.Client(timeout=timeout, follow_redirects=True, trust_env=False)


@dataclass(frozen=True)
class PreparedDispatch:
    """One dispatch as it goes on the wire (both sends of it are identical but for the
    agent's ``traceparent``)."""

    method: str
    url: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: Mapping[str, Any] | None
    form: bool = False  # the body goes form-encoded, not as JSON

    @property
    def content(self) -> bytes | None:
        """The body's bytes as they go on the wire."""
        if self.body is None:
            return None
        if self.form:
            return urlencode([(k, _form_value(v)) for k, v in self.body.items()]).encode()
        return json.dumps(self.body, separators=(",", ":")).encode()


def _split_input(
    execution_id: str, task_input: Mapping[str, Any]
) -> tuple[dict[str, str], dict[str, Any], dict[str, str]]:
    # The engine's buildRequestParams: maps under reserved names are spread out, the rest is body.
    query: dict[str, str] = {"execution_id": execution_id}
    body: dict[str, Any] = {"execution_id": execution_id}
    headers: dict[str, str] = {}
    for key, value in task_input.items():
        if not isinstance(value, Mapping):
            body[key] = value
        elif key == "body" or key.startswith("request_config_"):
            body.update(value)
        elif key == "query" or key.startswith("query_params_"):
            query.update({str(k): _query_value(v) for k, v in value.items()})
        elif key.startswith("request_callback_"):
            continue
        elif key == "header" or key.startswith("request_header_"):
            headers.update({str(k): str(v) for k, v in value.items()})
        else:
            body[key] = value
    return query, body, headers


def auth_requested(task_input: Mapping[str, Any]) -> bool:
    """Whether the input asks for a signed callback URL (``FlowAuthHeaderGenerator``):
    ``generate_auth`` of "1" or "true" (any case) as ``String.valueOf`` writes it."""
    return _query_value(task_input.get("generate_auth")).lower() in {"1", "true"}


def _form_value(value: Any) -> str:
    # FunctionProtocolDispatcher.buildHttpEntity: a string as it is, a map or list as
    # fastjson's JSON, anything else by toString().
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping | list):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return _query_value(value)


def _content_type(headers: Mapping[str, str]) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == "content-type"), None)


def _query_value(value: Any) -> str:
    # Java's String.valueOf: booleans lower case, None as "null".
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def prepare(
    task: Task,
    execution_id: str,
    *,
    flow_server: str,
    callback: str,
    traceparent: str | None,
) -> PreparedDispatch:
    """The request the engine sends for ``task`` of ``execution_id`` with this callback URL.

    The engine's own headers go into Spring's ``HttpHeaders``, and the input's header map
    replaces them by name, case-insensitively (``FunctionProtocolDispatcher.handle``,
    ``header::setAll``). A POST body is JSON, or form-encoded when the Content-Type is
    exactly ``application/x-www-form-urlencoded`` (``buildHttpEntity``); with any other
    Content-Type the engine's RestTemplate has no converter for the body's map, and the
    dispatch fails unsent (``DispatchRefused``). ``traceparent`` stands in for the
    OpenTelemetry Java agent (the engine itself sends none): each send carries a child of it.
    """
    query, body, input_headers = _split_input(execution_id, task.input)
    query["name"] = task.name
    headers = {"X-Flow-Server": flow_server, "X-Callback-Url": callback}
    if task.pattern is Pattern.TASK_ASYNC:
        headers["X-Mode"] = "async"
    for name, value in input_headers.items():
        for own in [k for k in headers if k.lower() == name.lower()]:
            del headers[own]
        headers[name] = value
    if traceparent is not None:
        headers["traceparent"] = traceparent
    if task.request_type == "GET":
        return PreparedDispatch("GET", task.resource, query, headers, None)
    content_type = _content_type(headers)
    if content_type is None:
        headers["Content-Type"] = "application/json"
    elif content_type == FORM:
        # Spring's FormHttpMessageConverter adds the charset it writes with.
        headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
        headers["Content-Type"] = f"{FORM};charset=UTF-8"
        return PreparedDispatch("POST", task.resource, query, headers, body, form=True)
    elif not _is_json(content_type):
        raise DispatchRefused(
            "dispatchTask http fails due to No HttpMessageConverter for java.util.HashMap "
            f'and content type "{content_type}"'
        )
    return PreparedDispatch("POST", task.resource, query, headers, body)


def _is_json(content_type: str) -> bool:
    # MappingJackson2HttpMessageConverter: application/json and application/*+json.
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-[0-9a-f]{16}-([0-9a-f]{2})")


def _agent_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers of one send: the OpenTelemetry Java agent opens a client span for every
    request, so each send (the resend too) carries its own parent id in the trace."""
    sent = dict(headers)
    match = _TRACEPARENT.fullmatch(sent.get("traceparent", ""))
    if match is not None:
        sent["traceparent"] = f"00-{match[1]}-{secrets.token_hex(8)}-{match[2]}"
    return sent


def _send_once(
    client: httpx.Client, prepared: PreparedDispatch, headers: Mapping[str, str]
) -> tuple[int | None, str | None, str | None]:
    try:
        response = client.request(
            prepared.method,
            prepared.url,
            params=dict(prepared.query),
            headers=dict(headers),
            content=prepared.content,
        )
    except httpx.HTTPError as exc:
        return None, None, f"{type(exc).__name__}: {exc}"
    return response.status_code, response.text, None


def send(
    client: httpx.Client,
    transport: Transport,
    prepared: PreparedDispatch,
    *,
    execution_id: str,
    task_name: str,
    attempt: int,
    ts: int,
    clock: Stamps = SYSTEM_CLOCK,
) -> tuple[list[DispatchRecord], str | None]:
    """Send a dispatch, resending once on any failure; the records and the answer's body.

    The body is ``None`` when the dispatch failed (every send timed out, could not connect
    or was answered with a non-2xx status).
    """
    records: list[DispatchRecord] = []
    for number in range(1, 3 if transport.resend else 2):
        started_at, started = clock.time_ns() / 1e9, clock.monotonic_ns()
        headers = _agent_headers(prepared.headers)
        status_code, text, error = _send_once(client, prepared, headers)
        record = DispatchRecord(
            execution_id=execution_id,
            task_name=task_name,
            attempt=attempt,
            send=number,
            method=prepared.method,
            url=prepared.url,
            query=dict(prepared.query),
            headers=headers,
            body=None if prepared.body is None else dict(prepared.body),
            ts=ts,
            started_at=started_at,
            elapsed=(clock.monotonic_ns() - started) / 1e9,
            status_code=status_code,
            response_text=text,
            error=error,
        )
        records.append(record)
        if record.ok:
            return records, text or ""
    return records, None


def failure_reason(records: list[DispatchRecord]) -> str:
    """The engine's message for a failed dispatch, from its last send."""
    last = records[-1]
    if last.error is not None:
        return f"dispatchTask http fails due to {last.error}"
    return f"dispatchTask http fails status code: {last.status_code} text: {last.response_text}"


def judge_sync_answer(text: str) -> tuple[TaskStatus, dict[str, Any] | None, str | None]:
    """A ``task_sync`` answer's status, output and message, as ``FunctionTaskRunner`` reads it.

    A JSON object is the output, an array becomes ``{"data": [...]}``, another JSON value
    (``null`` included: Jackson reads it as a ``NullNode``, not as no answer) an empty output;
    an empty or non-JSON body fails the task (``FunctionTaskRunner.getRetJson``,
    ``buildOutput``, ``taskTypeStatus``). ``result_type`` missing means success, any value
    other than "SUCCESS" (case-insensitive) failure.
    """
    failed = TaskStatus.FAILED, None, "the executor's answer is empty or not JSON"
    if not text.strip():
        return failed
    try:
        parsed = json.loads(text)
    except ValueError:
        return failed
    if isinstance(parsed, dict):
        output: dict[str, Any] = parsed
    elif isinstance(parsed, list):
        output = {"data": parsed}
    else:
        output = {}
    message = invoke_message(output)
    result_type = output.get("result_type")
    if result_type is not None and _java_str(result_type).upper() != "SUCCESS":
        return TaskStatus.FAILED, output, message
    return TaskStatus.SUCCEED, output, message


def invoke_message(output: Mapping[str, Any]) -> str | None:
    """``error_msg`` (or ``msg``), at the top level or under ``data``, as the engine records it."""
    for scope in (output.get("data"), output):
        if isinstance(scope, Mapping):
            for name in ("error_msg", "msg"):
                if name in scope:
                    return _java_str(scope[name])
    return None


def _java_str(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
