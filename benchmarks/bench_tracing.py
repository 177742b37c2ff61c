"""What tracing costs a decorated call: the library before it was instrumented, and now with
no OpenTelemetry SDK, with the SDK and a no-op exporter, and with the in-memory exporters.

    .venv/bin/python benchmarks/bench_tracing.py [--rounds 30] [--batch 300] [--store URL]

Each arm is a worker process of its own (OpenTelemetry's providers are global to a
process); the uninstrumented one imports the library as of ``--baseline``, the commit just
before the instrumentation, extracted from this repository's history. The parent sends
every worker the same round in turn, so machine noise falls on all arms alike, and prints
the median microseconds per call of a fresh call (claim, handler, commit) and of a replay,
with each arm's ratio to the uninstrumented one. It asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "cbc1f13"  # the ledger step, before the telemetry was wired in
ARMS = ("uninstrumented", "no SDK", "SDK, no-op exporter", "SDK, in-memory exporters")

WORKER = r"""
import itertools, json, sys, time

arm, url = sys.argv[1], sys.argv[2]
if arm.startswith("SDK"):
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    class Dropped(SpanExporter):
        def export(self, spans):
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    memory = arm.endswith("exporters")
    exporter = InMemorySpanExporter() if memory else Dropped()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    readers = [InMemoryMetricReader()] if memory else []
    metrics.set_meter_provider(MeterProvider(metric_readers=readers))

import uuid
import rill_executor
from rill_executor import Ledger

print(json.dumps(rill_executor.__file__), flush=True)

ledger = Ledger(url, namespace="bench-" + uuid.uuid4().hex[:8], lease=30, retention=3600)
keys = itertools.count()

@ledger.idempotent(key=lambda x: x, heartbeat=False)
def handler(x: str) -> str:
    return x

handler("replayed")
for line in sys.stdin:
    batch = int(line)
    start = time.perf_counter()
    for _ in range(batch):
        handler(f"k{next(keys)}")
    fresh = (time.perf_counter() - start) / batch * 1e6
    start = time.perf_counter()
    for _ in range(batch):
        handler("replayed")
    replay = (time.perf_counter() - start) / batch * 1e6
    if arm.endswith("exporters"):
        exporter.clear()
    print(json.dumps([fresh, replay]), flush=True)
"""


def _baseline(rev: str, into: Path) -> Path:
    """The library as of ``rev``, extracted from git (its core and adapters)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "rill_executor", "adapters"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def _env(arm: str, baseline: Path) -> dict[str, str]:
    env = dict(os.environ)
    if arm == "uninstrumented":
        paths = [baseline, *(baseline / "adapters" / a for a in ("sql", "redis", "s3"))]
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--batch", type=int, default=300)
    parser.add_argument("--store", default="memory://")
    parser.add_argument("--baseline", default=BASELINE)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        baseline = _baseline(args.baseline, Path(tmp) / "baseline")
        (Path(tmp) / "run").mkdir()  # the workers' directory: nothing there to import
        workers = {
            arm: subprocess.Popen(
                [sys.executable, "-c", WORKER, arm, args.store],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=_env(arm, baseline),
                cwd=Path(tmp) / "run",
            )
            for arm in ARMS
        }
        for arm, worker in workers.items():
            assert worker.stdout is not None
            print(f"{arm}: {json.loads(worker.stdout.readline())}")
        samples: dict[str, list[list[float]]] = {arm: [] for arm in ARMS}
        for round_ in range(args.rounds + 2):  # two rounds of warm-up, not kept
            for arm, worker in workers.items():
                assert worker.stdin is not None and worker.stdout is not None
                worker.stdin.write(f"{args.batch}\n")
                worker.stdin.flush()
                figures = json.loads(worker.stdout.readline())
                if round_ >= 2:
                    samples[arm].append(figures)
        for worker in workers.values():
            assert worker.stdin is not None
            worker.stdin.close()
            worker.wait()
    print(f"decorated call on {args.store}, {args.rounds} rounds of {args.batch}, median µs/call")
    floor = [statistics.median(s[i] for s in samples["uninstrumented"]) for i in (0, 1)]
    print(f"  {'arm':28s} {'fresh':>9s} {'ratio':>7s} {'replay':>9s} {'ratio':>7s}")
    for arm in ARMS:
        fresh, replay = (statistics.median(s[i] for s in samples[arm]) for i in (0, 1))
        print(
            f"  {arm:28s} {fresh:9.1f} {fresh / floor[0]:7.3f}"
            f" {replay:9.1f} {replay / floor[1]:7.3f}"
        )


if __name__ == "__main__":
    main()
