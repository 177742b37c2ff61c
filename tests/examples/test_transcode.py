"""examples/transcode for real: FFmpeg, moto's S3 server, the engine simulator, and the job
stores (SQLite, PostgreSQL, Redis). Each test has a namespace of its own on the shared
servers, and a bucket of its own."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from xml.etree import ElementTree

import boto3
import pytest
import yaml
from pydantic import BaseModel

from examples.transcode import media
from examples.transcode.app import (
    Merged,
    MergeJob,
    SegmentJob,
    SegmentResult,
    SplitJob,
    SplitResult,
    create_app,
    segment_key,
)
from examples.transcode.run import ROOT, run_workflow
from rill_executor import Claim, ConfigError, Ledger, fingerprint_of
from rill_executor.testing.drill._run import fitted_to_lease
from rill_executor.testing.rillflow import (
    EngineSimulator,
    Pattern,
    Retry,
    Task,
    TaskStatus,
    serve_app,
)

from ..adapters.s3.conftest import MotoServer
from ..otel import Otel

FRAMES = 20  # a 2 s segment at 10 frames a second
V2 = {"profile": "h264", "version": "v2"}


class Setup:
    """The executor in-process (its ledger on ``store``, outputs in a fresh bucket), the
    engine simulator, and a ledger and S3 client to look at what they did."""

    def __init__(
        self, store: str, namespace: str, moto: MotoServer, engine: EngineSimulator, url: str
    ) -> None:
        self.store, self.namespace, self.engine, self.url = store, namespace, engine, url
        self.s3 = boto3.client("s3", endpoint_url=moto.endpoint)
        self.video = f"v-{uuid.uuid4().hex[:12]}"

    def ledger(self, outputs: str | None = None) -> Ledger:
        return Ledger(self.store, namespace=self.namespace, outputs=outputs)

    def read(self, uri: str) -> bytes:
        parts = urlsplit(uri)
        return self.s3.get_object(Bucket=parts.netloc, Key=parts.path[1:])["Body"].read()

    def run(self, name: str, route: str, task_input: Mapping[str, object]) -> str:
        """One task_async dispatch of ``route`` in an execution of its own; waits for it."""
        task = Task(
            name,
            f"{self.url}/{route}",
            Pattern.TASK_ASYNC,
            input=task_input,
            retry=Retry(max_retry_times=1, interval_in_seconds=0.1, multiplier=1),
        )
        execution = self.engine.submit(task)
        self.engine.wait_for(execution, name, timeout=30)
        return execution


@pytest.fixture(params=["sqlite", "postgresql", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'jobs.db'}"
    url: str = request.getfixturevalue(
        f"{'postgres' if request.param == 'postgresql' else 'redis'}_url"
    )
    return url


@pytest.fixture
def setup(store: str, outputs: str, moto: MotoServer) -> Iterator[Setup]:
    namespace = f"transcode-{uuid.uuid4().hex[:8]}"
    fitted = fitted_to_lease(store, 3.0)
    app = create_app(fitted, outputs, namespace=namespace, lease=3.0, engines=["127.0.0.1"])
    with serve_app(app, lifespan="on") as url, EngineSimulator() as engine:
        yield Setup(store, namespace, moto, engine, url)


def test_the_workflow_merges_a_playable_video_from_the_segments_in_the_bucket(
    setup: Setup, tmp_path: Path
) -> None:
    context = run_workflow(setup.engine, setup.url, {"video": setup.video, "count": 3, **V2})

    assert context["segments"] == [1, 2, 3]
    merged = tmp_path / "merged.mp4"
    merged.write_bytes(setup.read(context["merged_uri"]))
    assert hashlib.sha256(merged.read_bytes()).hexdigest() == context["merged_sha256"]
    assert media.frames(merged) == 3 * FRAMES  # FFmpeg decodes every frame of every segment
    # The foreach's groups come in the engine's hash order: each carries its own segment.
    transcoded = {group["segment"]: group["sha256"] for group in context["transcoded"]}
    assert sorted(transcoded) == context["segments"]
    with setup.ledger() as ledger:
        for segment in context["segments"]:
            sha256 = transcoded[segment]
            status = ledger.status(segment_key(setup.video, segment, **V2), handler="transcode")
            assert status is not None and status.result_version == "h264-v2"
            [ref] = status.outputs
            assert status.result == {"uri": ref.uri, "sha256": sha256, "frames": FRAMES}
            assert hashlib.sha256(setup.read(ref.uri)).hexdigest() == sha256 == ref.sha256
        merge = ledger.status(f"{setup.video}:h264-v2", handler="merge")
        assert merge is not None
        assert merge.result["segments"] == [transcoded[s] for s in context["segments"]]


def test_a_finished_segment_replays_and_a_new_version_runs_again(setup: Setup) -> None:
    run_workflow(setup.engine, setup.url, {"video": setup.video, "count": 2, **V2})
    key = segment_key(setup.video, 1, **V2)
    with setup.ledger() as ledger:
        first = ledger.status(key, handler="transcode")
    assert first is not None

    job = {"video": setup.video, "segment": 1, **V2}
    execution = setup.run("transcode", "transcode", job)  # the same work, sent again
    setup.engine.redo(execution, "transcode")  # and redone by an operator
    setup.engine.wait_until(lambda: len(setup.engine.callbacks(execution)) == 2)
    assert [c.status_code for c in setup.engine.callbacks(execution)] == [200, 200]
    assert setup.engine.task(execution, "transcode").output == first.result

    setup.run("transcode", "transcode", {**job, "version": "v1"})
    with setup.ledger() as ledger:
        again = ledger.status(key, handler="transcode")
        v1 = ledger.status(segment_key(setup.video, 1, "h264", "v1"), handler="transcode")
    assert again is not None and v1 is not None
    assert len(again.attempts) == 1  # the encoder ran once for v2, whoever asked
    assert again.result == first.result
    assert len(v1.attempts) == 1 and v1.result_version == "h264-v1"
    assert v1.result["uri"] != first.result["uri"]
    assert v1.result["sha256"] != first.result["sha256"]  # other settings, another file


def test_merge_refuses_a_segment_without_a_committed_output(setup: Setup, outputs: str) -> None:
    video = setup.video
    setup.run("split", "split", {"video": video, "count": 3})
    for segment in (1, 2):
        setup.run("transcode", "transcode", {"video": video, "segment": segment, **V2})
    # Segment 3: an attempt that wrote its file and crashed before committing it.
    job = SegmentJob(video=video, segment=3, **V2)
    with setup.ledger(outputs) as ledger:
        key = f"transcode/{segment_key(video, 3, **V2)}"
        claim = ledger.claim(key, fingerprint=fingerprint_of(job), result_version="h264-v2")
        assert isinstance(claim, Claim)
        stray = claim.outputs.put("segment.mp4", b"not the committed segment")
        claim.fail("the encoder crashed", retryable=True)

    merge_input = {"video": video, "segments": [1, 2, 3], **V2}
    execution = setup.run("merge", "merge", merge_input)

    refused = setup.engine.task(execution, "merge")
    assert refused.status is TaskStatus.FAILED
    assert f"no committed output for ['{segment_key(video, 3, **V2)}']" in (refused.message or "")
    with setup.ledger(outputs) as ledger:
        audit = ledger.audit(segment_key(video, 3, **V2), handler="transcode")
        merge = ledger.status(f"{video}:h264-v2", handler="merge")
    assert [(e.key, e.state) for e in audit.entries] == [(stray.key, "orphan")]
    assert merge is not None and merge.error is not None and merge.error.type == "NotCommitted"
    assert [a.outputs for a in merge.attempts] == [(), ()]  # nothing merged, nothing written

    setup.run("transcode", "transcode", {"video": video, "segment": 3, **V2})
    execution = setup.run("merge", "merge", merge_input)  # the engine's retry, say
    merged = setup.engine.task(execution, "merge")
    assert merged.status is TaskStatus.SUCCEED and merged.output is not None
    assert merged.output["frames"] == 3 * FRAMES
    assert stray.sha256 not in merged.output["segments"]


def test_the_runner_runs_one_video_with_two_workers(moto: MotoServer, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in {"RILL_STORE", "RILL_OUTPUTS"}}
    done = subprocess.run(
        [sys.executable, "-m", "examples.transcode.run", "--out", str(tmp_path), "--count", "2"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"^state +succeeded", done.stdout, re.MULTILINE)  # the segment's status
    assert "every invariant holds" in done.stdout  # the audit
    picture = ElementTree.parse(tmp_path / "segment.svg").getroot()  # the timeline
    assert picture.tag == "{http://www.w3.org/2000/svg}svg"
    assert [g.get("data-outcome") for g in picture.iter() if g.get("data-outcome")] == ["succeeded"]
    assert media.frames(tmp_path / "merged.mp4") == 2 * FRAMES


def test_the_dag_maps_what_each_route_takes_and_answers() -> None:
    """transcode.yaml's tasks in order, each mapping only context the DAG has by then into
    the fields its route takes, and out of the fields its route answers."""
    dag = yaml.safe_load((ROOT / "examples/transcode/transcode.yaml").read_text())
    routes: dict[str, tuple[type[BaseModel], type[BaseModel]]] = {
        "split": (SplitJob, SplitResult),
        "transcode": (SegmentJob, SegmentResult),
        "merge": (MergeJob, Merged),
    }
    split, foreach, merge = dag["tasks"]
    assert (split["next"], foreach["next"]) == (foreach["name"], merge["name"])
    [transcode] = foreach["tasks"]
    assert foreach["iterationMapping"] == {"collection": "$.input.segments", "item": "segment"}

    def check(task: dict[str, Any], context: set[str]) -> set[str]:
        """``task``'s mappings against its route; the context after it."""
        assert task["category"] == "function" and task["pattern"] == "task_async"
        takes, answers = routes[urlsplit(task["resourceName"]).path.strip("/")]
        sources = {m["source"].removeprefix("$.context.") for m in task["inputMappings"]}
        fields = {m["target"].removeprefix("$.input.") for m in task["inputMappings"]}
        required = {name for name, f in takes.model_fields.items() if f.is_required()}
        assert sources <= context and required <= fields <= set(takes.model_fields)
        produced = {m["source"].removeprefix("$.output.") for m in task["outputMappings"]}
        assert produced <= set(answers.model_fields)
        return context | {m["target"].removeprefix("$.context.") for m in task["outputMappings"]}

    context = check(split, {"video", "count", "profile", "version"})
    iteration = {m["target"].removeprefix("$.input.") for m in foreach["inputMappings"]}
    assert {m["source"].removeprefix("$.context.") for m in foreach["inputMappings"]} <= context
    collected = check(transcode, iteration - {"segments"} | {"segment"})
    # The groups' contexts, whole: they come in hash order, each with its own segment.
    assert foreach["outputMappings"] == [
        {"source": "$.output.sub_context", "target": "$.context.transcoded"}
    ]
    assert {"segment", "sha256"} <= collected
    check(
        merge, context | {m["target"].removeprefix("$.context.") for m in foreach["outputMappings"]}
    )


def test_the_deployment_steps_name_the_descriptor_as_the_engine_stores_it() -> None:
    """DAGDescriptorService.saveDescriptorVO (rill-flow-service, DAGDescriptorService.java:
    88-92) refuses a descriptor whose workspace and dagName are not the request's business_id
    and feature_name ("name not match"); submit.json finds it as business_id:feature_name."""
    descriptor = ROOT / "examples/transcode/transcode.yaml"
    dag = yaml.safe_load(descriptor.read_text())
    names = (dag["workspace"], dag["dagName"])
    for where in (descriptor, ROOT / "examples/transcode/README.md"):
        text = re.sub(r"#\s*", "", where.read_text())  # the YAML's steps are in comments
        adds = re.findall(r"business_id=(\w+)&\s*feature_name=(\w+)", text)
        submits = re.findall(r"descriptor_id=(\w+):(\w+)", text)
        assert adds and submits, where
        assert set(adds) == set(submits) == {names}, where


def test_with_an_sdk_each_ffmpeg_run_is_a_span_of_its_attempt(
    otel: Otel, moto: MotoServer, outputs: str, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'jobs.db'}"
    app = create_app(store, outputs, engines=["127.0.0.1"])
    with serve_app(app, lifespan="on") as url, EngineSimulator() as engine:
        setup = Setup(store, "transcode", moto, engine, url)
        setup.run("split", "split", {"video": setup.video, "count": 1})
        setup.run("transcode", "transcode", {"video": setup.video, "segment": 1, **V2})

    runs = {span.name: span for span in otel.spans() if span.name.startswith("rill.run ")}
    ffmpeg = [span for span in otel.spans() if span.name == "ffmpeg"]
    transcode = runs["rill.run transcode"].context
    encodes = [s for s in ffmpeg if s.parent is not None and s.parent.span_id == transcode.span_id]
    assert len(encodes) == 1  # the encode, under the attempt that committed it
    assert encodes[0].attributes is not None
    assert "libx264" in list(encodes[0].attributes["ffmpeg.args"])  # type: ignore[arg-type]


def test_without_an_output_store_the_service_does_not_start(tmp_path: Path) -> None:
    app = create_app(f"sqlite:///{tmp_path / 'jobs.db'}", None)

    async def start() -> None:
        async with app.router.lifespan_context(app):
            pass

    with pytest.raises(ConfigError, match="set RILL_OUTPUTS"):
        asyncio.run(start())
