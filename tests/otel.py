"""The OpenTelemetry SDK with in-memory exporters, for the tracing tests.

A process has one global tracer and meter provider, so they are installed once, by the first
test that asks for ``otel``; spans are kept only while such a test runs, and metric points
are deltas since the test began.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    InMemoryMetricReader,
    NumberDataPoint,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


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
    """The SDK as the process's providers; once, since OpenTelemetry allows only that."""
    exporter = InMemorySpanExporter()
    gate = _Gated(exporter)
    provider = TracerProvider()
    provider.add_span_processor(gate)
    trace.set_tracer_provider(provider)
    reader = InMemoryMetricReader(
        preferred_temporality={
            Counter: AggregationTemporality.DELTA,
            Histogram: AggregationTemporality.DELTA,
        }
    )
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    return Otel(exporter, reader, gate)


@pytest.fixture
def otel() -> Iterator[Otel]:
    installed = _install()
    installed.spans_exporter.clear()
    installed.reader.get_metrics_data()  # the points so far: the test sees only its own
    installed.seen.clear()
    installed.gate.open = True
    try:
        yield installed
    finally:
        installed.gate.open = False
