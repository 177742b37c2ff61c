"""``RillFlowExecutor``: Rill Flow dispatches in, idempotent handler runs, answers out.

Mount handlers on resource paths with ``@executor.task(path, key=…)`` and include
``executor.router`` in the service's FastAPI app (with ``lifespan=executor.lifespan``, which
runs the deliverer). Each dispatch claims its business key with an attempt id of its own,
and the attempt history records which dispatch each attempt answered.

- **sync** (``task_sync``): the answer is the committed result, a replay, or — while another
  attempt runs — the result after joining it for at most ``join`` (under the engine's 1.5 s
  read timeout); still running, or failed, it is answered ``{"result_type": "FAILED", …}``,
  which the engine records as a failure and retries by its policy.
- **async** (``task_async``): acknowledged at once; the handler runs after the answer, under
  the claim; its commit writes the completion notice of every dispatch waiting for the
  job, and the deliverer sends them. A duplicate is acknowledged and waits for the same
  result; a dispatch for a finished job gets the stored result by callback.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import typing
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any, TypeVar

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from .._claim import AsyncClaim
from .._codec import adapter_for
from .._core import Seconds, to_us
from .._errors import KeyConflict, RillExecutorError, StoreError, TerminalError
from .._idempotent import IdempotentSpec, answer_async, run_async
from .._ledger import AsyncLedger
from .._notices import Watch
from .._outcomes import Conflict, InProgress
from ._callbacks import MAX_CALLBACK_CHARS, output_of
from ._deliverer import Deliverer
from ._dispatch import MAX_DISPATCH_BYTES, BadDispatch, Dispatch, parse_dispatch

__all__ = ["CallbackTooLarge", "RillFlowExecutor"]

F = TypeVar("F", bound=Callable[..., Any])


class CallbackTooLarge(TerminalError):
    """A result that would not fit in the engine's callback (6,144 characters)."""


def failed(error_code: str, message: str) -> dict[str, Any]:
    """An answer the engine records as a failed task (``result_type`` is not SUCCESS)."""
    return {"result_type": "FAILED", "error_code": error_code, "error_msg": message}


def _bad(exc: Exception) -> JSONResponse:
    return JSONResponse({"error_code": "BadDispatch", "error_msg": str(exc)}, status_code=400)


class _Task:
    """One mounted handler: its input type, its idempotency spec, and whether it wants the
    dispatch as its second argument."""

    def __init__(
        self, fn: Callable[..., Any], spec_of: Callable[[Callable[..., Any]], IdempotentSpec]
    ) -> None:
        params = list(inspect.signature(fn).parameters.values())
        hints = typing.get_type_hints(fn)
        self.input: TypeAdapter[Any] = adapter_for(
            hints.get(params[0].name, Any) if params else Any
        )
        self.with_dispatch = len(params) >= 2
        returns = hints.get("return", Any)
        output = adapter_for(returns)
        user = fn

        async def call(payload: Any, dispatch: Dispatch) -> Any:
            args = (payload, dispatch) if self.with_dispatch else (payload,)
            if inspect.iscoroutinefunction(user):
                result = await user(*args)
            else:
                result = await asyncio.to_thread(user, *args)
            if dispatch.is_async:
                _check_callback(output, result)
            return result

        call.__annotations__ = {"payload": Any, "dispatch": Dispatch, "return": returns}
        call.__module__, call.__qualname__ = fn.__module__, fn.__qualname__
        self.spec = spec_of(call)

    def payload(self, dispatch: Dispatch) -> Any:
        try:
            return self.input.validate_python(dispatch.input())
        except ValidationError as exc:
            raise BadDispatch(f"the task input does not validate: {exc}") from None


def _check_callback(output: TypeAdapter[Any], result: Any) -> None:
    try:
        text = json.dumps(output_of(output.dump_python(result, mode="json")), separators=(",", ":"))
    except Exception:
        return  # not serialisable: the ledger's own check says so
    if len(text) > MAX_CALLBACK_CHARS:
        raise CallbackTooLarge(
            f"the result is {len(text)} characters of JSON, over the {MAX_CALLBACK_CHARS} a Rill"
            " Flow callback may carry; write the data as an output object"
            " (claim.outputs.put) and return its reference instead"
        )


class RillFlowExecutor:
    """Rill Flow's executor protocol over an ``AsyncLedger``."""

    def __init__(
        self,
        ledger: AsyncLedger,
        *,
        join: Seconds = timedelta(seconds=1),
        deliverer: Deliverer | None = None,
        max_body_bytes: int = MAX_DISPATCH_BYTES,
    ) -> None:
        self.ledger = ledger
        self.join = to_us(join, "join") / 1e6
        self.deliverer = deliverer or Deliverer(ledger)
        self.router = APIRouter()
        self._max_body = max_body_bytes
        self._running: set[asyncio.Task[Any]] = set()

    def task(
        self,
        path: str,
        *,
        key: Callable[[Any], object] | None = None,
        fingerprint: Callable[[Any], Any] | None = None,
        result_version: Callable[[Any], str | None] | str | None = None,
        name: str | None = None,
        terminal: tuple[type[BaseException], ...] = (),
        heartbeat: bool | Seconds = True,
    ) -> Callable[[F], F]:
        """Mount a handler (``def`` or ``async def``) taking the task's input (validated as
        its first parameter's type) and, optionally, the ``Dispatch``.

        ``key`` derives the business key from the input; without it the key is the engine
        task ``{execution_id}/{task_name}`` — a weaker identity: a new execution of the same
        business work runs again. ``fingerprint`` defaults to the whole input.
        """

        def mount(fn: F) -> F:
            def spec_of(call: Callable[..., Any]) -> IdempotentSpec:
                return self.ledger._spec(
                    call,
                    name,
                    lambda payload, dispatch: dispatch.task if key is None else key(payload),
                    lambda payload, dispatch: (
                        to_jsonable_python(payload) if fingerprint is None else fingerprint(payload)
                    ),
                    (
                        (lambda payload, dispatch: result_version(payload))
                        if callable(result_version)
                        else result_version
                    ),
                    self.join,
                    heartbeat,
                    (*terminal, CallbackTooLarge),
                )

            task = _Task(fn, spec_of)

            async def endpoint(request: Request) -> JSONResponse:
                return await self._serve(task, request)

            self.router.add_api_route(path, endpoint, methods=["POST", "GET"], name=task.spec.name)
            return fn

        return mount

    async def _serve(self, task: _Task, request: Request) -> JSONResponse:
        try:
            dispatch = parse_dispatch(
                dict(request.query_params),
                request.headers,
                await request.body(),
                max_bytes=self._max_body,
            )
            payload = task.payload(dispatch)
        except BadDispatch as exc:
            return _bad(exc)
        if dispatch.is_async:
            return await self._accept(task, dispatch, payload)
        return await self._answer(task, dispatch, payload)

    async def _answer(self, task: _Task, dispatch: Dispatch, payload: Any) -> JSONResponse:
        """The sync pattern: the task's output, or a failure the engine will retry."""
        args = (payload, dispatch)
        try:
            result = await run_async(
                self.ledger,
                task.spec,
                args,
                {},
                attempt_id=dispatch.new_attempt_id(),
                origin=dispatch.origin(),
            )
        except StoreError as exc:
            return JSONResponse(failed(type(exc).__name__, str(exc)), status_code=503)
        except Exception as exc:  # the handler's failure or an outcome: recorded, reported
            return JSONResponse(failed(type(exc).__name__, str(exc)))
        output = task.spec.adapter.dump_python(result, mode="json")
        return JSONResponse(output_of(output))

    async def _accept(self, task: _Task, dispatch: Dispatch, payload: Any) -> JSONResponse:
        """The async pattern: claim with a watch on the engine task, answer at once."""
        assert dispatch.callback_url is not None  # parse_dispatch checked it
        key, fingerprint, version = task.spec.identity((payload, dispatch), {})
        try:
            outcome = await self.ledger.claim(
                key,
                fingerprint=fingerprint,
                result_version=version,
                attempt_id=dispatch.new_attempt_id(),
                origin=dispatch.origin(),
                watch=Watch(dispatch.task, {"url": dispatch.callback_url}),
            )
        except StoreError as exc:
            return JSONResponse(failed(type(exc).__name__, str(exc)), status_code=503)
        except RillExecutorError as exc:
            return _bad(exc)
        if isinstance(outcome, Conflict):
            error: KeyConflict = outcome.error()
            return JSONResponse(failed("KeyConflict", str(error)), status_code=409)
        if isinstance(outcome, AsyncClaim):
            self._start(task, outcome, (payload, dispatch))
            state = "accepted"
        elif isinstance(outcome, InProgress):
            state = "joined"  # the running attempt's finish will notify this task too
        else:
            self.deliverer.wake()  # the stored outcome's notice is due now
            state = "replayed"
        return JSONResponse({"result_type": "SUCCESS", "state": state, "key": key})

    def _start(self, task: _Task, claim: AsyncClaim, args: tuple[Any, ...]) -> None:
        async def run() -> None:
            # A failure is recorded as the attempt's outcome and reported by the callback.
            with contextlib.suppress(Exception):
                await answer_async(task.spec, claim, args)
            self.deliverer.wake()

        running = asyncio.create_task(run(), name=f"rill-{claim.key}")
        self._running.add(running)
        running.add_done_callback(self._running.discard)

    async def drain(self) -> None:
        """Wait for the handlers started by async dispatches to end."""
        while self._running:
            await asyncio.gather(*self._running, return_exceptions=True)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: FastAPI) -> AsyncIterator[None]:
        """Run the deliverer while the app serves; let running handlers end at shutdown."""
        self.deliverer.start()
        try:
            yield
        finally:
            await self.drain()
            await self.deliverer.deliver()
            await self.deliverer.stop()
