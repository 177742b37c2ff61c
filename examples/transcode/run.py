"""One video through the transcode workflow, on this machine: ``python -m examples.transcode.run``.

Starts moto's S3 server (unless ``RILL_OUTPUTS`` names an output store), the executor under
uvicorn with two worker processes (jobs in ``RILL_STORE``, SQLite by default), and the
engine simulator; runs split → transcode each segment → merge; then prints one segment's
job status and the namespace's audit, writes that segment's timeline SVG and the merged
video into ``--out``. A new S3 server is empty: the run then starts a new SQLite file, or,
on a store named by ``RILL_STORE``, takes a new video name (``video-A-3f2a1c``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import boto3
import httpx

from rill_executor import Ledger
from rill_executor.testing.rillflow import Dag, DagStatus, EngineSimulator, TaskStatus

from .app import NAMESPACE, segment_key

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "transcode-demo"
DESCRIPTOR = Path(__file__).with_name("transcode.yaml")


def run_workflow(
    engine: EngineSimulator, executor_url: str, context: Mapping[str, Any], *, timeout: float = 60
) -> dict[str, Any]:
    """Run ``transcode.yaml`` on ``context`` (``video``, ``count``, ``profile``, ``version``)
    through the engine simulator, as the engine runs the DAG: split, then a transcode per
    segment (the foreach), then merge; returns the DAG's context at the end."""
    dag = Dag.load(DESCRIPTOR, base_url=executor_url)
    execution = engine.submit_dag(dag, context)
    engine.wait_until(
        lambda: engine.execution_status(execution) is not DagStatus.RUNNING, timeout=timeout
    )
    if engine.execution_status(execution) is not DagStatus.SUCCEED:
        failed = [v for v in engine.tasks(execution).values() if v.status is TaskStatus.FAILED]
        raise RuntimeError(f"{execution} failed: {[(v.name, v.message) for v in failed]}")
    return engine.context(execution)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _wait(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited: {log.read_text()[-2000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within 30 s: {log.read_text()[-2000:]}")


@contextlib.contextmanager
def _serve(command: list[str], ready: str, log: Path, env: Mapping[str, str]) -> Iterator[None]:
    """Run ``command`` in a process group of its own until the block ends."""
    with log.open("ab") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=out, start_new_session=True
        )
    try:
        _wait(ready, process, log)
        yield
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextlib.contextmanager
def moto_outputs(folder: Path) -> Iterator[str]:
    """moto's standalone S3 server with a bucket: yields the ``outputs=`` URL on it."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        os.environ.setdefault(name, value)
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    with _serve(command, f"{endpoint}/moto-api/", folder / "moto.log", os.environ):
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
        yield f"s3://{BUCKET}/outputs?endpoint_url={endpoint}&region=us-east-1"


@contextlib.contextmanager
def executor_service(
    store: str, outputs: str, folder: Path, *, workers: int = 2, lease: float = 10.0
) -> Iterator[str]:
    """``app.py`` under uvicorn with ``workers`` processes: yields its base URL."""
    port = _free_port()
    env = {**os.environ, "RILL_STORE": store, "RILL_OUTPUTS": outputs, "RILL_LEASE": str(lease)}
    env.setdefault("RILL_ENGINES", "127.0.0.1")  # the engine simulator, on this host
    command = [sys.executable, "-m", "uvicorn", "examples.transcode.app:from_env", "--factory"]
    command += ["--workers", str(workers), "--port", str(port), "--log-level", "warning"]
    url = f"http://127.0.0.1:{port}"
    with _serve(command, f"{url}/openapi.json", folder / "executor.log", env):
        yield url


def _cli(*args: str, env: Mapping[str, str]) -> None:
    """The ``rill-executor`` command, as an operator runs it."""
    command = [sys.executable, "-c", "from rill_executor.cli import main; main()", *args]
    subprocess.run(command, env=env, check=False)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=Path("transcode-demo"), help="a folder")
    parser.add_argument("--store", help="the job store URL (default: RILL_STORE, else SQLite)")
    parser.add_argument("--video", default="video-A")
    parser.add_argument("--count", type=int, default=3, help="segments")
    parser.add_argument("--profile", default="h264")
    parser.add_argument("--version", default="v2")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    store = args.store or os.environ.get("RILL_STORE")
    outputs = os.environ.get("RILL_OUTPUTS")
    if outputs is None:  # a new S3 server, empty: jobs recorded before refer to objects gone
        if store is None:
            for old in out.glob("jobs.db*"):
                old.unlink()
        else:
            args.video = f"{args.video}-{uuid.uuid4().hex[:6]}"
    store = store or f"sqlite:///{out / 'jobs.db'}"
    context = {k: getattr(args, k) for k in ("video", "count", "profile", "version")}
    with contextlib.ExitStack() as stack:
        outputs = outputs or stack.enter_context(moto_outputs(out))
        url = stack.enter_context(executor_service(store, outputs, out, workers=args.workers))
        engine = stack.enter_context(EngineSimulator())
        result = run_workflow(engine, url, context)
        print(f"merged {result['video']}: {result['merged_uri']} ({result['merged_sha256']})")
        with Ledger(store, namespace=NAMESPACE, outputs=outputs) as ledger:
            merge_key = f"{args.video}:{args.profile}-{args.version}"
            status = ledger.status(merge_key, handler="merge")
            assert status is not None and ledger.outputs is not None
            with (out / "merged.mp4").open("wb") as video:
                for chunk in ledger.outputs.read(status.outputs[0].key):
                    video.write(chunk)
        print(f"wrote {out / 'merged.mp4'}\n")
        env = {**os.environ, "RILL_STORE": store, "RILL_NAMESPACE": NAMESPACE}
        key = segment_key(args.video, result["segments"][0], args.profile, args.version)
        _cli("status", key, "--handler", "transcode", env=env)
        _cli("audit", "--outputs-url", outputs, env=env)
        _cli("timeline", key, "--handler", "transcode", "--svg", str(out / "segment.svg"), env=env)


if __name__ == "__main__":
    main()
