"""DAGs in the engine simulator: a split → foreach → merge descriptor against a real executor.

The descriptor is the engine's own YAML format; ``base_url`` points its resources at the
executor served in-process. ``transcode`` runs through ``RillFlowExecutor`` (its ledger keys
a shard by video, segment and profile); ``split`` and ``merge`` are plain routes.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from pydantic import BaseModel

from rill_executor import AsyncLedger, TerminalError
from rill_executor._errors import ConfigError, UsageError
from rill_executor.rillflow import RillFlowExecutor, status_router
from rill_executor.testing.rillflow import (
    Dag,
    DagStatus,
    EngineSimulator,
    Task,
    TaskStatus,
    serve_app,
)
from rill_executor.testing.rillflow._dag import ForeachNode, FunctionNode
from rill_executor.testing.rillflow._mapping import apply, parse_rules

DESCRIPTOR = """\
version: 0.0.1
type: flow
workspace: media
dagName: transcodeVideo
tasks:
  - category: function
    name: split
    pattern: task_sync
    resourceName: http://executor:8000/split
    inputMappings:
      - source: $.context.video
        target: $.input.video
      - source: $.context.count
        target: $.input.count
    outputMappings:
      - source: $.output.segments
        target: $.context.segments
    next: shards
  - category: foreach
    name: shards
    iterationMapping:
      collection: $.input.segments
      item: segment
    inputMappings:
      - source: $.context.segments
        target: $.input.segments
      - source: $.context.profile
        target: $.input.profile
    outputMappings:
      - source: $.output.sub_context
        target: $.context.parts
    next: merge
    tasks:
      - category: function
        name: transcode
        pattern: task_async
        resourceName: http://executor:8000/transcode?codec=any
        inputMappings:
          - source: $.context.segment.video
            target: $.input.video
          - source: $.context.segment.index
            target: $.input.segment
          - source: $.context.profile
            target: $.input.profile
        outputMappings:
          - source: $.output.uri
            target: $.context.uri
        timeline:
          timeoutInSeconds: 30
  - category: function
    name: merge
    pattern: task_sync
    resourceName: http://executor:8000/merge
    inputMappings:
      - source: $.context.video
        target: $.input.video
      - source: $.context.parts
        target: $.input.parts
    outputMappings:
      - source: $.output.uri
        target: $.context.result
"""

TOKEN = "operator-token-0123456789"
SHARDS = ("shards_0-transcode", "shards_1-transcode", "shards_2-transcode")


class Shard(BaseModel):
    video: str
    segment: int
    profile: str


class Transcoded(BaseModel):
    uri: str


class Service:
    """The executor: transcode through the ledger, split and merge as plain routes."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        self.gates: dict[int, threading.Event] = {}
        self.started: dict[int, threading.Event] = {}
        self.merges: list[dict[str, Any]] = []
        self.flaky: set[int] = set()  # segments whose first run fails (retryable)
        self.broken: set[int] = set()  # segments that fail for good
        self.engine: EngineSimulator | None = None
        self.seen_at_merge: list[dict[str, TaskStatus]] = []
        ledger = AsyncLedger("memory://", namespace="video", lease=5)
        self.executor = RillFlowExecutor(ledger, engines=["127.0.0.1"])
        self.app = FastAPI(lifespan=self.executor.lifespan)
        self.app.include_router(status_router([ledger], tokens={TOKEN: ["video"]}))
        self.url = ""

        @self.executor.task(
            "/transcode", key=lambda s: f"{s.video}:{s.segment}:{s.profile}", name="transcode"
        )
        def transcode(shard: Shard) -> Transcoded:
            key = f"{shard.video}:{shard.segment}:{shard.profile}"
            self.runs[key] += 1
            if shard.segment in self.broken:
                raise TerminalError("unsupported codec")
            if shard.segment in self.flaky and self.runs[key] == 1:
                raise ConnectionError("the storage node went away")
            if shard.segment in self.gates:
                self.started[shard.segment].set()
                assert self.gates[shard.segment].wait(10)
            return Transcoded(uri=f"s3://out/{shard.video}/{shard.segment}.{shard.profile}")

        @self.app.post("/split")
        async def split(request: Request) -> dict[str, Any]:
            body = await request.json()
            video = body["video"]
            return {"segments": [{"video": video, "index": i} for i in range(body["count"])]}

        @self.app.post("/merge")
        async def merge(request: Request) -> dict[str, Any]:
            body = await request.json()
            # The engine lists the foreach's groups in hash order: each carries its segment.
            parts = body.pop("parts", None)
            if parts is not None:
                body["uris"] = _uris(parts)
            self.merges.append(body)
            if self.engine is not None:
                tasks = self.engine.tasks(request.query_params["execution_id"])
                self.seen_at_merge.append({name: view.status for name, view in tasks.items()})
            return {"uri": f"s3://out/{body['video']}.mp4", "parts": len(body.get("uris", []))}

        self.app.include_router(self.executor.router)

    def hold(self, segment: int) -> threading.Event:
        """Make the handler of ``segment`` wait until the returned event is set."""
        self.started[segment] = threading.Event()
        self.gates[segment] = threading.Event()
        return self.gates[segment]


@pytest.fixture
def service() -> Service:
    return Service()


@pytest.fixture
def dag(service: Service) -> Iterator[Dag]:
    with serve_app(service.app, lifespan="on") as url:
        service.url = url
        yield Dag.load(DESCRIPTOR, base_url=url)


@pytest.fixture
def engine(service: Service) -> Iterator[EngineSimulator]:
    with EngineSimulator() as engine:
        service.engine = engine
        yield engine


CONTEXT = {"video": "A", "count": 3, "profile": "h264"}


def _uris(parts: list[dict[str, Any]]) -> list[str]:
    """The shards' URIs in segment order, from the foreach's group contexts (any order)."""
    return [part["uri"] for part in sorted(parts, key=lambda part: part["segment"]["index"])]


def _finished(engine: EngineSimulator, execution_id: str, merges: int) -> None:
    """Wait until the execution succeeded with ``merges`` merge dispatches answered."""
    engine.wait_until(
        lambda: (
            engine.execution_status(execution_id) is DagStatus.SUCCEED
            and engine.task(execution_id, "merge").attempts == merges
        )
    )


def test_split_foreach_merge_runs_to_succeed_through_the_context(
    service: Service, dag: Dag, engine: EngineSimulator
) -> None:
    execution_id = engine.submit_dag(dag, CONTEXT)
    _finished(engine, execution_id, 1)

    assert execution_id.startswith("media:transcodeVideo_c_")
    tasks = engine.tasks(execution_id)
    assert sorted(tasks) == sorted(["split", "shards", "merge", *SHARDS])
    assert {view.status for view in tasks.values()} == {TaskStatus.SUCCEED}
    uris = [f"s3://out/A/{i}.h264" for i in range(3)]
    context = engine.context(execution_id)
    assert _uris(context["parts"]) == uris  # the foreach's outputMappings over sub_context
    assert context["result"] == "s3://out/A.mp4"
    assert len(context["segments"]) == 3
    assert service.merges == [{"execution_id": execution_id, "video": "A", "uris": uris}]
    # Each child's input came from its group's context; the resource's query was kept.
    first = engine.dispatches(execution_id, "shards_1-transcode")[0]
    assert first.body == {
        "execution_id": execution_id,
        "video": "A",
        "segment": 1,
        "profile": "h264",
    }
    assert first.url.endswith("/transcode?codec=any")
    assert tasks["shards_1-transcode"].output is not None
    assert tasks["shards_1-transcode"].output["uri"] == "s3://out/A/1.h264"
    assert service.runs == Counter({f"A:{i}:h264": 1 for i in range(3)})


def test_a_foreachs_sub_context_lists_its_groups_in_the_engines_hash_order(
    service: Service, dag: Dag, engine: EngineSimulator
) -> None:
    # AbstractTaskRunner.getSubTaskContextMap → ContextHelper.getSubContextList: the values
    # of ContextDAO.buildContext's HashMap, keyed "__shards_0".."__shards_2".
    execution_id = engine.submit_dag(dag, CONTEXT)
    _finished(engine, execution_id, 1)
    output = engine.task(execution_id, "shards").output
    assert output is not None
    assert [group["segment"]["index"] for group in output["sub_context"]] == [1, 0, 2]
    assert engine.context(execution_id)["parts"] == output["sub_context"]


def test_a_successor_waits_for_all_its_predecessors(
    service: Service, dag: Dag, engine: EngineSimulator
) -> None:
    release = service.hold(1)
    execution_id = engine.submit_dag(dag, CONTEXT)
    for name in ("shards_0-transcode", "shards_2-transcode"):
        engine.wait_for_status(execution_id, name, TaskStatus.SUCCEED)
    assert service.started[1].wait(10)

    assert engine.dispatches(execution_id, "merge") == []
    assert engine.task(execution_id, "merge").status is TaskStatus.NOT_STARTED
    assert engine.task(execution_id, "shards").status is TaskStatus.RUNNING
    release.set()
    _finished(engine, execution_id, 1)
    # When merge ran, every shard and the foreach had succeeded.
    assert len(service.seen_at_merge) == 1
    seen = service.seen_at_merge[0]
    assert all(seen[name] is TaskStatus.SUCCEED for name in (*SHARDS, "shards", "split"))


def test_redo_of_a_finished_child_runs_the_branch_again_from_the_ledger(
    service: Service, dag: Dag, engine: EngineSimulator
) -> None:
    execution_id = engine.submit_dag(dag, CONTEXT)
    _finished(engine, execution_id, 1)
    runs = Counter(service.runs)

    engine.redo(execution_id, "shards_1-transcode")
    _finished(engine, execution_id, 2)

    # The whole foreach ran again: every shard was dispatched a second time ...
    for name in SHARDS:
        assert len({d.ts for d in engine.dispatches(execution_id, name)}) == 2
    # ... and answered from the ledger: no handler ran again.
    assert service.runs == runs
    # Upstream stays as it was; downstream (merge) ran again with the same input.
    assert len(engine.dispatches(execution_id, "split")) == 1
    assert engine.task(execution_id, "split").attempts == 1
    assert len(service.merges) == 2
    assert service.merges[0] == service.merges[1]
    assert engine.context(execution_id)["result"] == "s3://out/A.mp4"


def test_redo_of_a_running_child_dispatches_it_again_concurrently(
    service: Service, dag: Dag, engine: EngineSimulator
) -> None:
    release = service.hold(1)
    execution_id = engine.submit_dag(dag, CONTEXT)
    assert service.started[1].wait(10)
    engine.wait_for_status(execution_id, "shards_1-transcode", TaskStatus.RUNNING)

    engine.redo(execution_id, "shards_1-transcode")
    # A second dispatch of the same (execution, task) while the first run still works.
    dispatches = engine.wait_for_dispatches(execution_id, "shards_1-transcode", 2)
    assert len({d.ts for d in dispatches}) == 2
    assert not release.is_set()
    assert service.runs["A:1:h264"] == 1

    release.set()
    _finished(engine, execution_id, 1)
    assert service.runs == Counter({f"A:{i}:h264": 1 for i in range(3)})
    assert _uris(engine.context(execution_id)["parts"]) == [
        f"s3://out/A/{i}.h264" for i in range(3)
    ]


def test_redo_with_a_context_change_runs_the_changed_keys(
    service: Service, dag: Dag, engine: EngineSimulator
) -> None:
    execution_id = engine.submit_dag(dag, CONTEXT)
    _finished(engine, execution_id, 1)

    engine.redo(execution_id, "shards", context={"profile": "h265"})
    _finished(engine, execution_id, 2)

    assert engine.context(execution_id)["profile"] == "h265"
    assert service.runs == Counter(
        {f"A:{i}:{profile}": 1 for i in range(3) for profile in ("h264", "h265")}
    )
    assert service.merges[-1]["uris"] == [f"s3://out/A/{i}.h265" for i in range(3)]
    assert len(engine.dispatches(execution_id, "split")) == 1


def test_redo_of_a_task_not_started_changes_nothing(
    service: Service, dag: Dag, engine: EngineSimulator
) -> None:
    release = service.hold(0)
    execution_id = engine.submit_dag(dag, CONTEXT)
    assert service.started[0].wait(10)
    engine.redo(execution_id, "merge")  # NOT_STARTED: the engine leaves it alone
    assert engine.task(execution_id, "merge").history == ()
    release.set()
    _finished(engine, execution_id, 1)
    with pytest.raises(UsageError, match="no task 'nothing'"):
        engine.redo(execution_id, "nothing")
    with pytest.raises(UsageError, match="dispatched by their dependencies"):
        engine.dispatch(execution_id, "merge")


def test_an_empty_collection_succeeds_the_foreach_without_children(
    service: Service, dag: Dag, engine: EngineSimulator
) -> None:
    execution_id = engine.submit_dag(dag, {**CONTEXT, "count": 0})
    _finished(engine, execution_id, 1)
    assert sorted(engine.tasks(execution_id)) == ["merge", "shards", "split"]
    assert engine.task(execution_id, "shards").message == "loop collection or subTasks empty"
    # As the engine: no group ran, so the foreach's outputMappings did not run either.
    assert "parts" not in engine.context(execution_id)
    assert service.merges == [{"execution_id": execution_id, "video": "A"}]


def test_the_descriptors_retry_runs_a_failed_child_again(
    service: Service, engine: EngineSimulator
) -> None:
    service.flaky.add(2)
    retry = (
        "retry:\n          maxRetryTimes: 1\n          intervalInSeconds: 0.05\n        timeline:"
    )
    with serve_app(service.app, lifespan="on") as url:
        dag = Dag.load(_edit("timeline:", retry), base_url=url)
        execution_id = engine.submit_dag(dag, CONTEXT)
        _finished(engine, execution_id, 1)

    view = engine.task(execution_id, "shards_2-transcode")
    assert (view.status, view.attempts) == (TaskStatus.SUCCEED, 2)
    assert [s.value for s in (t.status for t in view.history)][2:5] == [
        "FAILED",
        "READY",
        "RUNNING",
    ]
    first, *_, last = engine.dispatches(execution_id, "shards_2-transcode")
    assert first.body == last.body  # the retry's input is mapped again from the same context
    assert service.runs["A:2:h264"] == 2
    assert _uris(engine.context(execution_id)["parts"])[2] == "s3://out/A/2.h264"


def test_a_failed_group_fails_the_foreach_once_no_group_runs(
    service: Service, dag: Dag, engine: EngineSimulator
) -> None:
    service.broken.add(0)
    release = service.hold(2)
    execution_id = engine.submit_dag(dag, CONTEXT)
    engine.wait_for(execution_id, "shards_0-transcode")
    # The other groups still run: so do the foreach and the execution.
    assert engine.task(execution_id, "shards").status is TaskStatus.RUNNING
    assert engine.execution_status(execution_id) is DagStatus.RUNNING
    release.set()

    engine.wait_until(lambda: engine.execution_status(execution_id) is DagStatus.FAILED)
    tasks = engine.tasks(execution_id)
    assert tasks["shards_0-transcode"].status is TaskStatus.FAILED
    assert tasks["shards_2-transcode"].status is TaskStatus.SUCCEED
    assert tasks["shards"].status is TaskStatus.FAILED
    assert tasks["shards"].message == tasks["shards_0-transcode"].message
    assert tasks["merge"].status is TaskStatus.NOT_STARTED
    assert "parts" not in engine.context(execution_id)
    assert engine.dispatches(execution_id, "merge") == []


def test_a_failed_task_fails_the_execution_and_stops_its_successors(
    dag: Dag, engine: EngineSimulator
) -> None:
    # No "count": split's handler fails (500), the engine resends once and fails the task.
    execution_id = engine.submit_dag(dag, {"video": "A", "profile": "h264"})
    engine.wait_until(lambda: engine.execution_status(execution_id) is DagStatus.FAILED)
    assert engine.task(execution_id, "split").status is TaskStatus.FAILED
    assert engine.task(execution_id, "shards").status is TaskStatus.NOT_STARTED
    assert engine.dispatches(execution_id, "merge") == []


def _resources(dag: Dag) -> list[str]:
    nodes = [*dag.tasks, *(c for n in dag.tasks if isinstance(n, ForeachNode) for c in n.tasks)]
    return [node.task.resource for node in nodes if isinstance(node, FunctionNode)]


def test_the_descriptor_loads_from_a_file_and_base_url_moves_every_resource(
    tmp_path: Path,
) -> None:
    path = tmp_path / "dag.yaml"
    path.write_text(DESCRIPTOR)
    assert _resources(Dag.load(path)) == [
        "http://executor:8000/split",
        "http://executor:8000/merge",
        "http://executor:8000/transcode?codec=any",
    ]
    for source in (path, str(path)):
        assert _resources(Dag.load(source, base_url="https://127.0.0.1:1234/prefix/")) == [
            "https://127.0.0.1:1234/prefix/split",
            "https://127.0.0.1:1234/prefix/merge",
            "https://127.0.0.1:1234/prefix/transcode?codec=any",
        ]
    with pytest.raises(ConfigError, match="base_url"):
        Dag.load(path, base_url="127.0.0.1:1234")


def _edit(old: str, new: str) -> str:
    assert old in DESCRIPTOR
    return DESCRIPTOR.replace(old, new, 1)


@pytest.mark.parametrize(
    ("descriptor", "message"),
    [
        (_edit("category: foreach", "category: choice"), r"task 'shards'\.category"),
        (_edit("pattern: task_sync", "pattern: flow_sync"), r"task 'split'\.pattern"),
        (
            _edit("pattern: task_sync", "pattern: task_sync\n    successConditions: []"),
            "task 'split': unsupported field.*successConditions",
        ),
        (_edit("next: merge", "next: mrege"), r"task 'shards'\.next: no task 'mrege'"),
        (
            # A foreach's resourceName and pattern mean nothing to the engine: ignored.
            _edit("category: function", "category: foreach"),
            r"task 'split'\.iterationMapping: expected a mapping",
        ),
        (
            _edit("        pattern: task_async", "        category: foreach"),
            r"task 'transcode'.category: supported are function, got 'foreach'",
        ),
        (DESCRIPTOR + "    next: split\n", "circle found: split->shards->merge->split"),
        (_edit("name: merge", "name: split"), "task 'split': name duplicated"),
        (_edit("name: merge", "name: the_merge"), "name must be 1-100 letters or digits"),
        (
            _edit("target: $.context.segments", "target: $.context.segments\n        transform: x"),
            r"task 'split'\.outputMappings\[0\]: unsupported field.*transform",
        ),
        (_edit("item: segment", "item: segment\n      identity: $.iteration.element"), "identity"),
        (_edit("type: flow", "type: resource"), "type"),
        (_edit("timeoutInSeconds: 30", "suspenseTimestamp: 1"), r"timeline: .*suspenseTimestamp"),
        (
            _edit("timeline:", "retry:\n          conditions: []\n        timeline:"),
            r"task 'transcode'\.retry: unsupported field.*conditions",
        ),
        (_edit("source: $.context.count", "source: $.context..count"), "unsupported JSONPath"),
        (_edit("target: $.input.count", "target: $.input[*]"), "wildcard"),
        (
            _edit("resourceName: http://executor:8000/merge", "resourceName: merge.json"),
            r"task 'merge'\.resourceName: expected an http\(s\) URL",
        ),
        (
            _edit("timeline:", "retry:\n          maxRetryTimes: -1\n        timeline:"),
            r"task 'transcode'\.retry: max_retry_times must be >= 0",
        ),
        (
            _edit("timeoutInSeconds: 30", "timeoutInSeconds: 0"),
            r"task 'transcode'\.timeline\.timeoutInSeconds: must be > 0",
        ),
        ("tasks: [", "not valid YAML"),
        ("/no/such/descriptor.yaml", "a descriptor is a YAML mapping"),
    ],
)
def test_a_bad_descriptor_is_a_config_error_naming_the_field(descriptor: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Dag.load(descriptor)


def test_a_timeout_on_a_sync_task_does_nothing_as_in_the_engine() -> None:
    descriptor = _edit(
        "    pattern: task_sync\n", "    pattern: task_sync\n    timeline: {timeoutInSeconds: 5}\n"
    )
    split = Dag.load(descriptor).tasks[0]
    assert isinstance(split, FunctionNode)
    assert split.task.timeout_in_seconds is None


def test_submit_dag_and_redo_context_are_for_dags(engine: EngineSimulator) -> None:
    with pytest.raises(UsageError, match="takes a Dag"):
        engine.submit_dag(DESCRIPTOR, {})  # type: ignore[arg-type]
    execution_id = engine.submit(Task("t", "http://127.0.0.1:9/t"), dispatch=False)
    with pytest.raises(UsageError, match="applies to executions of a DAG"):
        engine.redo(execution_id, "t", context={"profile": "h265"})


def test_mappings_follow_the_engines_rules() -> None:
    rules = parse_rules(
        [
            {"source": 3, "target": "$.input.number"},
            {"source": "TRUE", "target": "$.input.flag"},
            {"source": '{"a": [1]}', "target": "$.input.object"},
            {"source": "h264", "target": "$.input.text"},
            {"source": "$.context.segments[1]", "target": "$.input.list[2]['the segment']"},
            {"source": "$.context.segments[*].index", "target": "$.input.indexes"},
            {"source": "$.context.missing.deep", "target": "$.input.missing"},
            {"source": "$.tasks.merge.trigger_url?status=SUCCESS", "target": "$.input.url"},
        ],
        where="rules",
    )
    context = {"segments": [{"index": 0}, {"index": 1}]}
    built: dict[str, Any] = {}
    apply(rules, context=context, input=built, output={}, trigger_url=lambda t: f"E/{t}?x=1")
    assert built == {
        "number": 3,
        "flag": True,
        "object": {"a": [1]},
        "text": "h264",
        "list": [None, None, {"the segment": {"index": 1}}],
        "indexes": [0, 1],
        "url": "E/merge?x=1&status=SUCCESS",
    }
