"""What a decorated call shows an operator's tracing backend: spans, events, links, metrics.

Runs on the in-memory store with the OpenTelemetry SDK's in-memory exporters (``otel``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from importlib.metadata import version
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from rill_executor import (
    AsyncLedger,
    JobFailed,
    JobInProgress,
    Ledger,
    ResultTooLarge,
    StaleAttempt,
    TerminalError,
    current_claim,
)
from rill_executor._keys import handler_key, job_id
from rill_executor.store import MemoryStore
from rill_executor.testing import VirtualClock
from tests.clocks import SYSTEM_CLOCK
from tests.otel import Otel

NAME = "tests.transcode"


def _job(ledger: Ledger | AsyncLedger, key: str) -> str:
    return job_id(ledger.namespace, handler_key(NAME, key))


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent else None


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _tp(span: ReadableSpan) -> str:
    c = span.get_span_context()
    assert c is not None
    return f"00-{c.trace_id:032x}-{c.span_id:016x}-{int(c.trace_flags):02x}"


@pytest.fixture
def ledger() -> Ledger:
    return Ledger("memory://", namespace="media", lease=5, retention=60)


def test_a_fresh_run_is_a_run_span_with_its_claim_and_commit(otel: Otel, ledger: Ledger) -> None:
    @ledger.idempotent(key=lambda video: video, name=NAME)
    def transcode(video: str) -> str:
        with trace.get_tracer("app").start_as_current_span("ffmpeg"):
            return f"s3://out/{video}"

    assert transcode("v1") == "s3://out/v1"
    status = ledger.status("v1", handler=transcode)
    assert status is not None
    (attempt,) = status.attempts
    names = [s.name for s in otel.spans()]
    assert names == ["rill.claim", "ffmpeg", "rill.commit", f"rill.run {NAME}"]
    run, claim, work, commit = (
        otel.span(n) for n in (f"rill.run {NAME}", "rill.claim", "ffmpeg", "rill.commit")
    )
    assert run.parent is None and run.kind is SpanKind.INTERNAL
    assert {_parent(s) for s in (claim, work, commit)} == {run.context.span_id}
    assert {s.context.trace_id for s in (claim, work, commit)} == {run.context.trace_id}
    job = _job(ledger, "v1")
    assert _attrs(run) == {
        "rill.namespace": "media",
        "rill.handler": NAME,
        "rill.job.id": job,
        "code.function.name": NAME,
        "rill.claim.outcome": "claimed",
        "rill.attempt.id": attempt.attempt_id,
        "rill.attempt.fence": 1,
        "rill.outcome": "succeeded",
    }
    assert claim.kind is SpanKind.CLIENT and _attrs(claim) == {
        "rill.namespace": "media",
        "rill.job.id": job,
        "rill.store.kind": "memory",
        "rill.claim.outcome": "claimed",
        "rill.attempt.id": attempt.attempt_id,
        "rill.attempt.fence": 1,
    }
    assert _attrs(commit) == {
        "rill.namespace": "media",
        "rill.job.id": job,
        "rill.attempt.id": attempt.attempt_id,
        "rill.attempt.fence": 1,
        "rill.store.kind": "memory",
        "rill.write.outcome": "written",
    }
    assert run.status.status_code is StatusCode.UNSET and run.links == ()
    scopes = {s.instrumentation_scope for s in otel.spans() if s.name.startswith("rill.")}
    assert {(s.name, s.version) for s in scopes if s} == {
        ("rill_executor", version("rill-executor"))
    }
    assert attempt.trace == _tp(run)  # the attempt's record keeps its span
    assert otel.points("rill.claims") == [
        ({"rill.namespace": "media", "rill.claim.outcome": "claimed", "rill.handler": NAME}, 1)
    ]
    assert sorted(otel.points("rill.store.operation.duration"), key=str) == [
        ({"rill.store.operation": "claim", "rill.store.kind": "memory"}, 1),
        ({"rill.store.operation": "commit", "rill.store.kind": "memory"}, 1),
    ]
    assert otel.points("rill.handler.duration") == [
        ({"rill.namespace": "media", "rill.handler": NAME, "rill.outcome": "succeeded"}, 1)
    ]


def test_a_replay_is_marked_and_linked_to_the_attempt_that_did_the_work(
    otel: Otel, ledger: Ledger
) -> None:
    runs = []

    @ledger.idempotent(key=lambda video: video, name=NAME)
    def transcode(video: str) -> str:
        runs.append(video)
        return f"s3://out/{video}"

    transcode("v1")
    original = otel.span(f"rill.run {NAME}")
    otel.spans_exporter.clear()
    assert transcode("v1") == "s3://out/v1" and runs == ["v1"]
    assert [s.name for s in otel.spans()] == ["rill.claim", f"rill.run {NAME}"]
    replay = otel.span(f"rill.run {NAME}")
    status = ledger.status("v1", handler=transcode)
    assert status is not None
    assert _attrs(replay) == {
        "rill.namespace": "media",
        "rill.handler": NAME,
        "rill.job.id": _job(ledger, "v1"),
        "code.function.name": NAME,
        "rill.claim.outcome": "replay",
        "rill.attempt.fence": 1,
        "rill.replay.attempt.id": status.attempts[0].attempt_id,
    }
    (link,) = replay.links
    assert (link.context.trace_id, link.context.span_id) == (
        original.context.trace_id,
        original.context.span_id,
    )
    assert dict(link.attributes or {}) == {"rill.link": "attempt"}
    assert otel.span("rill.claim").attributes["rill.claim.outcome"] == "replay"  # type: ignore[index]
    assert (
        {"rill.namespace": "media", "rill.claim.outcome": "replay", "rill.handler": NAME},
        1,
    ) in otel.points("rill.claims")
    assert otel.points("rill.handler.duration") == [
        ({"rill.namespace": "media", "rill.handler": NAME, "rill.outcome": "succeeded"}, 1)
    ]  # only the first call ran the handler


def test_an_in_progress_duplicate_links_to_the_running_attempt(otel: Otel, ledger: Ledger) -> None:
    started, release = threading.Event(), threading.Event()

    @ledger.idempotent(key=lambda video: video, name=NAME, heartbeat=False)
    def transcode(video: str) -> str:
        started.set()
        release.wait(10)
        return "done"

    worker = threading.Thread(target=transcode, args=("v1",))
    worker.start()
    try:
        assert started.wait(10)
        with pytest.raises(JobInProgress):
            transcode("v1")
        duplicate = otel.span(f"rill.run {NAME}")  # the only run span ended so far
    finally:
        release.set()
        worker.join(10)
    owner = next(s for s in otel.spans() if s.name == f"rill.run {NAME}" and s is not duplicate)
    assert _attrs(duplicate)["rill.claim.outcome"] == "in_progress"
    assert _attrs(duplicate)["rill.replay.attempt.id"] == _attrs(owner)["rill.attempt.id"]
    assert _attrs(duplicate)["error.type"] == "JobInProgress"
    assert duplicate.status.status_code is StatusCode.ERROR
    (link,) = duplicate.links
    assert link.context.span_id == owner.context.span_id
    assert [e.name for e in duplicate.events] == ["exception"]


def test_a_takeover_is_counted_and_the_stale_attempts_commit_is_fenced(otel: Otel) -> None:
    clock = VirtualClock()
    ledger = Ledger(
        MemoryStore(clock=clock), namespace="media", lease=0.2, retention=60, clock=clock
    )
    stale = ledger.claim("v1")
    clock.advance(0.3)  # the lease runs out on the store's clock
    heir = ledger.claim("v1")
    assert heir.takeover and heir.fence == 2  # type: ignore[union-attr]
    with pytest.raises(StaleAttempt):
        stale.commit("old")  # type: ignore[union-attr]
    assert [s.name for s in otel.spans()] == ["rill.claim", "rill.claim", "rill.commit"]
    first, takeover, commit = otel.spans()
    assert (_attrs(first)["rill.claim.outcome"], _attrs(first)["rill.attempt.fence"]) == (
        "claimed",
        1,
    )
    assert (_attrs(takeover)["rill.claim.outcome"], _attrs(takeover)["rill.attempt.fence"]) == (
        "takeover",
        2,
    )
    assert _attrs(commit) == {
        "rill.namespace": "media",
        "rill.job.id": job_id("media", "v1"),
        "rill.attempt.id": stale.attempt_id,  # type: ignore[union-attr]
        "rill.attempt.fence": 1,
        "rill.store.kind": "memory",
        "rill.write.outcome": "fenced",
        "rill.fence.reason": "superseded",
        "error.type": "StaleAttempt",
    }
    assert commit.status.status_code is StatusCode.ERROR
    assert otel.points("rill.takeovers") == [
        ({"rill.namespace": "media", "rill.claim.outcome": "takeover"}, 1)
    ]
    assert otel.points("rill.fenced_writes") == [
        (
            {
                "rill.namespace": "media",
                "rill.store.operation": "commit",
                "rill.fence.reason": "superseded",
            },
            1,
        )
    ]


@pytest.mark.parametrize(
    ("error", "retryable", "outcome"),
    [
        (RuntimeError("disk full"), True, "failed_retryable"),
        (TerminalError("bad input"), False, "failed_terminal"),
    ],
)
def test_a_handler_failure_is_recorded_on_the_run_and_its_fail_span(
    otel: Otel, ledger: Ledger, error: Exception, retryable: bool, outcome: str
) -> None:
    @ledger.idempotent(key=lambda video: video, name=NAME)
    def transcode(video: str) -> str:
        raise error

    with pytest.raises(type(error)):
        transcode("v1")
    assert [s.name for s in otel.spans()] == ["rill.claim", "rill.fail", f"rill.run {NAME}"]
    run, fail = otel.span(f"rill.run {NAME}"), otel.span("rill.fail")
    assert _parent(fail) == run.context.span_id
    assert _attrs(run)["rill.outcome"] == outcome
    assert _attrs(run)["error.type"] == type(error).__qualname__
    assert run.status.status_code is StatusCode.ERROR
    (event,) = run.events
    assert event.name == "exception"
    assert dict(event.attributes or {})["exception.message"] == str(error)
    assert _attrs(fail)["rill.write.outcome"] == "written"
    assert otel.points("rill.handler.duration") == [
        ({"rill.namespace": "media", "rill.handler": NAME, "rill.outcome": outcome}, 1)
    ]
    status = ledger.status("v1", handler=transcode)
    assert status is not None and status.error is not None
    assert status.error.retryable is retryable
    otel.spans_exporter.clear()
    if retryable:
        with pytest.raises(RuntimeError):
            transcode("v1")  # runs again
        assert _attrs(otel.span(f"rill.run {NAME}"))["rill.claim.outcome"] == "takeover"
    else:
        with pytest.raises(JobFailed):
            transcode("v1")  # replays the failure
        replay = otel.span(f"rill.run {NAME}")
        assert _attrs(replay)["rill.claim.outcome"] == "replay"
        assert _attrs(replay)["error.type"] == "JobFailed"


@pytest.mark.real_clock(SYSTEM_CLOCK)
def test_heartbeats_are_events_on_the_run_span_and_a_lost_claim_says_why(otel: Otel) -> None:
    ledger = Ledger("memory://", namespace="media", lease=0.6, retention=60)

    def wait_for(done: Any) -> None:
        deadline = time.monotonic() + 10
        while not done() and time.monotonic() < deadline:
            time.sleep(0.01)

    @ledger.idempotent(key=lambda video: video, name=NAME, heartbeat=0.05)
    def transcode(video: str) -> str:
        run: Any = trace.get_current_span()  # the run span, recording: its events so far
        wait_for(lambda: any(e.name == "rill.heartbeat" for e in run.events))
        ledger.resolve(video, "redo", reason="operator", force=True, handler=NAME)
        claim = current_claim()
        wait_for(lambda: claim.lost)
        return "late"

    with pytest.raises(StaleAttempt):
        transcode("v1")
    run = otel.span(f"rill.run {NAME}")
    names = [e.name for e in run.events]
    assert names[0] == "rill.heartbeat" and names.count("rill.heartbeat.lost") == 1
    beat = run.events[0]
    assert set(dict(beat.attributes or {})) == {"rill.lease.expires_at"}
    lost = next(e for e in run.events if e.name == "rill.heartbeat.lost")
    assert dict(lost.attributes or {}) == {"rill.fence.reason": "superseded"}
    fenced = otel.points("rill.fenced_writes")
    assert (
        {
            "rill.namespace": "media",
            "rill.store.operation": "heartbeat",
            "rill.fence.reason": "superseded",
        },
        1,
    ) in fenced
    assert _attrs(otel.span("rill.commit"))["rill.write.outcome"] == "fenced"


def test_a_result_too_large_is_counted(otel: Otel) -> None:
    ledger = Ledger("memory://", namespace="media", max_result_bytes=64)

    @ledger.idempotent(key=lambda video: video, name=NAME)
    def transcode(video: str) -> str:
        return "x" * 100

    with pytest.raises(ResultTooLarge):
        transcode("v1")
    assert otel.points("rill.results_too_large") == [({"rill.namespace": "media"}, 1)]
    assert _attrs(otel.span(f"rill.run {NAME}"))["error.type"] == "ResultTooLarge"


def test_an_explicit_claim_keeps_the_callers_span_with_the_attempt(
    otel: Otel, ledger: Ledger
) -> None:
    with trace.get_tracer("app").start_as_current_span("job") as job:
        claim = ledger.claim("v1")
        claim.commit("done")  # type: ignore[union-attr]
    status = ledger.status("v1")
    assert status is not None and status.attempts[0].trace == _tp(otel.span("job"))
    assert {_parent(s) for s in otel.spans() if s.name.startswith("rill.")} == {
        job.get_span_context().span_id
    }
    assert ({"rill.namespace": "media", "rill.claim.outcome": "claimed"}, 1) in otel.points(
        "rill.claims"
    )


def test_the_async_ledger_traces_the_same(otel: Otel) -> None:
    ledger = AsyncLedger("memory://", namespace="media")

    @ledger.idempotent(key=lambda video: video, name=NAME)
    async def transcode(video: str) -> str:
        await asyncio.sleep(0)
        return "done"

    async def main() -> None:
        await transcode("v1")
        await transcode("v1")

    asyncio.run(main())
    assert [s.name for s in otel.spans()] == [
        "rill.claim",
        "rill.commit",
        f"rill.run {NAME}",
        "rill.claim",
        f"rill.run {NAME}",
    ]
    first, second = (s for s in otel.spans() if s.name == f"rill.run {NAME}")
    assert _attrs(first)["rill.claim.outcome"] == "claimed"
    assert _attrs(second)["rill.claim.outcome"] == "replay"
    assert second.links[0].context.span_id == first.context.span_id
