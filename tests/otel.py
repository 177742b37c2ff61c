"""The OpenTelemetry SDK with in-memory exporters, for the tracing tests.

A tracing test (one that asks for ``otel``) runs with the SDK's providers set, and unset
again after it; its spans are kept only while it runs, and metric points are deltas since
it began.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.metrics import _internal as metrics_api
from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    InMemoryMetricReader,
    NumberDataPoint,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from rill_executor import _telemetry as telemetry


class _Gated(SimpleSpanProcessor):
    """Exports only while a tracing test runs, so the rest of the suite keeps nothing."""

    open = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.open:
            super().on_end(span)


@dataclass
class Otel:
    spans_exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    gate: _Gated
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    seen: dict[tuple[str, tuple[tuple[str, Any], ...]], float] = field(default_factory=dict)

    def spans(self) -> list[ReadableSpan]:
        return list(self.spans_exporter.get_finished_spans())

    def span(self, name: str) -> ReadableSpan:
        (found,) = [s for s in self.spans() if s.name == name]
        return found

    def points(self, name: str) -> list[tuple[dict[str, Any], float]]:
        """Each point of metric ``name`` since the test began: its attributes, and its sum
        (a counter) or its count (a histogram); summed over collections, which are deltas."""
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        value = point.value if isinstance(point, NumberDataPoint) else point.count
                        where = (metric.name, tuple(sorted((point.attributes or {}).items())))
                        self.seen[where] = self.seen.get(where, 0) + value
        return [
            (dict(attrs), total) for (metric, attrs), total in self.seen.items() if metric == name
        ]


@functools.cache
def _install() -> Otel:
    """The SDK's providers, made once per process and set for each tracing test."""
    exporter = InMemorySpanExporter()
    gate = _Gated(exporter)
    provider = TracerProvider()
    provider.add_span_processor(gate)
    reader = InMemoryMetricReader(
        preferred_temporality={
            Counter: AggregationTemporality.DELTA,
            Histogram: AggregationTemporality.DELTA,
        }
    )
    return Otel(exporter, reader, gate, provider, MeterProvider(metric_readers=[reader]))


def _unset() -> None:
    """No SDK, as before the test: OpenTelemetry sets its providers only once a process, so
    this resets its globals as its own test utilities do (``reset_trace_globals``); the
    rest of the suite then runs without an SDK, at the cost it has in a real service."""
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    metrics_api._METER_PROVIDER_SET_ONCE = Once()
    metrics_api._METER_PROVIDER = None
    telemetry.enabled.on = False


@pytest.fixture
def otel() -> Iterator[Otel]:
    installed = _install()
    trace.set_tracer_provider(installed.tracer_provider)
    metrics.set_meter_provider(installed.meter_provider)
    installed.spans_exporter.clear()
    installed.reader.get_metrics_data()  # the points so far: the test sees only its own
    installed.seen.clear()
    installed.gate.open = True
    try:
        yield installed
    finally:
        installed.gate.open = False
        _unset()
