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
- **status codes** say who must act: 400 for a dispatch that can never be served (the
  engine's side: bad input, an invalid business key), 503 for what the executor's side must
  fix or wait out (a store outage, a misconfigured store, a hand-off on a sync dispatch),
  both retried by the engine; 409 for a ``KeyConflict``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from datetime import timedelta
from typing import Any, TypeVar

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic_core import to_jsonable_python

from .. import (
    AsyncClaim,
    AsyncLedger,
    ConfigError,
    Conflict,
    HandedOff,
    InProgress,
    KeyConflict,
    RillExecutorError,
    StoreError,
    UsageError,
)
from ..integration import IdempotentOptions, IdempotentSpec, RunSpan, Seconds, check_lease, to_us
from ..store import Watch
from . import _tracing as tracing
from ._bodies import BadLength, BodyTooLarge, read_body, refused_body
from ._callbacks import output_of
from ._deliverer import Deliverer
from ._dispatch import MAX_DISPATCH_BYTES, BadDispatch, Dispatch, parse_dispatch
from ._engines import Engines
from ._handoff import HandOffs
from ._redrive import Redriver, kept_dispatch
from ._refusals import Refusals
from ._task import CallbackTooLarge, HandOffNeedsAsync, Task, stored_form

__all__ = ["RillFlowExecutor"]

F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger("rill_executor.rillflow")


def failed(error_code: str, message: str) -> dict[str, Any]:
    """An answer the engine records as a failed task (``result_type`` is not SUCCESS)."""
    return {"result_type": "FAILED", "error_code": error_code, "error_msg": message}


def _bad(exc: Exception) -> JSONResponse:
    return JSONResponse({"error_code": "BadDispatch", "error_msg": str(exc)}, status_code=400)


class _RefusedCallback(BadDispatch):
    """An async dispatch whose callback URL is not on an engine this executor serves."""


def _unavailable(exc: Exception) -> JSONResponse:
    """503: the executor cannot serve the dispatch now (its store is down or misconfigured,
    the task is declared wrongly); nothing was done for good, so the engine may retry."""
    return JSONResponse({**failed(type(exc).__name__, str(exc)), "retryable": True}, 503)


def _target(dispatch: Dispatch, handler: str) -> dict[str, Any]:
    """Where the notice goes, with the dispatch's trace context (the callback joins its
    trace) and what it takes to run the dispatch again if its attempt dies (``_redrive``)."""
    assert dispatch.callback_url is not None  # parse_dispatch checked it
    trace = {"traceparent": dispatch.traceparent, "tracestate": dispatch.tracestate}
    return {
        "url": dispatch.callback_url,
        **{k: v for k, v in trace.items() if v},
        **kept_dispatch(dispatch, handler),
    }


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
        lease: Seconds = timedelta(seconds=10),
        max_redrives: int = 3,
        engines: Engines | Iterable[str] | None = None,
    ) -> None:
        self.ledger = ledger
        self.engines = engines if isinstance(engines, Engines) else Engines(engines)
        self._refusals = Refusals(log, clock=ledger.clock)
        self.join = to_us(join, "join") / 1e6
        self.lease = timedelta(microseconds=ledger.config.lease_of(lease))
        check_lease(ledger.config.lease_of(lease), ledger.store, "RillFlowExecutor lease")
        self.deliverer = deliverer or Deliverer(ledger)
        self.deliverer.engines = self.engines
        self.deliverer.redrive = Redriver(ledger, self._restart, max_redrives, self.lease)
        self.router = APIRouter()
        self._max_body = max_body_bytes
        self._running: set[asyncio.Task[Any]] = set()
        self._tasks: dict[str, Task] = {}
        self._handoffs = HandOffs(ledger, self._tasks, self.deliverer, token_secret, max_body_bytes)
        if token_secret is not None:
            self._handoffs.mount(self.router, prefix)

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
            options = IdempotentOptions(
                key=lambda payload, dispatch: dispatch.task if key is None else key(payload),
                fingerprint=lambda payload, dispatch: (
                    to_jsonable_python(payload) if fingerprint is None else fingerprint(payload)
                ),
                result_version=(
                    (lambda payload, dispatch: result_version(payload))
                    if callable(result_version)
                    else result_version
                ),
                wait=self.join,
                heartbeat=self.lease / 3 if heartbeat is True else heartbeat,
                terminal=(*terminal, CallbackTooLarge),
                name=name,
            )

            def spec_of(call: Callable[..., Any]) -> IdempotentSpec:
                return self.ledger.spec(call, options, origin=fn)

            task = Task(fn, spec_of)
            self._tasks[task.spec.name] = task

            async def endpoint(request: Request) -> JSONResponse:
                return await self._serve(task, request)

            for method in ("POST", "GET"):  # a route each: OpenAPI names an operation once
                self.router.add_api_route(path, endpoint, methods=[method], name=task.spec.name)
            return fn

        return mount

    async def _serve(self, task: Task, request: Request) -> JSONResponse:
        try:
            body = await read_body(request, self._max_body)
        except BodyTooLarge as exc:
            return self._refused(task, exc, refused_body(exc))
        except BadLength as exc:
            return self._refused(task, exc, _bad(exc))
        try:
            dispatch = parse_dispatch(
                dict(request.query_params),
                request.headers,
                body,
                max_bytes=self._max_body,
                method=request.method,
            )
            self._check_callback(dispatch, request)
            payload = task.payload(dispatch)
            # The business key, checked before anything is claimed: one the store cannot
            # take (too long, a newline) comes from the dispatch, so it is the engine's 400.
            identity = task.spec.identity((payload, dispatch), {})
        except (BadDispatch, UsageError) as exc:
            return self._refused(task, exc, _bad(exc))
        except Exception as exc:  # the key function failed on a valid input: a bug here
            log.exception("the key of %s could not be derived", task.spec.name)
            return _unavailable(exc)
        # The engine's span (its traceparent) is the parent of the claim and the handler's run,
        # also of a run started here that goes on after the answer (its task copies the context).
        with tracing.joined(request.headers):
            if dispatch.is_async:
                return await self._accept(task, dispatch, payload, identity)
            return await self._answer(task, dispatch, payload)

    def _check_callback(self, dispatch: Dispatch, request: Request) -> None:
        """An async dispatch's result is posted to its callback URL: one outside the engines
        (see ``_engines``) is refused before anything is claimed."""
        if dispatch.is_async and dispatch.callback_url is not None:
            peer = request.client.host if request.client is not None else None
            refusal = self.engines.refusal(dispatch.callback_url, peer or "")
            if refusal is not None:
                raise _RefusedCallback(refusal)

    def _refused(self, task: Task, exc: Exception, answer: JSONResponse) -> JSONResponse:
        """``answer``, a refusal of the dispatch; its reason is logged (see ``_refusals``)."""
        kind = type(exc).__name__.lstrip("_")
        self._refusals.refused(task.spec.name, kind, answer.status_code, str(exc))
        return answer

    async def _answer(self, task: Task, dispatch: Dispatch, payload: Any) -> JSONResponse:
        """The sync pattern: the task's output, or a failure the engine will retry."""
        args = (payload, dispatch)
        try:
            result = await self.ledger.run(
                task.spec,
                args,
                {},
                attempt_id=dispatch.new_attempt_id(),
                origin=dispatch.origin(),
                lease=self.lease,
            )
        except (StoreError, ConfigError, HandOffNeedsAsync) as exc:
            return _unavailable(exc)  # a hand-off: recorded as a retryable failure
        except Exception as exc:  # the handler's failure or an outcome: recorded, reported
            return JSONResponse(failed(type(exc).__name__, str(exc)))
        # The result as stored, as a replay answers it and a callback would carry it.
        return JSONResponse(output_of(stored_form(task.spec.adapter, result)))

    async def _accept(
        self, task: Task, dispatch: Dispatch, payload: Any, identity: tuple[str, str, str | None]
    ) -> JSONResponse:
        """The async pattern: claim with a watch on the engine task, answer at once."""
        assert dispatch.callback_url is not None  # parse_dispatch checked it
        key, fingerprint, version = identity
        # The run's span is the attempt's: the claim keeps it, the handler's task ends it.
        run = RunSpan(task.spec.name, self.ledger.namespace, key)
        try:
            with run.meanwhile():
                outcome = await self.ledger.claim(
                    key,
                    fingerprint=fingerprint,
                    result_version=version,
                    attempt_id=dispatch.new_attempt_id(),
                    origin=dispatch.origin(),
                    lease=self.lease,
                    watch=Watch(dispatch.task, _target(dispatch, task.spec.name)),
                    trace=run.traceparent,
                )
                run.claimed(outcome)
        except (StoreError, ConfigError) as exc:  # the store is down or misconfigured
            run.end()
            return _unavailable(exc)
        except RillExecutorError as exc:
            run.end()
            return self._refused(task, exc, _bad(exc))
        if not isinstance(outcome, AsyncClaim):
            run.end()
        if isinstance(outcome, Conflict):
            error: KeyConflict = outcome.error()
            return JSONResponse(failed("KeyConflict", str(error)), status_code=409)
        if isinstance(outcome, AsyncClaim):
            self._start(task, outcome, (payload, dispatch), run)
            state = "accepted"
        elif isinstance(outcome, InProgress):
            state = "joined"  # the running attempt's finish will notify this task too
        else:
            self.deliverer.wake()  # the stored outcome's notice is due now
            state = "replayed"
        return JSONResponse({"result_type": "SUCCESS", "state": state, "key": key})

    def _start(self, task: Task, claim: AsyncClaim, args: tuple[Any, ...], span: RunSpan) -> None:
        async def run() -> None:
            # A failure is recorded as the attempt's outcome and reported by the callback; a
            # finish the store did not take is tried while the lease lasts, then logged,
            # and the job is re-driven once its lapse is noticed.
            with contextlib.suppress(Exception):
                try:
                    await self.ledger.run_claimed(task.spec, claim, args, span, persist=True)
                except HandedOff:
                    await self._handoffs.handed_off(claim)
                finally:  # a handler that asked for a token and then failed or returned
                    self._handoffs.forget(claim)
            self.deliverer.wake()

        running = asyncio.create_task(run(), name=f"rill-{claim.key}")
        self._running.add(running)
        running.add_done_callback(self._running.discard)

    async def _restart(self, handler: str, claim: AsyncClaim, dispatch: Dispatch) -> bool:
        """Run ``dispatch`` again under ``claim`` (a lapsed job's takeover), if its handler is
        mounted here and its input still gives the claimed key; False otherwise."""
        task = self._tasks.get(handler)
        if task is None:
            return False
        payload = task.payload(dispatch)
        if task.spec.identity((payload, dispatch), {})[0] != claim.key:
            return False  # the handler's key function changed since: not this job
        run = RunSpan(task.spec.name, self.ledger.namespace, claim.key)
        run.claimed(claim)
        self._start(task, claim, (payload, dispatch), run)
        return True

    def hand_off(self, ttl: Seconds, *, lease: Seconds | None = None) -> str:
        """A completion token for the running attempt, good for ``ttl``; the attempt's lease
        is extended to ``lease`` (default ``ttl``; at most 7 days, and at least twice the
        store's longest wait, or ``ConfigError``) from now. Give the token to the external
        worker, then ``raise HandedOff()``: the worker ends the attempt by presenting it to
        ``POST {prefix}/complete``. Call it from a handler mounted with ``task`` (``def`` or
        ``async def``) on an async dispatch."""
        return self._handoffs.hand_off(ttl, lease=lease)

    async def drain(self) -> None:
        """Wait for the handlers started by async dispatches to end."""
        while self._running:
            await asyncio.gather(*self._running, return_exceptions=True)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: FastAPI) -> AsyncIterator[None]:
        """Run the deliverer while the app serves; let running handlers end at shutdown.

        A bad setting (a short ``token_secret``) is raised here, as the app starts: an ASGI
        server stops on a failed start-up, where an error at import would have it restart
        its workers for ever."""
        if self._handoffs.problem is not None:
            raise self._handoffs.problem
        self.deliverer.start()
        try:
            yield
        finally:
            await self.drain()
            await self.deliverer.deliver()
            await self.deliverer.stop()
