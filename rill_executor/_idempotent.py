"""The ``idempotent`` decorator: one spec, a sync loop and an async loop.

``IdempotentSpec`` holds the pure parts (business identity of a call, which errors are
terminal, the wait schedule); ``run_sync`` / ``run_async`` do the I/O around the handler.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import time
import typing
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import PydanticSchemaGenerationError, TypeAdapter

from ._claim import AsyncClaim, Claim
from ._codec import adapter_for, type_name
from ._core import Seconds, to_us
from ._errors import (
    ConfigError,
    HandedOff,
    InvalidKey,
    RillExecutorError,
    TerminalError,
    UsageError,
)
from ._heartbeat import AsyncHeartbeat, Heartbeats
from ._keys import fingerprint_of, handler_key, validate_handler_name
from ._outcomes import Conflict, InProgress, Replay
from ._store import Completion

if TYPE_CHECKING:
    from ._ledger import AsyncLedger, Ledger

__all__ = [
    "HANDLER_NAME",
    "Handler",
    "IdempotentSpec",
    "answer_async",
    "current_async_claim",
    "current_claim",
    "stored_key",
]

log = logging.getLogger("rill_executor")
_current: contextvars.ContextVar[Claim | AsyncClaim] = contextvars.ContextVar("rill_claim")


HANDLER_NAME = "__rill_handler__"  # the attribute a decorated function carries its name in
Handler = str | Callable[..., Any]


def stored_key(key: str, handler: Handler | None) -> str:
    """The key a job is stored under: ``key`` itself, or scoped by a decorated handler."""
    if handler is None:
        return key
    name = handler if isinstance(handler, str) else getattr(handler, HANDLER_NAME, None)
    if name is None:
        raise UsageError(
            f"{handler!r} is not decorated with idempotent(); pass the decorated function"
            " or its name"
        )
    return handler_key(name, key)


def current_claim() -> Claim:
    """The ``Claim`` of the ``idempotent`` handler running in this context."""
    claim = _current.get(None)
    if not isinstance(claim, Claim):
        raise UsageError("current_claim() is only available inside a sync idempotent handler")
    return claim


def current_async_claim() -> AsyncClaim:
    """The ``AsyncClaim`` of the ``idempotent`` async handler running in this task."""
    claim = _current.get(None)
    if not isinstance(claim, AsyncClaim):
        raise UsageError(
            "current_async_claim() is only available inside an async idempotent handler"
        )
    return claim


@dataclass(frozen=True)
class IdempotentSpec:
    fn: Callable[..., Any]
    name: str
    key: Callable[..., object]
    fingerprint: Callable[..., Any] | None
    result_version: Callable[..., str | None] | str | None
    wait: float | None
    heartbeat: float | None
    terminal: tuple[type[BaseException], ...]
    signature: inspect.Signature = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "signature", inspect.signature(self.fn))

    @classmethod
    def build(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None,
        key: Callable[..., object],
        fingerprint: Callable[..., Any] | None,
        result_version: Callable[..., str | None] | str | None,
        wait: Seconds | None,
        heartbeat: bool | Seconds,
        terminal: tuple[type[BaseException], ...],
        lease_us: int,
    ) -> IdempotentSpec:
        if not callable(key):
            raise UsageError("idempotent(key=...) must be a function of the handler's arguments")
        interval: float | None
        if heartbeat is True:
            interval = lease_us / 3 / 1e6
        elif heartbeat is False:
            interval = None
        else:
            interval = to_us(heartbeat, "heartbeat") / 1e6
        wait_s = None if wait is None else to_us(wait, "wait") / 1e6
        try:
            label = validate_handler_name(
                f"{fn.__module__}.{fn.__qualname__}" if name is None else name
            )
        except InvalidKey as exc:
            raise ConfigError(f"idempotent(name=...): {exc}") from None
        spec = cls(
            fn,
            label,
            key,
            fingerprint,
            result_version,
            wait_s,
            interval,
            (TerminalError, *terminal),
        )
        try:
            typing.get_type_hints(fn)
        except NameError:
            return spec  # a forward reference: checked on the first call, before any work
        spec.adapter  # noqa: B018  # refuse a return type that cannot be stored, now
        return spec

    def identity(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[str, str, str | None]:
        """(stored key, fingerprint, result version) of one call; the stored key is the
        business key scoped by the handler's name, so handlers never share jobs."""
        key = handler_key(self.name, self.key(*args, **kwargs))
        if self.fingerprint is not None:
            payload = self.fingerprint(*args, **kwargs)
        else:
            bound = self.signature.bind(*args, **kwargs)
            bound.apply_defaults()
            payload = dict(bound.arguments)
        version = (
            self.result_version(*args, **kwargs)
            if callable(self.result_version)
            else self.result_version
        )
        return key, fingerprint_of(payload), version

    @functools.cached_property
    def return_type(self) -> Any:
        # Resolved when decorated, or on the first call for a forward reference.
        return typing.get_type_hints(self.fn).get("return", Any)

    @functools.cached_property
    def adapter(self) -> TypeAdapter[Any]:
        try:
            return adapter_for(self.return_type)
        except PydanticSchemaGenerationError as exc:
            raise ConfigError(
                f"handler {self.name} is annotated to return {type_name(self.return_type)},"
                " which cannot be stored: pydantic has no JSON schema for it. Return a"
                " pydantic model, a dataclass, a TypedDict or plain JSON types"
            ) from exc

    def completion_of(self, claim: Claim | AsyncClaim, result: Any) -> Completion:
        """The commit of ``result``, checked to replay as the return type (raises a
        ``UsageError`` for a result that cannot be stored)."""
        return claim._core.success(
            result,
            self.adapter,
            claim.outputs.committed(),
            source=f"handler {self.name}",
            expected=type_name(self.return_type),
        )

    def is_terminal(self, exc: BaseException) -> bool:
        return isinstance(exc, self.terminal)

    def waiter(self) -> Waiter:
        return Waiter(self.wait)


class Waiter:
    """When to look again at a job another attempt is running (sans-IO)."""

    def __init__(self, wait: float | None) -> None:
        self._deadline = None if wait is None else time.monotonic() + wait
        self._delay = 0.02

    def next_delay(self, busy: InProgress) -> float | None:
        if self._deadline is None:
            return None
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            return None
        delay = min(self._delay, remaining, max(busy.lease_left.total_seconds(), 0.001))
        self._delay = min(self._delay * 2, 1.0)
        return delay


def _answer(spec: IdempotentSpec, outcome: Replay | Conflict) -> Any:
    if isinstance(outcome, Conflict):
        raise outcome.error()
    return outcome.result(spec.return_type)


def _fail_sync(claim: Claim, exc: BaseException, *, retryable: bool) -> None:
    try:
        claim.fail(exc, retryable=retryable)
    except RillExecutorError as problem:
        exc.add_note(f"rill-executor: this failure could not be recorded: {problem}")
    else:
        _explain(claim, exc)


async def _fail_async(claim: AsyncClaim, exc: BaseException, *, retryable: bool) -> None:
    try:
        await claim.fail(exc, retryable=retryable)
    except RillExecutorError as problem:
        exc.add_note(f"rill-executor: this failure could not be recorded: {problem}")
    else:
        _explain(claim, exc)


def _explain(claim: Claim | AsyncClaim, exc: BaseException) -> None:
    if isinstance(exc, UsageError):  # the handler ran, but its result cannot be stored
        exc.add_note(
            f"rill-executor: recorded as a terminal failure of attempt {claim.attempt_id}"
            f" (fence {claim.fence}) of {claim.key!r}: running the work again would repeat its"
            " side effects and return the same result. Fix the handler, then use a new"
            " result_version or resolve the key"
        )


def run_sync(
    ledger: Ledger, spec: IdempotentSpec, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    key, fingerprint, version = spec.identity(args, kwargs)
    spec.adapter  # noqa: B018  # a forward-referenced return type is checked before any work
    waiter = spec.waiter()
    while True:
        outcome = ledger.claim(key, fingerprint=fingerprint, result_version=version)
        if isinstance(outcome, Claim):
            return _run_claimed_sync(ledger.heartbeats, spec, outcome, args, kwargs)
        if not isinstance(outcome, InProgress):
            return _answer(spec, outcome)
        delay = waiter.next_delay(outcome)
        if delay is None:
            raise outcome.error()
        time.sleep(delay)


def _run_claimed_sync(
    heartbeats: Heartbeats,
    spec: IdempotentSpec,
    claim: Claim,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    token = _current.set(claim)
    beat: AbstractContextManager[object] = (
        heartbeats.watch(claim, spec.heartbeat) if spec.heartbeat else nullcontext()
    )
    try:
        with beat:
            try:
                result = spec.fn(*args, **kwargs)
            except HandedOff:  # the work goes on elsewhere: end nothing
                raise
            except BaseException as exc:
                _fail_sync(claim, exc, retryable=not spec.is_terminal(exc))
                raise
        try:
            claim._finish(spec.completion_of(claim, result), "commit")
        except UsageError as exc:  # the result cannot be stored; nothing was committed
            _fail_sync(claim, exc, retryable=False)
            raise
        return result
    finally:
        _current.reset(token)


async def run_async(
    ledger: AsyncLedger,
    spec: IdempotentSpec,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    **claim_options: Any,
) -> Any:
    """Claim, then run the handler or answer from the job; ``claim_options`` (attempt id,
    origin) go to every claim this call makes."""
    key, fingerprint, version = spec.identity(args, kwargs)
    spec.adapter  # noqa: B018  # a forward-referenced return type is checked before any work
    waiter = spec.waiter()
    while True:
        outcome = await ledger.claim(
            key, fingerprint=fingerprint, result_version=version, **claim_options
        )
        if isinstance(outcome, AsyncClaim):
            return await _run_claimed_async(spec, outcome, args, kwargs)
        if not isinstance(outcome, InProgress):
            return _answer(spec, outcome)
        delay = waiter.next_delay(outcome)
        if delay is None:
            raise outcome.error()
        await asyncio.sleep(delay)


async def answer_async(
    spec: IdempotentSpec, outcome: AsyncClaim | Replay | Conflict, args: tuple[Any, ...]
) -> Any:
    """Run the handler under a claim already made, or answer from a replay or conflict."""
    if isinstance(outcome, AsyncClaim):
        return await _run_claimed_async(spec, outcome, args, {})
    return _answer(spec, outcome)


async def _run_claimed_async(
    spec: IdempotentSpec, claim: AsyncClaim, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    token = _current.set(claim)
    beat: AbstractAsyncContextManager[object] = (
        AsyncHeartbeat(claim, spec.heartbeat) if spec.heartbeat else _null_async()
    )
    try:
        async with beat:
            try:
                result = await typing.cast(Awaitable[Any], spec.fn(*args, **kwargs))
            except HandedOff:  # the work goes on elsewhere: end nothing
                raise
            except BaseException as exc:
                await _fail_async(claim, exc, retryable=not spec.is_terminal(exc))
                raise
        try:
            await claim._finish(spec.completion_of(claim, result), "commit")
        except UsageError as exc:  # the result cannot be stored; nothing was committed
            await _fail_async(claim, exc, retryable=False)
            raise
        return result
    finally:
        _current.reset(token)


class _null_async(AbstractAsyncContextManager[None]):
    async def __aexit__(self, *exc: object) -> None:
        return None
