"""The engine's trace: a dispatch served as a child of the engine's span, and each
completion callback a span of its own, sent with that trace's context (``docs/tracing.md``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import context, propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from ..integration import Scope, meter, tracer

__all__ = [
    "callback_headers",
    "callback_span",
    "delivered",
    "joined",
    "remote_context",
    "trace_headers",
]

callbacks = meter.create_counter(
    "rill.callbacks", "{callback}", "Completion callbacks sent to the engine, by classification"
)


def remote_context(headers: Mapping[str, str]) -> context.Context | None:
    """The context of the caller's span in W3C ``headers`` (``traceparent``, ``tracestate``),
    to serve its request under; None when there is nothing to join: no valid caller, or a
    span already current (the application's HTTP server span, itself the caller's child)."""
    if trace.get_current_span().get_span_context().is_valid:
        return None
    found = propagate.extract(trace_headers(headers), context=context.Context())
    return found if trace.get_current_span(found).get_span_context().is_valid else None


@contextmanager
def joined(headers: Mapping[str, str]) -> Iterator[None]:
    """Serve a request as a child of the caller's span (see ``remote_context``)."""
    found = remote_context(headers)
    token = None if found is None else context.attach(found)
    try:
        yield
    finally:
        if token is not None:
            context.detach(token)


def trace_headers(carrier: Mapping[str, Any]) -> dict[str, str]:
    """The ``traceparent`` / ``tracestate`` in ``carrier`` (headers, a notice's target)."""
    found = {k: carrier.get(k) for k in ("traceparent", "tracestate")}
    return {k: v for k, v in found.items() if isinstance(v, str) and v}


@contextmanager
def callback_span(
    namespace: str, job_id: str, url: str, trace_context: Mapping[str, str]
) -> Iterator[Span]:
    """One delivery of a completion callback (``rill.callback``), a child of the span the
    notice's dispatch came from; ``delivered`` puts the answer on it."""
    parent = propagate.extract(dict(trace_context), context=context.Context())
    span = tracer.start_span("rill.callback", context=parent, kind=SpanKind.CLIENT)
    if span.is_recording():
        span.set_attributes({"rill.namespace": namespace, "rill.job.id": job_id})
        if host := urlsplit(url).hostname:
            span.set_attribute("server.address", host)
    with Scope(span):
        yield span


def callback_headers() -> dict[str, str]:
    """The current span's trace context as headers: the engine sees the callback's caller."""
    headers: dict[str, str] = {}
    propagate.inject(headers)
    return headers


def delivered(
    span: Span,
    namespace: str,
    classification: str,
    status_code: int | None,
    error_code: str | None,
    error: str | None,
) -> None:
    """Count a callback's answer, by classification; and put it on its span. ``error`` is
    the ``error.type`` of a delivery that failed (to be tried again, or dropped)."""
    callbacks.add(1, {"rill.namespace": namespace, "rill.callback.classification": classification})
    if not span.is_recording():
        return
    span.set_attribute("rill.callback.classification", classification)
    if status_code is not None:
        span.set_attribute("http.response.status_code", status_code)
    if error_code is not None:
        span.set_attribute("rill.callback.error_code", error_code)
    if error is not None:
        span.set_attribute("error.type", error)
        span.set_status(Status(StatusCode.ERROR, error))
