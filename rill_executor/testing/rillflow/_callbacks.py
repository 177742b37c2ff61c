"""The engine's callback endpoints: ``trigger.json`` and the older ``finish.json``.

Answers follow the engine's ``FlowController`` and its exception handler
(``WebExceptionHandler`` with ``HttpResponse``, serialised without null fields):
errors are ``{"request_id": …, "error_code": …, "error": …}`` (with ``"pass_through": true``
on a 400 of error code 30107, 30109 or 30110: ``WebExceptionHandler.handleBizException``),
success is ``{"request_id": …, "result": "ok"}``. ``trigger.json`` looks the task up before anything
else (``FlowController.trigger``), so an unknown execution or task is answered
400/30109 "task not exists {E}:{T}" there; 500/30605 ("not found") only comes from
``finish.json``, whose checks run inside the engine's ``validateDAGInfo``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from rill_executor.store import Clock

from ._model import CallbackRecord, TaskStatus

__all__ = ["Answer", "FinishRequest", "Finisher", "build_app", "error_answer"]

# BizError.ERROR_DATA_FORMAT: bad parameters, unknown task, oversized context.
DATA_FORMAT = 30109
# WebExceptionHandler.PASS_THROUGH_ERROR_CODE: ERROR_DEGRADED, ERROR_DATA_FORMAT,
# ERROR_DATA_RESTRICTION; marked "pass_through" when a TaskException (a 400) carries one.
_PASS_THROUGH = frozenset({30107, DATA_FORMAT, 30110})


@dataclass(frozen=True)
class Answer:
    """An HTTP answer of the engine, and the task state it was judged on."""

    status_code: int
    body: Mapping[str, Any]
    task_status: TaskStatus | None = None


@dataclass(frozen=True)
class FinishRequest:
    """A completion callback that passed the endpoint's checks, for the task lock's judgement."""

    endpoint: str
    execution_id: str
    task_name: str
    succeeded: bool
    output: dict[str, Any]


class Finisher(Protocol):
    """The engine side that applies a callback to a task (the simulator)."""

    callback_max_chars: int
    # Called with each callback's query before anything else; an answer it returns is
    # sent (and recorded) instead, and the callback is not applied (a fault drill's hook).
    intercept: Callable[[Mapping[str, str]], Answer | None] | None
    clock: Clock  # stamps each callback's arrival

    def task_exists(self, execution_id: str, task_name: str) -> bool: ...

    def finish(
        self, request: FinishRequest, record: Callable[[Answer], CallbackRecord]
    ) -> Answer: ...

    def record_callback(self, record: CallbackRecord) -> None: ...


def _request_id() -> str:
    return uuid.uuid4().hex


def error_answer(
    http_status: int, code: int, message: str, task_status: TaskStatus | None = None
) -> Answer:
    body: dict[str, Any] = {"request_id": _request_id(), "error_code": code, "error": message}
    if http_status == 400 and code in _PASS_THROUGH:
        body["pass_through"] = True
    return Answer(http_status, body, task_status)


def ok_answer(task_status: TaskStatus) -> Answer:
    return Answer(200, {"request_id": _request_id(), "result": "ok"}, task_status)


def _missing(name: str) -> Answer:
    # Spring's MissingServletRequestParameterException → 422 with ERROR_DATA_FORMAT.
    return error_answer(
        422,
        DATA_FORMAT,
        f"Required request parameter '{name}' for method parameter type String is not present",
    )


def _parse_body(text: str, *, required: bool) -> dict[str, Any] | Answer | None:
    if not text.strip():
        if required:
            return error_answer(422, DATA_FORMAT, "Required request body is missing")
        return None
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        return error_answer(422, DATA_FORMAT, f"JSON parse error: {exc}")
    if not isinstance(parsed, dict):
        return error_answer(422, DATA_FORMAT, "JSON parse error: the body is not a JSON object")
    return parsed


def _too_large(body: Mapping[str, Any], limit: int) -> bool:
    # DAGContextBuilder.build compares the length of fastjson's compact serialisation: a
    # Java String's length, in UTF-16 code units (a character outside the BMP counts 2).
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2 > limit


def _query_context(text: str | None) -> dict[str, Any] | None:
    # FlowController.parseTriggerContext: JSONObject.parseObject, a failure logged and ignored.
    if text is None:
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _trigger(engine: Finisher, query: Mapping[str, str], text: str) -> Answer | FinishRequest:
    for name in ("execution_id", "task_name"):
        if name not in query:
            return _missing(name)
    body = _parse_body(text, required=False)
    if isinstance(body, Answer):
        return body
    # The ``context`` query parameter (a JSON object) is merged over the body.
    extra = _query_context(query.get("context"))
    if body is None:
        body = extra
    elif extra is not None:
        body.update(extra)
    execution_id, task_name = query["execution_id"], query["task_name"]
    if not engine.task_exists(execution_id, task_name):
        return error_answer(400, DATA_FORMAT, f"task not exists {execution_id}:{task_name}")
    if body is not None and _too_large(body, engine.callback_max_chars):
        return error_answer(400, DATA_FORMAT, "context size nonsupport")
    status = query.get("status")
    succeeded = status is None or status.upper() == "SUCCESS"
    return FinishRequest("trigger.json", execution_id, task_name, succeeded, body or {})


def _finish(engine: Finisher, query: Mapping[str, str], text: str) -> Answer | FinishRequest:
    for name in ("execution_id", "task_name"):
        if name not in query:
            return _missing(name)
    body = _parse_body(text, required=True)
    if isinstance(body, Answer):
        return body
    assert body is not None  # required=True never yields None
    if _too_large(body, engine.callback_max_chars):
        return error_answer(400, DATA_FORMAT, "context size nonsupport")
    result_type = body.get("result_type", "SUCCESS")
    succeeded = isinstance(result_type, str) and result_type.upper() == "SUCCESS"
    return FinishRequest("finish.json", query["execution_id"], query["task_name"], succeeded, body)


def build_app(engine: Finisher) -> FastAPI:
    """The engine's HTTP side: ``/flow/trigger.json`` (GET, POST) and ``/flow/finish.json``."""
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

    async def handle(request: Request, endpoint: str) -> JSONResponse:
        text = (await request.body()).decode("utf-8", errors="replace")
        query = dict(request.query_params)
        received_at = engine.clock.time_ns() / 1e9

        def record(answer: Answer) -> CallbackRecord:
            return CallbackRecord(
                endpoint=endpoint,
                method=request.method,
                query=query,
                body_text=text,
                status_code=answer.status_code,
                answer=dict(answer.body),
                task_status=answer.task_status,
                received_at=received_at,
                headers=dict(request.headers),
            )

        hook = engine.intercept
        faulted = None if hook is None else hook(query)
        parse = _trigger if endpoint == "trigger.json" else _finish
        parsed = faulted if faulted is not None else parse(engine, query, text)
        if isinstance(parsed, Answer):
            answer = parsed
            engine.record_callback(record(answer))
        else:
            # The engine may wait up to its lock timeout for the task lock: keep the loop free.
            answer = await run_in_threadpool(engine.finish, parsed, record)
        return JSONResponse(dict(answer.body), status_code=answer.status_code)

    @app.api_route("/flow/trigger.json", methods=["GET", "POST"])
    async def trigger(request: Request) -> JSONResponse:
        return await handle(request, "trigger.json")

    @app.post("/flow/finish.json")
    async def finish(request: Request) -> JSONResponse:
        return await handle(request, "finish.json")

    return app
