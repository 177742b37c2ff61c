"""Spans of outputs and orphan collection, on the memory job store and output store.

Each test runs on ``Ledger`` and ``AsyncLedger`` (the same scenario through each twin) and
asserts exact span names, parents, attributes and metric points.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from rill_executor import (
    AsyncClaim,
    AsyncLedger,
    ChecksumMismatch,
    Claim,
    Ledger,
    StaleAttempt,
    current_async_claim,
    current_claim,
)
from rill_executor.outputs import MemoryOutputStore, OutputRef
from tests.otel import Otel

NAMESPACE = "media"
DATA = b"segment bytes" * 100  # 1,300 bytes


class Twin:
    """One face over ``Ledger`` or ``AsyncLedger``: each call runs to its answer."""

    def __init__(self, kind: str) -> None:
        self.outputs = MemoryOutputStore()
        self.is_async = kind == "async"
        self.sync = Ledger("memory://", namespace=NAMESPACE, outputs=self.outputs)
        self.aio = AsyncLedger("memory://", namespace=NAMESPACE, outputs=self.outputs)
        self.loop = asyncio.new_event_loop()

    def run(self, sync: Callable[[Ledger], Any], aio: Callable[[AsyncLedger], Any]) -> Any:
        if self.is_async:
            return self.loop.run_until_complete(aio(self.aio))
        return sync(self.sync)

    def claim(self, key: str) -> Any:
        claim = self.run(lambda ledger: ledger.claim(key), lambda ledger: ledger.claim(key))
        assert isinstance(claim, AsyncClaim if self.is_async else Claim), claim
        return claim

    def call(self, claim: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        answer = getattr(claim, method)(*args, **kwargs)
        return self.loop.run_until_complete(answer) if self.is_async else answer

    def put(self, claim: Any, name: str, data: bytes) -> OutputRef:
        return self.call(claim.outputs, "put", name, data)  # type: ignore[no-any-return]

    def close(self) -> None:
        self.sync.close()
        self.loop.run_until_complete(self.aio.close())
        self.loop.close()


@pytest.fixture(params=["sync", "async"])
def twin(request: pytest.FixtureRequest) -> Any:
    made = Twin(request.param)
    yield made
    made.close()


def _parent(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def test_an_output_put_is_a_span_under_the_run_with_its_size(twin: Twin, otel: Otel) -> None:
    if twin.is_async:

        @twin.aio.idempotent(key=lambda video: video, name="render")
        async def render_async(video: str) -> OutputRef:
            return await current_async_claim().outputs.put("frames.bin", DATA)

        ref = twin.loop.run_until_complete(render_async("A"))
    else:

        @twin.sync.idempotent(key=lambda video: video, name="render")
        def render(video: str) -> OutputRef:
            return current_claim().outputs.put("frames.bin", DATA)

        ref = render("A")
    run, put = otel.span("rill.run render"), otel.span("rill.output.put")
    assert put.kind is SpanKind.INTERNAL
    assert _parent(put) == run.context.span_id
    assert put.context.trace_id == run.context.trace_id
    assert dict(put.attributes or {}) == {
        "rill.namespace": NAMESPACE,
        "rill.job.id": run.attributes["rill.job.id"],  # type: ignore[index]
        "rill.attempt.id": run.attributes["rill.attempt.id"],  # type: ignore[index]
        "rill.attempt.fence": run.attributes["rill.attempt.fence"],  # type: ignore[index]
        "rill.output.name": "frames.bin",
        "rill.output.size": len(DATA),
        "rill.write.outcome": "written",
    }
    assert ref.size == len(DATA)
    assert put.status.status_code is StatusCode.UNSET
    # The commit follows the put, both under the run.
    commit = otel.span("rill.commit")
    assert _parent(commit) == run.context.span_id and put.end_time <= commit.start_time  # type: ignore[operator]


def test_a_put_refused_by_the_fence_is_a_fenced_span_and_writes_nothing(
    twin: Twin, otel: Otel
) -> None:
    first = twin.claim("B")
    twin.call(first, "fail", "encoder crashed", retryable=True)
    second = twin.claim("B")  # takes the job over: the first attempt is superseded
    with pytest.raises(StaleAttempt) as refused:
        twin.put(first, "late.bin", DATA)
    assert refused.value.reason == "superseded"
    put = otel.span("rill.output.put")
    assert dict(put.attributes or {}) == {
        "rill.namespace": NAMESPACE,
        "rill.job.id": first.job_id,
        "rill.attempt.id": first.attempt_id,
        "rill.attempt.fence": first.fence,
        "rill.output.name": "late.bin",
        "rill.write.outcome": "fenced",
        "rill.fence.reason": "superseded",
        "error.type": "StaleAttempt",
    }
    assert put.status.status_code is StatusCode.ERROR
    assert [e.name for e in put.events] == ["exception"]
    assert otel.points("rill.fenced_writes") == [
        (
            {
                "rill.namespace": NAMESPACE,
                "rill.store.operation": "output.register",
                "rill.fence.reason": "superseded",
            },
            1,
        )
    ]
    assert list(twin.outputs.list(f"{NAMESPACE}/")) == []
    assert second.fence > first.fence


def test_verify_and_publish_are_spans_per_output(twin: Twin, otel: Otel) -> None:
    claim = twin.claim("C")
    ref = twin.put(claim, "frames.bin", DATA)
    twin.call(claim, "commit", {"frames": ref.uri})
    twin.run(lambda ledger: ledger.verify(ref), lambda ledger: ledger.verify(ref))
    (published,) = twin.run(lambda ledger: ledger.publish("C"), lambda ledger: ledger.publish("C"))
    expected = {"rill.namespace": NAMESPACE, "rill.output.name": "frames.bin"}
    for name in ("rill.output.verify", "rill.output.publish"):
        span = otel.span(name)
        assert span.kind is SpanKind.INTERNAL and span.parent is None
        assert dict(span.attributes or {}) == expected
        assert span.status.status_code is StatusCode.UNSET
    assert published.sha256 == ref.sha256


def test_a_verify_that_finds_another_object_is_an_error_span(twin: Twin, otel: Otel) -> None:
    claim = twin.claim("D")
    ref = twin.put(claim, "frames.bin", DATA)
    twin.call(claim, "commit", {"frames": ref.uri})
    twin.outputs.put(ref.key, b"truncated")
    with pytest.raises(ChecksumMismatch):
        twin.run(lambda ledger: ledger.verify(ref), lambda ledger: ledger.verify(ref))
    span = otel.span("rill.output.verify")
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {}) == {
        "rill.namespace": NAMESPACE,
        "rill.output.name": "frames.bin",
        "error.type": "ChecksumMismatch",
    }


def test_orphan_collection_is_a_span_with_what_it_found(twin: Twin, otel: Otel) -> None:
    failed = twin.claim("E")
    twin.put(failed, "part.bin", DATA)  # then the attempt fails: an orphan
    twin.call(failed, "fail", "encoder crashed", retryable=True)
    done = twin.claim("F")
    twin.call(done, "commit", {"frames": twin.put(done, "frames.bin", DATA).uri})
    twin.outputs.put(f"{NAMESPACE}/stray.bin", b"not ours")  # an object nobody accounts for

    def collect(grace: float) -> Any:
        return twin.run(
            lambda ledger: ledger.collect_orphans(grace=grace),
            lambda ledger: ledger.collect_orphans(grace=grace),
        )

    young = collect(3600)
    old = collect(0)
    assert (len(young.deleted), len(young.kept_young), len(old.deleted)) == (0, 1, 1)
    first, second = [s for s in otel.spans() if s.name == "rill.orphans.collect"]
    for span in (first, second):
        assert span.kind is SpanKind.INTERNAL and span.parent is None
    assert dict(first.attributes or {}) == {
        "rill.namespace": NAMESPACE,
        "rill.orphans.deleted": 0,
        "rill.orphans.kept_young": 1,
        "rill.orphans.unknown": 1,
        "rill.orphans.jobs": 2,
    }
    assert dict(second.attributes or {}) == {
        "rill.namespace": NAMESPACE,
        "rill.orphans.deleted": 1,
        "rill.orphans.kept_young": 0,
        "rill.orphans.unknown": 1,
        "rill.orphans.jobs": 2,
    }
