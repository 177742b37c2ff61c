"""The simulator does what the engine's source does, one behaviour per test, each naming the
engine file and line it follows (see docs/simulator-fidelity.md). Paths are shortened from
the engine repository: ``FlowController`` is
``rill-flow-web/src/main/java/com/weibo/rill/flow/controller/FlowController.java`` and so on.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import parse_qs

import httpx
import pytest
from fastapi import FastAPI, Request, Response

from rill_executor import ConfigError
from rill_executor.testing.rillflow import (
    Dag,
    DagStatus,
    EngineSimulator,
    Pattern,
    Task,
    TaskStatus,
    serve_app,
    verify_callback_sign,
)


@dataclass
class Received:
    """One request the executor received: its raw headers (repeats kept) and body."""

    path: str
    execution_id: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name.lower()]


@dataclass
class Executor:
    url: str = ""
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def of(self, execution_id: str) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.execution_id == execution_id]


def _app(executor: Executor) -> FastAPI:
    app = FastAPI()

    async def record(request: Request) -> Received:
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw]
        execution_id = request.query_params["execution_id"]
        received = Received(request.url.path, execution_id, headers, await request.body())
        with executor.lock:
            executor.received.append(received)
        return received

    @app.post("/answer")
    async def answer(request: Request) -> Response:
        # Answers with the text under "answer" in the (JSON) body, as it is.
        received = await record(request)
        return Response(json.loads(received.body)["answer"], media_type="application/json")

    @app.post("/fail")
    async def fail(request: Request) -> Response:
        await record(request)
        return Response(status_code=503)

    @app.post("/refuse")
    async def refuse(request: Request) -> dict[str, str]:
        await record(request)
        return {"result_type": "FAILED", "uri": "s3://partial"}

    @app.post("/ack")
    async def ack(request: Request) -> dict[str, str]:
        await record(request)
        return {"result_type": "SUCCESS"}

    return app


@pytest.fixture(scope="module")
def executor() -> Iterator[Executor]:
    state = Executor()
    with serve_app(_app(state)) as url:
        state.url = url
        yield state


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineSimulator]:
    with EngineSimulator() as simulator:
        yield simulator


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=5) as client:
        yield client


def _running(engine: EngineSimulator, executor: Executor) -> tuple[str, str]:
    """An async task acknowledged and RUNNING; its execution and callback URL."""
    execution_id = engine.submit(Task("encode", f"{executor.url}/ack", Pattern.TASK_ASYNC))
    [dispatch] = engine.wait_for_dispatches(execution_id, "encode", 1)
    return execution_id, dispatch.headers["X-Callback-Url"]


# --- callbacks ---------------------------------------------------------------------------------


def _with_context(url: str, context: str) -> httpx.URL:
    return httpx.URL(url).copy_add_param("context", context)


def test_a_callbacks_context_parameter_is_merged_over_its_body(
    engine: EngineSimulator, executor: Executor, http: httpx.Client
) -> None:
    # FlowController.java:133-139 and parseTriggerContext (179-193).
    execution_id, url = _running(engine, executor)
    context = json.dumps({"uri": "s3://b", "frames": 20})

    answer = http.post(_with_context(url, context), json={"uri": "s3://a", "size": 1})

    assert answer.status_code == 200
    output = engine.task(execution_id, "encode").output
    assert output == {"uri": "s3://b", "size": 1, "frames": 20}


def test_a_callbacks_context_parameter_alone_is_its_output_and_bad_json_is_ignored(
    engine: EngineSimulator, executor: Executor, http: httpx.Client
) -> None:
    # FlowController.java:181-189: no body, the parameter's object; a parse error only logged.
    first, url = _running(engine, executor)
    assert http.get(_with_context(url, '{"uri": "s3://a"}')).status_code == 200
    assert engine.task(first, "encode").output == {"uri": "s3://a"}
    second, url = _running(engine, executor)
    assert http.post(_with_context(url, "{not json"), json={"n": 1}).status_code == 200
    assert engine.task(second, "encode").output == {"n": 1}


def test_only_a_bad_requests_answer_is_marked_pass_through(
    engine: EngineSimulator, executor: Executor, http: httpx.Client
) -> None:
    # WebExceptionHandler.java:48-49, 92-102: a TaskException (400) of 30107/30109/30110 is
    # answered with "pass_through": true; the framework's 422 and a DAGException's 500 not.
    unknown = http.get(engine.trigger_url, params={"execution_id": "w:d_c_x", "task_name": "t"})
    missing = http.get(engine.trigger_url, params={"execution_id": "w:d_c_x"})
    _, url = _running(engine, executor)
    assert http.post(url, json={}).status_code == 200
    again = http.post(url, json={})

    assert (unknown.status_code, unknown.json()["pass_through"]) == (400, True)
    assert missing.status_code == 422 and "pass_through" not in missing.json()
    assert again.status_code == 500 and "pass_through" not in again.json()


def test_the_callback_limit_counts_utf16_code_units(
    engine: EngineSimulator, executor: Executor, http: httpx.Client
) -> None:
    # DAGContextInitializer.java:128: jsonObject.toJSONString().length() > maxSize, a Java
    # String's length; the limit 6144 is BizDConfsImpl.java:106. '{"x":""}' is 8 units and
    # each emoji (outside the BMP) 2: 3069 of them are 3077 characters but 6146 units.
    execution_id, url = _running(engine, executor)

    over = http.post(url, content=json.dumps({"x": "😀" * 3069}, ensure_ascii=False))
    fits = http.post(url, content=json.dumps({"x": "😀" * 3068}, ensure_ascii=False))

    assert (over.status_code, over.json()["error"]) == (400, "context size nonsupport")
    assert fits.status_code == 200
    assert engine.task(execution_id, "encode").status is TaskStatus.SUCCEED


# --- sync answers ------------------------------------------------------------------------------


def test_a_sync_answer_of_null_succeeds_with_an_empty_output(
    engine: EngineSimulator, executor: Executor
) -> None:
    # FunctionTaskRunner.java:278-285 (Jackson reads "null" as a NullNode, not as nothing),
    # 180-194 (neither object nor array: an empty output) and 210-229 (no result_type).
    task = Task("t", f"{executor.url}/answer", input={"answer": "null"})
    execution_id = engine.submit(task)

    view = engine.wait_for(execution_id, "t")

    assert (view.status, view.output) == (TaskStatus.SUCCEED, {})
    assert engine.execution_status(execution_id) is DagStatus.SUCCEED


# --- dispatch ----------------------------------------------------------------------------------


def test_the_inputs_headers_replace_the_engines_own_whatever_their_case(
    engine: EngineSimulator, executor: Executor
) -> None:
    # FunctionTaskDispatcher.java:77-79 puts the engine's headers in Spring's HttpHeaders
    # (case-insensitive); FunctionProtocolDispatcher.java:66-68 sets the input's over them.
    header = {"x-callback-url": "http://elsewhere/cb", "content-type": "application/json"}
    task = Task("t", f"{executor.url}/answer", input={"answer": "{}", "header": header})
    execution_id = engine.submit(task)
    engine.wait_for(execution_id, "t")

    [received] = executor.of(execution_id)
    assert received.header("X-Callback-Url") == ["http://elsewhere/cb"]
    assert received.header("Content-Type") == ["application/json"]
    assert received.header("X-Flow-Server") == [engine.url]


def test_a_form_content_type_makes_the_engine_form_encode_the_body(
    engine: EngineSimulator, executor: Executor
) -> None:
    # FunctionProtocolDispatcher.java:84-107: a Content-Type exactly form-urlencoded turns the
    # body into form fields (a string as it is, a map or list as JSON, else toString()).
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    task_input = {"header": form, "video": "A", "count": 3, "profile": {"codec": "h264"}}
    execution_id = engine.submit(Task("t", f"{executor.url}/ack", input=task_input))
    engine.wait_for(execution_id, "t")

    [received] = executor.of(execution_id)
    assert received.header("Content-Type")[0].startswith("application/x-www-form-urlencoded")
    fields = parse_qs(received.body.decode(), strict_parsing=True)
    assert fields == {
        "execution_id": [execution_id],
        "video": ["A"],
        "count": ["3"],
        "profile": ['{"codec":"h264"}'],
    }


def test_a_content_type_the_engine_cannot_write_fails_the_dispatch_unsent(
    engine: EngineSimulator, executor: Executor
) -> None:
    # RestTemplateGenerator.java:60-67: no converter writes a map as text/plain, so
    # RestTemplate throws before sending; HttpInvokeHelperImpl.java:146-152 fails the dispatch.
    task_input = {"header": {"Content-Type": "text/plain"}, "video": "A"}
    execution_id = engine.submit(Task("t", f"{executor.url}/ack", input=task_input))

    view = engine.wait_for(execution_id, "t")

    assert view.status is TaskStatus.FAILED
    assert view.message is not None and "No HttpMessageConverter" in view.message
    assert engine.dispatches(execution_id) == []
    assert executor.of(execution_id) == []


def test_generate_auth_signs_one_dispatchs_callback_and_is_taken_out_of_its_body(
    executor: Executor,
) -> None:
    # FlowAuthHeaderGenerator.java:57-64: signed for a listed business id, or for an input
    # whose generate_auth is "1" or "true" (any case), which is then removed from the input.
    with EngineSimulator(sign_secret="s3cret", sign_workspaces=["listed"]) as engine:
        asked = engine.submit(
            Task("t", f"{executor.url}/ack", input={"generate_auth": True, "v": 1})
        )
        plain = engine.submit(
            Task("t", f"{executor.url}/ack", input={"generate_auth": "no", "v": 1})
        )
        listed = engine.submit(Task("t", f"{executor.url}/ack"), workspace="listed")
        for execution_id in (asked, plain, listed):
            engine.wait_for(execution_id, "t")
        sent = {e: engine.dispatches(e, "t")[0] for e in (asked, plain, listed)}

    assert verify_callback_sign(sent[asked].headers["X-Callback-Url"], "s3cret")
    assert sent[asked].body == {"execution_id": asked, "v": 1}
    assert "sign=" not in sent[plain].headers["X-Callback-Url"]
    assert sent[plain].body == {"execution_id": plain, "generate_auth": "no", "v": 1}
    assert verify_callback_sign(sent[listed].headers["X-Callback-Url"], "s3cret")


def test_the_engine_itself_sends_no_trace_header(
    engine: EngineSimulator, executor: Executor
) -> None:
    # FunctionTaskDispatcher.java:77-79 and FlowAuthHeaderGenerator.java:65-66: the engine's
    # own headers are X-Flow-Server, X-Callback-Url (and X-Mode); a traceparent comes only
    # from the OpenTelemetry Java agent (docker/setenv.sh:4), a client span per request.
    execution_id = engine.submit(Task("t", f"{executor.url}/ack", Pattern.TASK_ASYNC))
    engine.wait_for_dispatches(execution_id, "t", 1)
    [received] = executor.of(execution_id)
    assert received.header("traceparent") == []


def test_with_the_trace_agent_each_request_carries_its_own_parent_id(
    engine: EngineSimulator, executor: Executor
) -> None:
    # docker/setenv.sh:3-4: the engine's image runs the OpenTelemetry Java agent when a trace
    # endpoint is set; the agent (not the engine's source) opens a client span per request,
    # so a dispatch and its resend carry different parent ids of one trace.
    trace = "0af7651916cd43dd8448eb211c80319c"
    traceparent = f"00-{trace}-b7ad6b7169203331-01"
    execution_id = engine.submit(Task("t", f"{executor.url}/fail"), traceparent=traceparent)
    engine.wait_for(execution_id, "t")

    sent = [r.header("traceparent") for r in executor.of(execution_id)]
    assert len(sent) == 2 and all(len(one) == 1 for one in sent)
    (first,), (second,) = sent
    assert first != second and traceparent not in (first, second)
    assert first.split("-")[1] == second.split("-")[1] == trace


# --- descriptors -------------------------------------------------------------------------------

DESCRIPTOR = """
type: flow
workspace: media
dagName: video
tasks:
  - category: function
    name: a
    pattern: task_sync
    resourceName: http://executor/a
    next: {next}
  - category: function
    name: b
    pattern: task_sync
    resourceName: http://executor/b
  - category: function
    name: c
    pattern: task_sync
    resourceName: http://executor/c
"""


def test_next_is_split_on_commas_without_trimming(executor: Executor) -> None:
    # FlowDAGValidator.java:168-173: nextTaskNames.split(",") and each name looked up as it
    # is, so " c" is no task (DDLErrorCode TASK_NEXT_INVALID); Java's split drops trailing
    # empty names, so "b,c," is b and c.
    with pytest.raises(ConfigError, match=r"task 'a'\.next: no task ' c'"):
        Dag.load(DESCRIPTOR.format(next="b, c"))
    dag = Dag.load(DESCRIPTOR.format(next="b,c,"))
    assert dag.tasks[0].next == ("b", "c")


def test_a_field_the_engine_does_not_know_is_ignored() -> None:
    # ObjectMapperFactory.java:65: the YAML mapper does not fail on unknown properties.
    text = DESCRIPTOR.format(next="b,c").replace(
        "    name: a\n", "    name: a\n    owner: media-team\n    priority: 3\n"
    )
    dag = Dag.load(text.replace("type: flow\n", "type: flow\nlabels: [x]\n"))
    assert [node.name for node in dag.tasks] == ["a", "b", "c"]
    # A field the engine reads but the simulator does not simulate is still refused.
    with pytest.raises(ConfigError, match="successConditions"):
        Dag.load(text.replace("    owner: media-team\n", "    successConditions: []\n"))


# --- executions --------------------------------------------------------------------------------


def test_a_failed_task_leaves_the_execution_running_while_another_task_runs(
    engine: EngineSimulator, executor: Executor, http: httpx.Client
) -> None:
    # DAGWalkHelper.java:194-224 (calculateDAGStatus): RUNNING while any task is READY or
    # RUNNING, and only then FAILED if a task failed.
    failing = Task("fails", f"{executor.url}/answer", input={"answer": '{"result_type": "X"}'})
    running = Task("runs", f"{executor.url}/ack", Pattern.TASK_ASYNC)
    execution_id = engine.submit(failing, running)
    engine.wait_for(execution_id, "fails")
    [dispatch] = engine.wait_for_dispatches(execution_id, "runs", 1)

    assert engine.execution_status(execution_id) is DagStatus.RUNNING
    assert http.post(dispatch.headers["X-Callback-Url"], json={"n": 1}).status_code == 200
    assert engine.task(execution_id, "runs").status is TaskStatus.SUCCEED
    assert engine.execution_status(execution_id) is DagStatus.FAILED


def test_a_tolerated_failure_is_skipped(engine: EngineSimulator, executor: Executor) -> None:
    # FunctionTaskRunner.java:344: FAILED with tolerance is SKIPPED (AbstractTaskRunner.java:
    # 147-148 for a dispatch that threw); DAGWalkHelper.java:219: SKIPPED counts as success.
    answer = '{"result_type": "FAILED", "error_msg": "no codec"}'
    task = Task("t", f"{executor.url}/answer", input={"answer": answer}, tolerance=True)
    execution_id = engine.submit(task)

    view = engine.wait_for(execution_id, "t")

    assert (view.status, view.message) == (TaskStatus.SKIPPED, "no codec")
    assert engine.execution_status(execution_id) is DagStatus.SUCCEED


TOLERANT = """
type: flow
workspace: media
dagName: video
tasks:
  - category: function
    name: probe
    pattern: task_sync
    resourceName: http://executor/refuse
    tolerance: true
    outputMappings:
      - {source: $.output.uri, target: $.context.uri}
    next: publish
  - category: function
    name: publish
    pattern: task_sync
    resourceName: http://executor/ack
    inputMappings:
      - {source: $.context.uri, target: $.input.uri}
"""


def test_a_tolerated_failures_output_is_mapped_and_its_successor_runs(
    engine: EngineSimulator, executor: Executor
) -> None:
    # FunctionTaskRunner.java:114 (needUpdateContext: success or skip) and 344-357: the
    # SKIPPED task's output goes through its outputMappings; DAGWalkHelper.java:73,80-92 lets
    # a successor of a SKIPPED task run.
    execution_id = engine.submit_dag(Dag.load(TOLERANT, base_url=executor.url), {})
    engine.wait_until(lambda: engine.execution_status(execution_id) is DagStatus.SUCCEED)

    assert engine.task(execution_id, "probe").status is TaskStatus.SKIPPED
    assert engine.context(execution_id) == {"uri": "s3://partial"}
    [publish] = engine.dispatches(execution_id, "publish")
    assert publish.body == {"execution_id": execution_id, "uri": "s3://partial"}
