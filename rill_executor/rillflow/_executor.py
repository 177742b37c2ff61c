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
- **handing off** (``hand_off``, with ``token_secret``): an async handler gives its work to
  an external worker with a completion token and raises ``HandedOff``; the worker commits
  through ``POST {prefix}/complete`` (or extends the lease with ``{prefix}/heartbeat``),
  fenced like any other write of the attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import json
import logging
import time
import typing
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any, TypeVar

from fastapi import APIRouter, FastAPI, Header, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator
from pydantic_core import to_jsonable_python

from .._claim import AsyncClaim
from .._codec import adapter_for
from .._core import Seconds, to_us
from .._errors import (
    ConfigError,
    HandedOff,
    KeyConflict,
    RillExecutorError,
    StaleAttempt,
    StoreError,
    TerminalError,
    UsageError,
)
from .._idempotent import IdempotentSpec, _current, answer_async, run_async
from .._ledger import AsyncLedger
from .._notices import Watch
from .._outcomes import Conflict, InProgress
from ._callbacks import MAX_CALLBACK_CHARS, output_of
from ._deliverer import Deliverer
from ._dispatch import MAX_DISPATCH_BYTES, BadDispatch, Dispatch, parse_dispatch
from ._tokens import CompletionTokens, InvalidToken, TokenClaims

__all__ = ["CallbackTooLarge", "RillFlowExecutor"]

F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger("rill_executor.rillflow")


class _Running(typing.NamedTuple):
    """What ``hand_off`` needs to know about the handler run it is called from."""

    task: _Task
    dispatch: Dispatch
    loop: asyncio.AbstractEventLoop


# Set around each handler call; copied into the worker thread that runs a ``def`` handler.
_running: contextvars.ContextVar[_Running] = contextvars.ContextVar("rill_rillflow_running")


class CallbackTooLarge(TerminalError):
    """A result that would not fit in the engine's callback (6,144 characters)."""


def failed(error_code: str, message: str) -> dict[str, Any]:
    """An answer the engine records as a failed task (``result_type`` is not SUCCESS)."""
    return {"result_type": "FAILED", "error_code": error_code, "error_msg": message}


def _bad(exc: Exception) -> JSONResponse:
    return JSONResponse({"error_code": "BadDispatch", "error_msg": str(exc)}, status_code=400)


def _token_error(status: int, reason: str, message: str) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"reason": reason, "detail": message}, status_code=status, headers=headers)


def _in_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


_REPORT_SHAPE = '{"result": ...} or {"error": "...", "retryable": false}'


class _Report(BaseModel):
    """What an external worker reports with its completion token."""

    model_config = ConfigDict(extra="forbid")
    result: Any = None
    error: str | None = None
    retryable: bool = False

    @model_validator(mode="after")
    def _one_of(self) -> _Report:
        if ("result" in self.model_fields_set) == (self.error is not None):
            raise ValueError(f"send exactly one of {_REPORT_SHAPE}")
        return self


class _Beat(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lease: float | None = Field(default=None, gt=0)


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
        self.output = output
        user = fn

        async def call(payload: Any, dispatch: Dispatch) -> Any:
            args = (payload, dispatch) if self.with_dispatch else (payload,)
            running = _running.set(_Running(self, dispatch, asyncio.get_running_loop()))
            try:
                if inspect.iscoroutinefunction(user):
                    result = await user(*args)
                else:
                    result = await asyncio.to_thread(user, *args)
            finally:
                _running.reset(running)
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
        token_secret: str | bytes | None = None,
        prefix: str = "/rill",
    ) -> None:
        self.ledger = ledger
        self.join = to_us(join, "join") / 1e6
        self.deliverer = deliverer or Deliverer(ledger)
        self.router = APIRouter()
        self.tokens = None if token_secret is None else CompletionTokens(token_secret)
        self._max_body = max_body_bytes
        self._running: set[asyncio.Task[Any]] = set()
        self._tasks: dict[str, _Task] = {}
        self._handoffs: dict[str, float] = {}  # attempt id -> lease end (epoch s) it asked for
        self._beats: set[asyncio.Task[Any]] = set()
        if self.tokens is not None:
            self._mount_completions(prefix)

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
            self._tasks[task.spec.name] = task

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
        except HandedOff:
            return JSONResponse(failed("HandedOff", "handed off: use task_async"))
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
                try:
                    await answer_async(task.spec, claim, args)
                except HandedOff:
                    await self._handed_off(claim)
            self.deliverer.wake()

        running = asyncio.create_task(run(), name=f"rill-{claim.key}")
        self._running.add(running)
        running.add_done_callback(self._running.discard)

    def hand_off(self, ttl: Seconds, *, lease: Seconds | None = None) -> str:
        """A completion token for the running attempt, good for ``ttl``; the attempt's lease
        is extended to ``lease`` (default ``ttl``) from now. Give the token to the external
        worker, then ``raise HandedOff()``: the worker ends the attempt by presenting it to
        ``POST {prefix}/complete``. Call it from a handler mounted with ``task`` (``def`` or
        ``async def``) on an async dispatch."""
        running = _running.get(None)
        claim = _current.get(None)
        if running is None or not isinstance(claim, AsyncClaim):
            raise UsageError("hand_off() is only available inside a handler mounted with task()")
        if self.tokens is None:
            raise ConfigError(
                "hand_off() needs RillFlowExecutor(token_secret=...): the secret that signs"
                " completion tokens, at least 32 bytes, e.g. secrets.token_urlsafe(32)"
            )
        if not running.dispatch.is_async:
            raise TerminalError(
                "handed off: use task_async; a task_sync dispatch must answer with the result"
            )
        token = self.tokens.issue(claim, handler=running.task.spec.name, ttl=ttl)
        seconds = to_us(ttl if lease is None else lease, "lease") / 1e6
        self._handoffs[claim.attempt_id] = time.time() + seconds
        beat = claim.heartbeat(timedelta(seconds=seconds))
        if _in_loop(running.loop):
            pending = running.loop.create_task(beat)
            self._beats.add(pending)
            pending.add_done_callback(self._beats.discard)
        else:  # a def handler's worker thread: extend before the worker can get the token
            asyncio.run_coroutine_threadsafe(beat, running.loop).result()
        return token

    async def _handed_off(self, claim: AsyncClaim) -> None:
        """Extend the lease once more now that the handler's heartbeat has stopped (its
        last beat may have shortened it to the default)."""
        until = self._handoffs.pop(claim.attempt_id, None)
        if until is None:
            log.warning("%r raised HandedOff without hand_off(): no token was issued", claim)
            return
        left = until - time.time()
        if left > 0:
            with contextlib.suppress(StaleAttempt):  # completed already, or taken over
                await claim.heartbeat(timedelta(seconds=left))

    def _mount_completions(self, prefix: str) -> None:
        async def complete(
            request: Request, authorization: typing.Annotated[str | None, Header()] = None
        ) -> JSONResponse:
            return await self._complete(authorization, await request.body())

        async def heartbeat(
            request: Request, authorization: typing.Annotated[str | None, Header()] = None
        ) -> JSONResponse:
            return await self._heartbeat(authorization, await request.body())

        self.router.add_api_route(f"{prefix}/complete", complete, methods=["POST"])
        self.router.add_api_route(f"{prefix}/heartbeat", heartbeat, methods=["POST"])

    def _verified(self, authorization: str | None) -> TokenClaims | JSONResponse:
        assert self.tokens is not None  # the routes exist only with a secret
        scheme, _, token = (authorization or "").partition(" ")
        try:
            if scheme.lower() != "bearer" or not token.strip():
                raise InvalidToken(
                    "send the token as 'Authorization: Bearer <token>'", reason="malformed"
                )
            claims = self.tokens.verify(token)
        except InvalidToken as exc:
            log.warning("completion token refused (%s): %s", exc.reason, exc)
            return _token_error(401, exc.reason, str(exc))
        if claims.namespace != self.ledger.namespace or claims.handler not in self._tasks:
            return _token_error(
                404,
                "unknown",
                f"no handler {claims.handler!r} in namespace {claims.namespace!r} here",
            )
        return claims

    def _resumed(self, claims: TokenClaims) -> AsyncClaim:
        return AsyncClaim.resume(
            self.ledger._core,
            self.ledger.store,
            job_id=claims.job_id,
            key=claims.key,
            attempt_id=claims.attempt_id,
            fence=claims.fence,
            outputs=self.ledger.outputs,
        )

    async def _complete(self, authorization: str | None, body: bytes) -> JSONResponse:
        """Commit (or fail) the attempt a token names, through its fence."""
        claims = self._verified(authorization)
        if isinstance(claims, JSONResponse):
            return claims
        try:
            report = _Report.model_validate_json(body)
        except ValidationError as exc:
            return _token_error(400, "bad_body", f"the body must be {_REPORT_SHAPE}: {exc}")
        task, claim = self._tasks[claims.handler], self._resumed(claims)
        try:
            if report.error is not None:
                await claim.fail(report.error, retryable=report.retryable)
            else:
                await self._commit(task, claim, report.result)
        except StaleAttempt as exc:
            log.warning("completion refused (%s): %s", exc.reason, exc)
            return _token_error(409, exc.reason, str(exc))
        except StoreError as exc:
            return _token_error(503, "store", str(exc))
        except (UsageError, CallbackTooLarge) as exc:
            return _token_error(422, "invalid_result", str(exc))
        finally:
            self.deliverer.wake()  # the commit wrote the notices of every waiting dispatch
        state = "failed" if report.error is not None else "committed"
        return JSONResponse({"state": state, "key": claims.key, "attempt_id": claims.attempt_id})

    async def _commit(self, task: _Task, claim: AsyncClaim, result: Any) -> None:
        """As the decorator commits: a result that cannot be stored is the attempt's
        terminal failure, and is raised."""
        try:
            _check_callback(task.output, result)
            completion = task.spec.completion_of(claim, result)
        except (UsageError, CallbackTooLarge) as exc:
            await claim.fail(exc, retryable=False)
            raise
        await claim._finish(completion, "commit")

    async def _heartbeat(self, authorization: str | None, body: bytes) -> JSONResponse:
        """Extend the lease by ``lease`` seconds, or by the token's remaining time."""
        claims = self._verified(authorization)
        if isinstance(claims, JSONResponse):
            return claims
        try:
            asked = _Beat.model_validate_json(body or b"{}").lease
        except ValidationError as exc:
            return _token_error(400, "bad_body", f'the body must be {{"lease": seconds}}: {exc}')
        lease = claims.remaining() if asked is None else timedelta(seconds=asked)
        try:
            until = await self._resumed(claims).heartbeat(lease)
        except StaleAttempt as exc:
            return _token_error(409, exc.reason, str(exc))
        except StoreError as exc:
            return _token_error(503, "store", str(exc))
        return JSONResponse({"lease_expires_at": until.isoformat()})

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
