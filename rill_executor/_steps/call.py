"""A decorated call as one I/O-free step: it yields plain actions, the ledger performs them.

``call`` is the whole call: claim (joining a running attempt while ``wait`` lasts), run the
handler, commit or record the failure, answer. It is a generator: each ``yield`` hands the
ledger an action and receives what came of it (or has the action's exception raised at the
``yield``); a ``Step[T]`` returns a ``T``, which its driver returns. ``Ledger`` and
``AsyncLedger`` drive it with a loop each (``drive`` and ``drive_async``, in ``drive``), so
the sync and async paths share every decision. The ledger's other operations are steps too
(``operations``), with the store calls (``StoreCall``, one class per store operation, in
``store_calls``) and the blocking work (``Blocking``) they add to this vocabulary.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, TypeVar

from .. import _telemetry as telemetry
from .._clock import Clock
from .._errors import HandedOff, RillExecutorError, StoreUnavailable, UsageError
from .._idempotent import IdempotentSpec
from .._outcomes import Conflict, InProgress, Replay
from .._records import JobRow
from .._rules.core import LedgerCore
from .._store import ClaimRequest, Completion
from .store_calls import StoreCall

__all__ = [
    "Action",
    "Blocking",
    "Finish",
    "Own",
    "Renew",
    "Run",
    "SendClaim",
    "Sleep",
    "Step",
    "call",
    "claiming",
    "deciding",
    "resumed",
    "running",
]


class AnyClaim(Protocol):
    """What a step needs of a claim (a ``Claim`` or an ``AsyncClaim``): it never writes
    through one itself, it yields the write for its driver."""

    @property
    def key(self) -> str: ...
    @property
    def attempt_id(self) -> str: ...
    @property
    def fence(self) -> int: ...
    def lease_left(self) -> float: ...
    def commit_of(
        self, result: Any, *, adapter: Any = None, source: str = ..., expected: str = ...
    ) -> Completion: ...
    def failure_of(self, error: BaseException | str, *, retryable: bool) -> Completion: ...


log = logging.getLogger("rill_executor")


@dataclass(slots=True)
class SendClaim:
    """Send the claim to the store (once more after a lost reply); answer ``(answer, resent)``."""

    request: ClaimRequest


@dataclass(slots=True)
class Own:
    """Wrap the row the store granted in the ledger's claim type; answer the claim."""

    row: JobRow


@dataclass(slots=True)
class Run:
    """Run the handler under ``claim``, with its heartbeat; answer its result."""

    claim: AnyClaim
    spec: IdempotentSpec
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass(slots=True)
class Finish:
    """End ``claim``'s attempt with ``completion`` (a fenced store write)."""

    claim: AnyClaim
    completion: Completion


@dataclass(frozen=True, slots=True)
class Renew:
    """Extend ``claim``'s lease by its length (a heartbeat)."""

    claim: AnyClaim


@dataclass(frozen=True, slots=True)
class Sleep:
    seconds: float


@dataclass(frozen=True, slots=True)
class Blocking:
    """Call ``fn(*args)``, work that blocks (the output store's): in place on a ``Ledger``,
    in a worker thread on an ``AsyncLedger``; answer its result."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()


T = TypeVar("T")
Action = SendClaim | Own | Run | Finish | Renew | Sleep | StoreCall[Any] | Blocking
Step: TypeAlias = Generator[Action, Any, T]  # a step that returns a ``T``


def deciding(
    core: LedgerCore, request: ClaimRequest, handler: str | None = None
) -> Step[JobRow | Replay | InProgress | Conflict]:
    """One claim sent and decided: the row the store granted, or the ``Replay`` /
    ``InProgress`` / ``Conflict``."""
    with telemetry.claim_span(request, core.store_kind) as span:
        answer, resent = yield SendClaim(request)
        outcome = core.claim_outcome(request, answer, resent=resent)
        telemetry.claimed(span, request.namespace, outcome, handler)
    return outcome


def claiming(
    core: LedgerCore, request: ClaimRequest, handler: str | None = None
) -> Step[AnyClaim | Replay | InProgress | Conflict]:
    """One claim: the ledger's claim, or the ``Replay`` / ``InProgress`` / ``Conflict``."""
    outcome = yield from deciding(core, request, handler)
    if isinstance(outcome, JobRow):
        claim: AnyClaim = yield Own(outcome)
        return claim
    return outcome


def call(
    core: LedgerCore,
    spec: IdempotentSpec,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    claim_options: dict[str, Any],
) -> Step[Any]:
    """A decorated call; ``claim_options`` (attempt id, origin) go to every claim it makes."""
    key, fingerprint, version = spec.identity(args, kwargs)
    spec.adapter  # noqa: B018  # a forward-referenced return type is checked before any work
    waiter = Waiter(spec.wait, core.clock)
    with telemetry.RunSpan(spec.name, core.namespace, key) as run:
        while True:
            request = core.claim_request(
                key,
                fingerprint=fingerprint,
                result_version=version,
                trace=run.traceparent,
                **claim_options,
            )
            outcome = yield from claiming(core, request, spec.name)
            run.claimed(outcome)
            if isinstance(outcome, Conflict):
                raise outcome.error()
            if isinstance(outcome, Replay):
                return outcome.result(spec.return_type)
            if not isinstance(outcome, InProgress):
                return (yield from running(spec, outcome, args, kwargs, run))
            delay = waiter.next_delay(outcome)
            if delay is None:
                raise outcome.error()
            yield Sleep(delay)


def running(
    spec: IdempotentSpec,
    claim: AnyClaim,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    run: telemetry.RunSpan,
    persist: bool = False,
) -> Step[Any]:
    """The handler under a claim already made: its result committed, or its failure
    (``persist``: written while the lease lasts, see ``_finishing``)."""
    run.running()
    try:
        result = yield Run(claim, spec, args, kwargs)
    except GeneratorExit:  # the step was closed by its driver: it does no more I/O
        raise
    except HandedOff as exc:  # the work goes on elsewhere: end nothing
        run.ran(exc, terminal=False)
        raise
    except BaseException as exc:
        terminal = spec.is_terminal(exc)
        run.ran(exc, terminal)
        yield from _failing(claim, exc, retryable=not terminal, persist=persist)
        raise
    run.ran(None, terminal=False)
    try:
        completion = spec.completion_of(claim, result)
    except UsageError as exc:  # the result cannot be stored; nothing was committed
        yield from _failing(claim, exc, retryable=False, persist=persist)
        raise
    yield from _finishing(claim, completion, "commit", persist)
    return result


def resumed(
    core: LedgerCore,
    spec: IdempotentSpec,
    claim: AnyClaim,
    args: tuple[Any, ...],
    run: telemetry.RunSpan | None = None,
    persist: bool = False,
) -> Step[Any]:
    """The handler under a claim its caller made (an async dispatch's), as ``call`` runs it;
    ``run`` is the span the claim was made under, if the caller opened one. ``persist``: the
    run has nobody to tell of an unwritten finish (a background run), so it keeps trying."""
    if run is None:
        run = telemetry.RunSpan(spec.name, core.namespace, claim.key)
        run.claimed(claim)
    with run:
        return (yield from running(spec, claim, args, {}, run, persist))


def _finishing(
    claim: AnyClaim, completion: Completion, operation: str, persist: bool
) -> Step[None]:
    """Write the attempt's end. A caller is told when it did not reach the store; a run
    nobody waits on (``persist``) instead tries again, renewing its lease between tries,
    until the lease runs out: a finish written late is still the only one (it is fenced)."""
    try:
        yield Finish(claim, completion)
        return
    except StoreUnavailable as exc:
        if not persist:
            raise
        first = exc
    log.warning(
        "%s of %r by attempt %s did not reach the store; trying again while its lease lasts"
        " (%.1f s). Cause: %s",
        operation,
        claim.key,
        claim.attempt_id,
        claim.lease_left(),
        first.__cause__ or first,
    )
    delay, tries = 0.1, 1
    while claim.lease_left() > 0:
        yield Sleep(min(delay, claim.lease_left()))
        delay, tries = min(delay * 2, 2.0), tries + 1
        try:
            yield Renew(claim)  # keeps the lease while the store flaps
            yield Finish(claim, completion)
        except StoreUnavailable:
            continue
        log.warning(
            "%s of %r by attempt %s written at try %d",
            operation,
            claim.key,
            claim.attempt_id,
            tries,
        )
        return
    log.error(
        "%s of %r by attempt %s could not be written before its lease ran out (%d tries):"
        " the job stays processing until it is taken over (a watched job: by the"
        " deliverer's re-drive)",
        operation,
        claim.key,
        claim.attempt_id,
        tries,
    )
    raise first


def _failing(
    claim: AnyClaim, exc: BaseException, *, retryable: bool, persist: bool = False
) -> Step[None]:
    """Record ``exc`` as the attempt's failure; a failure to record it is noted on ``exc``."""
    try:
        yield from _finishing(claim, claim.failure_of(exc, retryable=retryable), "fail", persist)
    except RillExecutorError as problem:
        exc.add_note(f"rill-executor: this failure could not be recorded: {problem}")
        return
    if isinstance(exc, UsageError):  # the handler ran, but its result cannot be stored
        exc.add_note(
            f"rill-executor: recorded as a terminal failure of attempt {claim.attempt_id}"
            f" (fence {claim.fence}) of {claim.key!r}: running the work again would repeat its"
            " side effects and return the same result. Fix the handler, then use a new"
            " result_version or resolve the key"
        )


class Waiter:
    """When to look again at a job another attempt is running."""

    def __init__(self, wait: float | None, clock: Clock) -> None:
        self._clock = clock
        self._deadline = None if wait is None else self._now() + wait
        self._delay = 0.02

    def _now(self) -> float:
        return self._clock.monotonic_ns() / 1e9

    def next_delay(self, busy: InProgress) -> float | None:
        if self._deadline is None:
            return None
        remaining = self._deadline - self._now()
        if remaining <= 0:
            return None
        delay = min(self._delay, remaining, max(busy.lease_left.total_seconds(), 0.001))
        self._delay = min(self._delay * 2, 1.0)
        return delay
