"""Spans and metrics through the OpenTelemetry API; the application chooses the SDK.

Without an SDK every tracer and meter here is OpenTelemetry's no-op: a span is not recorded,
so no attribute is built (``is_recording``), and no context is attached for an invalid one.
Names and attributes are listed in ``docs/tracing.md``; they live under ``rill.*``, with
OpenTelemetry's own (``error.type``, ``code.function.name``) where one applies. Payloads,
results and business keys are never recorded; a key only as ``rill.job.id``, its digest.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Protocol

from opentelemetry import context, metrics, trace
from opentelemetry.trace import (
    INVALID_SPAN,
    Link,
    NoOpTracerProvider,
    ProxyTracerProvider,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from ._errors import HandedOff, StaleAttempt
from ._housekeeping import CollectReport
from ._keys import job_id
from ._outcomes import Conflict, InProgress, Replay
from ._records import JobRow
from ._store import ClaimRequest
from ._version import __version__

__all__ = [
    "SCOPE",
    "RunSpan",
    "Scope",
    "claim_outcome",
    "claim_span",
    "claimed",
    "current_traceparent",
    "heartbeat",
    "linked",
    "store_kind",
    "store_span",
    "too_large",
    "traceparent",
    "write_span",
]

from opentelemetry.metrics import _internal as _metrics_api

# Providers configured by environment variables are loaded on first use: ask publicly then.
_FAST = (
    hasattr(trace, "_TRACER_PROVIDER")
    and hasattr(_metrics_api, "_METER_PROVIDER")
    and not {"OTEL_PYTHON_TRACER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER"} & set(os.environ)
)
_NO_TRACING = (NoOpTracerProvider, ProxyTracerProvider)
_NO_METRICS = (metrics.NoOpMeterProvider, getattr(_metrics_api, "_ProxyMeterProvider", type(None)))

SCOPE = "rill_executor"
tracer = trace.get_tracer(SCOPE, __version__)
meter = metrics.get_meter(SCOPE, __version__)

claims = meter.create_counter("rill.claims", "{claim}", "Claims, by outcome")
takeovers = meter.create_counter(
    "rill.takeovers", "{claim}", "Claims that took a job over from an attempt that ran out"
)
conflicts = meter.create_counter(
    "rill.conflicts", "{claim}", "Claims refused: the key was used with other inputs"
)
fenced_writes = meter.create_counter(
    "rill.fenced_writes", "{write}", "Writes of a superseded attempt refused, by reason"
)
results_too_large = meter.create_counter(
    "rill.results_too_large", "{result}", "Results refused for their size"
)
store_duration = meter.create_histogram(
    "rill.store.operation.duration", "s", "Store round trips, by operation and store kind"
)
handler_duration = meter.create_histogram(
    "rill.handler.duration", "s", "Handler runs, by handler and outcome"
)


def traceparent(span: Span) -> str | None:
    """The W3C ``traceparent`` of ``span``, or None for a span that is not traced."""
    context = span.get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def current_traceparent() -> str | None:
    """The ``traceparent`` of the current span, if one is traced."""
    return traceparent(trace.get_current_span()) if enabled() else None


def linked(trace_header: str | None) -> Link | None:
    """A link to the span a stored ``traceparent`` names."""
    if trace_header is None:
        return None
    _, trace_id, span_id, flags = trace_header.split("-")
    context = SpanContext(
        int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(int(flags, 16))
    )
    return Link(context, {"rill.link": "attempt"})


def store_kind(store: object) -> str:
    """What system a store is (``postgresql``, ``redis``…); never its address."""
    inner = getattr(store, "sync", store)  # an async face over a sync store
    kind = getattr(inner, "kind", None)
    if isinstance(kind, str):
        return kind
    return type(inner).__name__.lower().removeprefix("async").removesuffix("store") or "store"


def claim_outcome(outcome: object) -> str:
    """``claimed``, ``takeover``, ``replay``, ``in_progress`` or ``conflict``: what a claim
    answered (a granted claim's row, or the ledger's claim)."""
    if isinstance(outcome, Replay):
        return "replay"
    if isinstance(outcome, InProgress):
        return "in_progress"
    if isinstance(outcome, Conflict):
        return "conflict"
    if isinstance(outcome, JobRow):  # a takeover keeps the record's creation time
        return "takeover" if outcome.created_at != outcome.claimed_at else "claimed"
    return "takeover" if getattr(outcome, "takeover", False) else "claimed"


def handler_outcome(exc: BaseException | None, terminal: bool) -> str:
    if exc is None:
        return "succeeded"
    if isinstance(exc, HandedOff):
        return "handed_off"
    return "failed_terminal" if terminal else "failed_retryable"


def _fail(span: Span, exc: BaseException) -> None:
    if isinstance(exc, HandedOff):
        return  # the work goes on elsewhere: not an error of this span
    if span.is_recording():
        span.set_attribute("error.type", type(exc).__qualname__)
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))


class Attempt(Protocol):
    """What spans and metrics read of a claim (``Claim`` and ``AsyncClaim`` are ones)."""

    namespace: str
    lease_expires_at: datetime

    @property
    def job_id(self) -> str: ...
    @property
    def attempt_id(self) -> str: ...
    @property
    def fence(self) -> int: ...


# The run span of each claim a call made (kept while the claim lives): its heartbeats are
# events on it.
_run_spans: weakref.WeakKeyDictionary[object, Span] = weakref.WeakKeyDictionary()


class _Switch:
    """Whether an SDK is installed: until one is, every span and metric here is skipped,
    not built and dropped. OpenTelemetry sets a provider once, so once on, it stays on.

    The public way to ask (``get_tracer_provider()``) reads the environment on every call,
    which would cost more than the spans it spares; the API modules' own globals say the
    same for free, and are read where they exist (an API without them asks publicly)."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = False

    def __call__(self) -> bool:
        if not self.on:
            if _FAST:
                self.on = (
                    trace._TRACER_PROVIDER is not None or _metrics_api._METER_PROVIDER is not None
                )
            else:  # pragma: no cover  # an API release without those globals
                self.on = not isinstance(
                    trace.get_tracer_provider(), _NO_TRACING
                ) or not isinstance(metrics.get_meter_provider(), _NO_METRICS)
        return self.on


enabled = _Switch()


class Scope:
    """``span`` as the current span while the block runs (if it is traced), then ended; an
    exception is recorded on it."""

    __slots__ = ("end", "span", "token")

    def __init__(self, span: Span, *, end: bool = True) -> None:
        self.span = span
        self.end = end  # False: the span goes on after the block (ended by its owner)
        self.token: object = None

    def __enter__(self) -> Span:
        if self.span.get_span_context().is_valid:
            self.token = context.attach(trace.set_span_in_context(self.span))
        return self.span

    def __exit__(self, t: object, exc: BaseException | None, tb: object) -> None:
        if exc is not None:
            _fail(self.span, exc)
        if self.token is not None:
            context.detach(self.token)  # type: ignore[arg-type]
        if self.end:
            self.span.end()


_NO_SCOPE = Scope(INVALID_SPAN)  # holds no state for a span that is not traced
_NO_ATTRIBUTES: dict[str, str] = {}


class RunSpan:
    """The span of one decorated call (``rill.run {handler}``) and its handler's metrics;
    a context manager that makes it the current span."""

    __slots__ = ("attributes", "scope", "span", "started")

    def __init__(self, handler: str, namespace: str, key: str) -> None:
        self.span: Span = INVALID_SPAN
        self.started = 0.0
        if not enabled():  # nothing to record: the no-op parts every call can share
            self.attributes = _NO_ATTRIBUTES
            self.scope = _NO_SCOPE
            return
        self.attributes = {"rill.namespace": namespace, "rill.handler": handler}
        self.span = tracer.start_span(f"rill.run {handler}", kind=SpanKind.INTERNAL)
        if self.span.is_recording():
            self.span.set_attributes(
                {
                    **self.attributes,
                    "rill.job.id": job_id(namespace, key),
                    "code.function.name": handler,
                }
            )
        self.scope = Scope(self.span)

    def __enter__(self) -> RunSpan:
        if self.scope is not _NO_SCOPE:
            self.scope.__enter__()
        return self

    def __exit__(self, t: object, exc: BaseException | None, tb: object) -> None:
        if self.scope is not _NO_SCOPE:
            self.scope.__exit__(t, exc, tb)

    def meanwhile(self) -> Scope:
        """The run's span current for a block, without ending it: the claim of an async
        dispatch, whose handler runs (and ends the span) later, in a task of its own."""
        return Scope(self.span, end=False)

    def end(self) -> None:
        """End the span of a run whose claim answered without running the handler."""
        self.span.end()

    @property
    def traceparent(self) -> str | None:
        return None if self.scope is _NO_SCOPE else traceparent(self.span)

    def claimed(self, outcome: object) -> None:
        """What the claim answered; a duplicate links to the attempt that did the work."""
        if self.scope is _NO_SCOPE or not self.span.is_recording():
            return
        if not isinstance(outcome, (Replay, InProgress, Conflict, JobRow)):  # a claim object
            _run_spans[outcome] = self.span
        self.span.set_attribute("rill.claim.outcome", claim_outcome(outcome))
        if isinstance(outcome, (Replay, InProgress)):
            owner = outcome.attempt_id if isinstance(outcome, Replay) else outcome.owner_attempt_id
            self.span.set_attribute("rill.attempt.fence", outcome.fence)
            if owner:
                self.span.set_attribute("rill.replay.attempt.id", owner)
            if (link := linked(outcome.trace)) is not None:
                self.span.add_link(link.context, link.attributes)
        elif not isinstance(outcome, Conflict):
            self.span.set_attributes(
                {
                    "rill.attempt.id": outcome.attempt_id,  # type: ignore[attr-defined]
                    "rill.attempt.fence": outcome.fence,  # type: ignore[attr-defined]
                }
            )

    def running(self) -> None:
        if self.attributes:
            self.started = time.perf_counter()

    def ran(self, exc: BaseException | None, terminal: bool) -> None:
        if not self.attributes:  # telemetry was off when the run began
            return
        outcome = handler_outcome(exc, terminal)
        handler_duration.record(
            time.perf_counter() - self.started, {**self.attributes, "rill.outcome": outcome}
        )
        if self.span.is_recording():
            self.span.set_attribute("rill.outcome", outcome)


class _Op:
    """One store round trip: its span (``rill.claim``, ``rill.commit``…) and its duration;
    with ``claim``, a fenced write, counted as fenced when the fence refuses it."""

    __slots__ = ("claim", "kind", "operation", "scope", "started")

    def __init__(
        self,
        operation: str,
        kind: str,
        attributes: Mapping[str, Any],
        claim: Attempt | None = None,
    ) -> None:
        self.operation, self.kind, self.claim = operation, kind, claim
        span = tracer.start_span(f"rill.{operation}", kind=SpanKind.CLIENT)
        if span.is_recording():
            span.set_attributes({**attributes, "rill.store.kind": kind})
        self.scope = Scope(span)
        self.started = time.perf_counter()

    def __enter__(self) -> Span:
        return self.scope.__enter__()

    def __exit__(self, t: object, exc: BaseException | None, tb: object) -> None:
        span = self.scope.span
        if self.claim is not None:
            if isinstance(exc, StaleAttempt):
                fenced(self.claim, self.operation, exc, span)
            elif exc is None and span.is_recording():
                span.set_attribute("rill.write.outcome", "written")
        self.scope.__exit__(t, exc, tb)
        store_duration.record(
            time.perf_counter() - self.started,
            {"rill.store.operation": self.operation, "rill.store.kind": self.kind},
        )


class _Off:
    """What a store round trip costs while no SDK is installed: nothing."""

    __slots__ = ()

    def __enter__(self) -> Span:
        return INVALID_SPAN

    def __exit__(self, t: object, exc: BaseException | None, tb: object) -> None:
        return None


_OFF = _Off()


def store_span(operation: str, kind: str, attributes: Mapping[str, Any]) -> _Op | _Off:
    """The span and duration of one store round trip (``rill.claim``…)."""
    return _Op(operation, kind, attributes) if enabled() else _OFF


def claim_span(request: ClaimRequest, kind: str) -> _Op | _Off:
    """The span of a claim's round trip."""
    if not enabled():
        return _OFF
    attributes = {"rill.namespace": request.namespace, "rill.job.id": request.job_id}
    return _Op("claim", kind, attributes)


def claimed(span: Span, namespace: str, outcome: object, handler: str | None) -> None:
    """Count a claim's answer, by outcome; and put it on its span."""
    if not enabled.on:
        return
    kind = claim_outcome(outcome)
    attributes = {"rill.namespace": namespace, "rill.claim.outcome": kind}
    if handler is not None:
        attributes["rill.handler"] = handler
    claims.add(1, attributes)
    if kind == "takeover":
        takeovers.add(1, attributes)
    elif kind == "conflict":
        conflicts.add(1, attributes)
    if span.is_recording():
        span.set_attribute("rill.claim.outcome", kind)
        if isinstance(outcome, JobRow):
            span.set_attributes(
                {
                    "rill.attempt.id": outcome.owner_attempt or "",
                    "rill.attempt.fence": outcome.fence,
                }
            )


def fenced(claim: Attempt, operation: str, exc: StaleAttempt, span: Span | None) -> None:
    """Count a write refused by the fence, with its reason; note it on ``span``."""
    fenced_writes.add(
        1,
        {
            "rill.namespace": claim.namespace,
            "rill.store.operation": operation,
            "rill.fence.reason": exc.reason,
        },
    )
    if span is not None and span.is_recording():
        span.set_attributes({"rill.write.outcome": "fenced", "rill.fence.reason": exc.reason})


def write_span(claim: Attempt, operation: str, store_kind: str) -> _Op | _Off:
    """A fenced write of ``claim`` (commit, fail, output registration)."""
    if not enabled():
        return _OFF
    attributes = {
        "rill.namespace": claim.namespace,
        "rill.job.id": claim.job_id,
        "rill.attempt.id": claim.attempt_id,
        "rill.attempt.fence": claim.fence,
    }
    return _Op(operation, store_kind, attributes, claim)


@contextmanager
def heartbeat(claim: Attempt, store_kind: str) -> Iterator[None]:
    """A heartbeat: not a span, but an event on the run span (``rill.heartbeat``, or
    ``rill.heartbeat.lost`` with the reason when the fence refused it)."""
    if not enabled():
        yield
        return
    started = time.perf_counter()
    span = _run_spans.get(claim, INVALID_SPAN)
    try:
        yield
    except StaleAttempt as exc:
        fenced(claim, "heartbeat", exc, None)
        if span.is_recording():
            span.add_event("rill.heartbeat.lost", {"rill.fence.reason": exc.reason})
        raise
    else:
        if span.is_recording():
            until = claim.lease_expires_at.isoformat()
            span.add_event("rill.heartbeat", {"rill.lease.expires_at": until})
    finally:
        store_duration.record(
            time.perf_counter() - started,
            {"rill.store.operation": "heartbeat", "rill.store.kind": store_kind},
        )


def too_large(namespace: str) -> None:
    if enabled():
        results_too_large.add(1, {"rill.namespace": namespace})


# -- outputs -----------------------------------------------------------------------------


@contextmanager
def output_put(claim: Attempt, name: str) -> Iterator[Span]:
    """An output written under ``claim`` (``rill.output.put``): its fenced registration, then
    the object; a registration the fence refused is counted and noted as a commit's is."""
    span = tracer.start_span("rill.output.put", kind=SpanKind.INTERNAL)
    if span.is_recording():
        span.set_attributes(
            {
                "rill.namespace": claim.namespace,
                "rill.job.id": claim.job_id,
                "rill.attempt.id": claim.attempt_id,
                "rill.attempt.fence": claim.fence,
                "rill.output.name": name,
            }
        )
    with Scope(span):
        try:
            yield span
        except StaleAttempt as exc:
            fenced(claim, "output.register", exc, span)
            raise


def output_written(span: Span, size: int) -> None:
    if span.is_recording():
        span.set_attributes({"rill.write.outcome": "written", "rill.output.size": size})


@contextmanager
def output_span(operation: str, namespace: str, name: str) -> Iterator[Span]:
    """A committed output read back (``rill.output.verify``) or copied to its canonical key
    (``rill.output.publish``)."""
    span = tracer.start_span(f"rill.output.{operation}", kind=SpanKind.INTERNAL)
    if span.is_recording():
        span.set_attributes({"rill.namespace": namespace, "rill.output.name": name})
    with Scope(span):
        yield span


@contextmanager
def orphans_span(namespace: str) -> Iterator[Span]:
    """One orphan collection of ``namespace`` (``rill.orphans.collect``); ``collected`` puts
    what it found on it."""
    span = tracer.start_span("rill.orphans.collect", kind=SpanKind.INTERNAL)
    if span.is_recording():
        span.set_attribute("rill.namespace", namespace)
    with Scope(span):
        yield span


def collected(span: Span, report: CollectReport) -> None:
    if span.is_recording():
        span.set_attributes(
            {
                "rill.orphans.deleted": len(report.deleted),
                "rill.orphans.kept_young": len(report.kept_young),
                "rill.orphans.unknown": len(report.unknown),
                "rill.orphans.jobs": report.jobs,
            }
        )
