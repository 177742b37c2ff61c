"""The engine's trace through the executor: a dispatch's ``traceparent`` is the parent of the
executor's spans, and the completion callback joins the same trace (its ``rill.callback``
span the caller the engine sees). Real HTTP both ways, with the engine simulator.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterator

import pytest
from fastapi import FastAPI
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import BaseModel

from rill_executor import AsyncClaim, AsyncLedger
from rill_executor.rillflow import Deliverer, RillFlowExecutor
from rill_executor.store import Watch
from rill_executor.testing.rillflow import (
    EngineSimulator,
    Pattern,
    Task,
    TaskStatus,
    serve_app,
)
from tests.otel import Otel

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
ENGINE_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{ENGINE_SPAN}-01"
TRACESTATE = "rillflow=engine1"
NAMESPACE = "transcode"


class Segment(BaseModel):
    video: str
    segment: int


class Transcoded(BaseModel):
    uri: str


@pytest.fixture(params=["no_server_span", "server_span"])
def server_span(request: pytest.FixtureRequest) -> bool:
    """Whether the app makes HTTP server spans (FastAPI's own telemetry, on by default):
    without one the executor joins the engine's span itself; with one, under it."""
    return bool(request.param == "server_span")


@pytest.fixture
def running(server_span: bool) -> Iterator[str]:
    ledger = AsyncLedger("memory://", namespace=NAMESPACE, lease=5)
    executor = RillFlowExecutor(ledger, engines=["127.0.0.1"])
    app = FastAPI(lifespan=executor.lifespan, telemetry={"tracing": server_span})

    @executor.task("/transcode", key=lambda job: f"{job.video}:{job.segment}", name="transcode")
    def transcode(job: Segment) -> Transcoded:
        return Transcoded(uri=f"s3://out/{job.video}/{job.segment}")

    app.include_router(executor.router)
    with serve_app(app, lifespan="on") as url:
        yield url


@pytest.fixture
def engine() -> Iterator[EngineSimulator]:
    with EngineSimulator() as engine:
        yield engine


def _task(url: str, pattern: Pattern) -> Task:
    # The engine's tracestate goes along as a request header of the task's input.
    job = {"video": "A", "segment": 1, "header": {"tracestate": TRACESTATE}}
    return Task("transcode", f"{url}/transcode", pattern=pattern, input=job)


def _ended(engine: EngineSimulator, otel: Otel, server_span: bool, *names: str) -> None:
    """Wait for spans that end after the engine has its answer: the server span ends once
    the response is sent, the callback's once the engine's answer is read."""
    wanted = {*names, *(["POST /transcode"] if server_span else [])}
    engine.wait_until(lambda: wanted <= {s.name for s in otel.spans()})


def _parent(span: ReadableSpan) -> str | None:
    return None if span.parent is None else f"{span.parent.span_id:016x}"


def _sent(engine: EngineSimulator, execution: str) -> set[str]:
    """The parent ids the engine's requests carried: its trace agent opens a client span per
    request, so each dispatch has its own."""
    return {d.headers["traceparent"].split("-")[2] for d in engine.dispatches(execution)}


def _is_engine_child(span: ReadableSpan, parents: Collection[str] = (ENGINE_SPAN,)) -> None:
    assert span.parent is not None and span.parent.is_remote, span.name
    assert _parent(span) in parents, span.name
    assert f"{span.context.trace_id:032x}" == TRACE_ID, span.name


def _under_engine(
    otel: Otel, span: ReadableSpan, server_span: bool, parents: Collection[str]
) -> None:
    """``span`` is a child of the engine's request, or (with a server span) of the app's
    server span for that request, itself the engine's request's child."""
    if not server_span:
        _is_engine_child(span, parents)
        return
    by_id = {f"{s.context.span_id:016x}": s for s in otel.spans()}
    server = by_id[str(_parent(span))]
    while server.kind is not SpanKind.SERVER:
        server = by_id[str(_parent(server))]
    assert server.name == "POST /transcode", span.name
    _is_engine_child(server, parents)


def test_a_sync_dispatch_runs_as_a_child_of_the_engine_span(
    running: str, engine: EngineSimulator, otel: Otel, server_span: bool
) -> None:
    execution = engine.submit(_task(running, Pattern.TASK_SYNC), traceparent=TRACEPARENT)
    assert engine.wait_for(execution, "transcode").status is TaskStatus.SUCCEED
    _ended(engine, otel, server_span)
    run = otel.span("rill.run transcode")
    [sent] = _sent(engine, execution)  # one request: answered in time, never resent
    _under_engine(otel, run, server_span, {sent})
    assert run.context.trace_state.get("rillflow") == "engine1"
    for name in ("rill.claim", "rill.commit"):
        assert _parent(otel.span(name)) == f"{run.context.span_id:016x}", name
    assert {f"{s.context.trace_id:032x}" for s in otel.spans()} == {TRACE_ID}
    assert not [s for s in otel.spans() if s.name == "rill.callback"]  # answered inline


def test_an_async_dispatch_and_its_callback_join_the_engine_trace(
    running: str, engine: EngineSimulator, otel: Otel, server_span: bool
) -> None:
    execution = engine.submit(_task(running, Pattern.TASK_ASYNC), traceparent=TRACEPARENT)
    assert engine.wait_for(execution, "transcode").status is TaskStatus.SUCCEED
    _ended(engine, otel, server_span, "rill.callback")
    claim, run = otel.span("rill.claim"), otel.span("rill.run transcode")
    callback = otel.span("rill.callback")
    # One run span: opened for the claim answered with the acknowledgement, ended by the
    # handler's task after it; the attempt's record keeps it.
    [sent] = _sent(engine, execution)
    _under_engine(otel, run, server_span, {sent})
    for name in ("rill.claim", "rill.commit"):
        assert _parent(otel.span(name)) == f"{run.context.span_id:016x}", name
    assert run.attributes["rill.claim.outcome"] == "claimed"  # type: ignore[index]
    assert run.attributes["rill.outcome"] == "succeeded"  # type: ignore[index]
    assert claim.end_time is not None and run.end_time is not None
    assert claim.end_time < run.end_time
    # The notice's traceparent (the dispatch's), sent by the deliverer's own task.
    _is_engine_child(callback, {sent})
    assert {f"{s.context.trace_id:032x}" for s in otel.spans()} == {TRACE_ID}
    assert callback.kind is SpanKind.CLIENT
    assert dict(callback.attributes or {}) == {
        "rill.namespace": NAMESPACE,
        "rill.job.id": run.attributes["rill.job.id"],  # type: ignore[index]
        "rill.callback.classification": "ok",
        "server.address": "127.0.0.1",
        "http.response.status_code": 200,
    }
    assert callback.status.status_code is StatusCode.UNSET
    (received,) = engine.callbacks(execution, "transcode")
    assert received.status_code == 200
    span_id = f"{callback.context.span_id:016x}"
    assert received.headers["traceparent"] == f"00-{TRACE_ID}-{span_id}-01"
    assert received.headers["tracestate"] == TRACESTATE
    assert otel.points("rill.callbacks") == [
        ({"rill.namespace": NAMESPACE, "rill.callback.classification": "ok"}, 1)
    ]


def test_a_refused_callback_records_the_engine_error_code(
    engine: EngineSimulator, otel: Otel
) -> None:
    """A notice whose task the engine does not know: 400 / 30109, dropped."""

    async def scenario() -> None:
        async with AsyncLedger("memory://", namespace=NAMESPACE) as ledger:
            url = f"{engine.trigger_url}?execution_id=gone&task_name=t"
            target = {"url": url, "traceparent": TRACEPARENT}
            claim = await ledger.claim("K", watch=Watch("gone/t", target))
            assert isinstance(claim, AsyncClaim)
            await claim.commit({"done": True})
            deliverer = Deliverer(ledger)
            try:
                (delivery,) = await deliverer.deliver()
            finally:
                await deliverer.stop()
            assert delivery.classification == "refused"

    asyncio.run(scenario())
    callback = otel.span("rill.callback")
    _is_engine_child(callback)
    assert dict(callback.attributes or {}) == {
        "rill.namespace": NAMESPACE,
        "rill.job.id": otel.span("rill.commit").attributes["rill.job.id"],  # type: ignore[index]
        "rill.callback.classification": "refused",
        "rill.callback.error_code": "30109",
        "server.address": "127.0.0.1",
        "http.response.status_code": 400,
        "error.type": "400",
    }
    assert callback.status.status_code is StatusCode.ERROR
    (received,) = engine.callbacks()
    span_id = f"{callback.context.span_id:016x}"
    assert received.headers["traceparent"] == f"00-{TRACE_ID}-{span_id}-01"
    assert "tracestate" not in received.headers
    assert otel.points("rill.callbacks") == [
        ({"rill.namespace": NAMESPACE, "rill.callback.classification": "refused"}, 1)
    ]


def test_a_dispatch_without_traceparent_is_no_ones_child(
    running: str, engine: EngineSimulator, otel: Otel, server_span: bool
) -> None:
    execution = engine.submit(_task(running, Pattern.TASK_ASYNC))
    assert engine.wait_for(execution, "transcode").status is TaskStatus.SUCCEED
    _ended(engine, otel, server_span, "rill.callback")
    roots = {s.name for s in otel.spans() if s.parent is None}
    executor_roots = {"POST /transcode"} if server_span else {"rill.run transcode"}
    assert roots == {*executor_roots, "rill.callback"}
    callback = otel.span("rill.callback")
    (received,) = engine.callbacks(execution, "transcode")
    context = callback.context
    trace_id, span_id = f"{context.trace_id:032x}", f"{context.span_id:016x}"
    flags = f"{int(context.trace_flags):02x}"  # sampled, and a random trace id (W3C level 2)
    assert received.headers["traceparent"] == f"00-{trace_id}-{span_id}-{flags}"
    assert "tracestate" not in received.headers  # the input's went only to the dispatch


def test_a_second_execution_of_the_same_work_is_linked_to_the_run_that_did_it(
    running: str, engine: EngineSimulator, otel: Otel, server_span: bool
) -> None:
    first = engine.submit(_task(running, Pattern.TASK_ASYNC), traceparent=TRACEPARENT)
    assert engine.wait_for(first, "transcode").status is TaskStatus.SUCCEED
    _ended(engine, otel, server_span, "rill.callback")
    (worked,) = [s for s in otel.spans() if s.name == "rill.run transcode"]
    again = engine.submit(_task(running, Pattern.TASK_ASYNC))  # another trace
    assert engine.wait_for(again, "transcode").status is TaskStatus.SUCCEED
    engine.wait_until(lambda: len([s for s in otel.spans() if s.name == "rill.callback"]) == 2)
    replayed = next(s for s in otel.spans() if s.name == "rill.run transcode" and s is not worked)
    assert replayed.attributes["rill.claim.outcome"] == "replay"  # type: ignore[index]
    assert replayed.context.trace_id != worked.context.trace_id
    (link,) = replayed.links
    assert link.context.span_id == worked.context.span_id
    assert link.context.trace_id == worked.context.trace_id
