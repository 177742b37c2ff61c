"""Handing work to external workers: completion tokens, and the endpoints that take them.

An async handler calls ``hand_off`` for a token bound to its attempt and fence, gives it to
an external worker and raises ``HandedOff``; the worker commits (or fails, or extends the
lease) by presenting the token to ``POST {prefix}/complete`` / ``{prefix}/heartbeat``,
fenced like any other write of the attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import typing
from datetime import timedelta
from typing import Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .. import (
    AsyncClaim,
    AsyncLedger,
    ConfigError,
    StaleAttempt,
    StoreError,
    UsageError,
    current_async_claim,
)
from ..integration import Seconds, check_lease, to_us
from ..reports import TOKEN_REFUSED
from ._bodies import BadLength, BodyTooLarge, read_body, refused_body
from ._callbacks import body_text, output_of, too_large
from ._deliverer import Deliverer
from ._dispatch import MAX_DISPATCH_BYTES
from ._task import CallbackTooLarge, HandOffNeedsAsync, Task
from ._task import running as running_now
from ._tokens import CompletionTokens, InvalidToken, TokenClaims

__all__ = ["HandOffs"]

log = logging.getLogger("rill_executor.rillflow")

_FORGED_LOG_EVERY = 60.0  # seconds between two log lines counting forged tokens
_MAX_EVENT_FIELD = 128  # a refused token's entry: each field capped (the detail longer)
_MAX_EVENT_DETAIL = 500

MAX_HEARTBEAT_BYTES = 1024
"""A heartbeat's body is ``{"lease": seconds}``: anything longer is refused (413)."""


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


MIN_HEARTBEAT_LEASE = 1.0
MAX_HEARTBEAT_LEASE = 7 * 24 * 3600.0
"""The lease a heartbeat may ask for, in seconds: at least 1 s (a shorter one would end the
attempt's lease at once), at most 7 days; a non-finite number is refused."""


def _handoff_lease(lease: Seconds, store: object) -> float:
    """A hand-off's lease in seconds: at most a heartbeat's longest, and well above the
    store's longest wait."""
    us = to_us(lease, "hand_off lease")
    if us / 1e6 > MAX_HEARTBEAT_LEASE:
        raise ConfigError(
            f"hand_off(lease=...) of {us / 1e6:g} s is too long: a hand-off's lease (its ttl"
            f" when no lease is given) is at most {MAX_HEARTBEAT_LEASE / 86400:g} days, as a"
            " heartbeat's; for longer work, give a shorter lease and let the worker extend it"
            " (POST /rill/heartbeat with its token)"
        )
    check_lease(us, store, "hand_off lease")
    return us / 1e6


class _Beat(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    lease: float | None = Field(default=None, ge=MIN_HEARTBEAT_LEASE, le=MAX_HEARTBEAT_LEASE)


class HandOffs:
    """The executor's hand-offs: tokens issued, leases asked for, and the completion routes."""

    def __init__(
        self,
        ledger: AsyncLedger,
        tasks: dict[str, Task],
        deliverer: Deliverer,
        token_secret: str | bytes | None,
        max_body_bytes: int = MAX_DISPATCH_BYTES,
    ) -> None:
        self.ledger = ledger
        self.clock = ledger.clock  # leases asked for, tokens' expiry, the log's pace
        self._max_body = max_body_bytes
        self._tasks = tasks
        self.deliverer = deliverer
        self.tokens: CompletionTokens | None = None
        self.problem: ConfigError | None = None
        """A bad setting (a short secret), raised when the app starts (see ``lifespan``)
        rather than here, at import, where a server would restart its workers for ever."""
        try:
            self.tokens = (
                None if token_secret is None else CompletionTokens(token_secret, clock=self.clock)
            )
        except ConfigError as exc:
            self.problem = exc
        self.forged = 0
        """How many tokens were refused for a signature that does not verify."""
        self._forged_logged: int | None = None  # when the count was last logged (ns)
        self._asked: dict[str, int] = {}  # attempt id -> lease end it asked for (monotonic ns)
        self._beats: set[asyncio.Task[Any]] = set()

    def hand_off(self, ttl: Seconds, *, lease: Seconds | None = None) -> str:
        """See ``RillFlowExecutor.hand_off``."""
        running = running_now.get(None)
        try:
            claim = current_async_claim()
        except UsageError:
            running = None
        if running is None:
            raise UsageError("hand_off() is only available inside a handler mounted with task()")
        if self.problem is not None:
            raise self.problem
        if self.tokens is None:
            raise ConfigError(
                "hand_off() needs RillFlowExecutor(token_secret=...): the secret that signs"
                " completion tokens, at least 32 bytes, e.g. secrets.token_urlsafe(32)"
            )
        if not running.dispatch.is_async:
            raise HandOffNeedsAsync()
        seconds = _handoff_lease(ttl if lease is None else lease, self.ledger.store)
        token = self.tokens.issue(claim, handler=running.task.spec.name, ttl=ttl)
        self._asked[claim.attempt_id] = self.clock.monotonic_ns() + round(seconds * 1e9)
        beat = claim.heartbeat(timedelta(seconds=seconds))
        if _in_loop(running.loop):
            pending = running.loop.create_task(beat)
            self._beats.add(pending)
            pending.add_done_callback(self._beats.discard)
        else:  # a def handler's worker thread: extend before the worker can get the token
            asyncio.run_coroutine_threadsafe(beat, running.loop).result()
        return token

    async def handed_off(self, claim: AsyncClaim) -> None:
        """Extend the lease once more now that the handler's heartbeat has stopped (its
        last beat may have shortened it to the default)."""
        until = self._asked.pop(claim.attempt_id, None)
        if until is None:
            log.warning("%r raised HandedOff without hand_off(): no token was issued", claim)
            return
        left_us = (until - self.clock.monotonic_ns()) // 1000
        if left_us > 0:
            with contextlib.suppress(StaleAttempt):  # completed already, or taken over
                await claim.heartbeat(timedelta(microseconds=left_us))

    def forget(self, claim: AsyncClaim) -> None:
        """The attempt's handler is over: what it asked for is kept no longer (one that
        asked for a token and then failed or returned never raised ``HandedOff``)."""
        self._asked.pop(claim.attempt_id, None)

    def mount(self, router: APIRouter, prefix: str) -> None:
        if self.tokens is None:
            return  # no secret, or a bad one: refused when the app starts

        async def complete(
            request: Request, authorization: typing.Annotated[str | None, Header()] = None
        ) -> JSONResponse:
            return await self._complete(authorization, request)

        async def heartbeat(
            request: Request, authorization: typing.Annotated[str | None, Header()] = None
        ) -> JSONResponse:
            return await self._heartbeat(authorization, request)

        router.add_api_route(f"{prefix}/complete", complete, methods=["POST"])
        router.add_api_route(f"{prefix}/heartbeat", heartbeat, methods=["POST"])

    async def _verified(self, authorization: str | None, use: str) -> TokenClaims | JSONResponse:
        assert self.tokens is not None  # the routes exist only with a secret
        scheme, _, token = (authorization or "").partition(" ")
        try:
            if scheme.lower() != "bearer" or not token.strip():
                raise InvalidToken(
                    "send the token as 'Authorization: Bearer <token>'", reason="malformed"
                )
            claims = self.tokens.verify(token)
        except InvalidToken as exc:
            if exc.reason == "forged":  # unverified: nothing it claims is written anywhere
                self._forged_seen()
            else:
                log.warning("completion token refused (%s): %s", exc.reason, exc)
                if exc.claims is not None and self._ours(exc.claims):
                    await self._refused(exc.claims, exc.reason, f"{use}: {exc}")
            return _token_error(401, exc.reason, str(exc))
        if not self._ours(claims):
            return _token_error(
                404,
                "unknown",
                f"no handler {claims.handler!r} in namespace {claims.namespace!r} here",
            )
        return claims

    def _forged_seen(self) -> None:
        """Count a token whose signature does not verify; log the count at most once a
        minute (a flood of them must not flood the log either)."""
        self.forged += 1
        now = self.clock.monotonic_ns()
        last = self._forged_logged
        if last is None or now - last >= _FORGED_LOG_EVERY * 1e9:
            self._forged_logged = now
            log.warning(
                "completion tokens refused, their signature not verifying: %d so far", self.forged
            )

    def _ours(self, claims: TokenClaims) -> bool:
        return claims.namespace == self.ledger.namespace and claims.handler in self._tasks

    async def _refused(self, claims: TokenClaims, reason: str, detail: str) -> None:
        """Put a refused token on the job's record (its event log): the trace of a worker
        that reported late or with a token that was not ours. A job that does not exist gets
        nothing; a record that cannot be written is logged, and the answer stays the same."""
        try:
            await self.ledger.record_event(
                claims.key,
                TOKEN_REFUSED,
                attempt_id=claims.attempt_id[:_MAX_EVENT_FIELD],
                fence=claims.fence,
                reason=reason[:_MAX_EVENT_FIELD],
                detail=detail[:_MAX_EVENT_DETAIL],
            )
        except (StoreError, UsageError) as exc:
            log.warning("refused token not recorded for %r: %s", claims.key, exc)

    def _resumed(self, claims: TokenClaims) -> AsyncClaim:
        return self.ledger.resume(
            claims.key, job_id=claims.job_id, attempt_id=claims.attempt_id, fence=claims.fence
        )

    async def _body(self, request: Request, limit: int) -> bytes | JSONResponse:
        """The body of a request whose token was verified (none is read before), within
        ``limit``: 413 over it."""
        try:
            return await read_body(request, limit)
        except BodyTooLarge as exc:
            return refused_body(exc)
        except BadLength as exc:
            return _token_error(400, "bad_body", str(exc))

    async def _complete(self, authorization: str | None, request: Request) -> JSONResponse:
        """Commit (or fail) the attempt a token names, through its fence."""
        claims = await self._verified(authorization, "complete")
        if isinstance(claims, JSONResponse):
            return claims
        body = await self._body(request, self._max_body)
        if isinstance(body, JSONResponse):
            return body
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
            await self._refused(claims, exc.reason, f"complete: {exc}")
            return _token_error(409, exc.reason, str(exc))
        except StoreError as exc:
            return _token_error(503, "store", _not_recorded(exc, claims))
        except (UsageError, CallbackTooLarge) as exc:
            return _token_error(422, "invalid_result", str(exc))
        finally:
            self.deliverer.wake()  # the commit wrote the notices of every waiting dispatch
        state = "failed" if report.error is not None else "committed"
        return JSONResponse({"state": state, "key": claims.key, "attempt_id": claims.attempt_id})

    async def _commit(self, task: Task, claim: AsyncClaim, result: Any) -> None:
        """As the decorator commits: a result that cannot be stored, or whose callback
        body (built from the result as stored) would be over the engine's limit, is the
        attempt's terminal failure, and is raised."""
        try:
            completion = task.spec.completion_of(claim, result)
            assert completion.result is not None  # a success's stored JSON
            problem = too_large(body_text(output_of(json.loads(completion.result))))
            if problem is not None:
                raise CallbackTooLarge(problem)
        except (UsageError, CallbackTooLarge) as exc:
            await claim.fail(exc, retryable=False)
            raise
        await claim.finish(completion)

    async def _heartbeat(self, authorization: str | None, request: Request) -> JSONResponse:
        """Extend the lease by ``lease`` seconds, or by the token's remaining time."""
        claims = await self._verified(authorization, "heartbeat")
        if isinstance(claims, JSONResponse):
            return claims
        body = await self._body(request, MAX_HEARTBEAT_BYTES)
        if isinstance(body, JSONResponse):
            return body
        try:
            asked = _Beat.model_validate_json(body or b"{}").lease
        except ValidationError as exc:
            return _token_error(400, "bad_body", f'the body must be {{"lease": seconds}}: {exc}')
        lease = claims.remaining(self.clock) if asked is None else timedelta(seconds=asked)
        try:
            until = await self._resumed(claims).heartbeat(lease)
        except StaleAttempt as exc:
            await self._refused(claims, exc.reason, f"heartbeat: {exc}")
            return _token_error(409, exc.reason, str(exc))
        except StoreError as exc:
            return _token_error(503, "store", str(exc))
        return JSONResponse({"lease_expires_at": until.isoformat()})


def _not_recorded(exc: StoreError, claims: TokenClaims) -> str:
    """What a worker is told when its report did not reach the store: the cause, and what
    to do. The lease's end is not known here (only the store knows it), so none is given."""
    cause = exc.__cause__ if isinstance(exc.__cause__, StoreError) else exc
    return (
        f"the store did not take the report for attempt {claims.attempt_id} of"
        f" {claims.key!r}, so it may not be recorded ({cause}). Report again with the same"
        f" token (good until {claims.expires_at.isoformat()}); heartbeat meanwhile to keep"
        " the attempt's lease"
    )
