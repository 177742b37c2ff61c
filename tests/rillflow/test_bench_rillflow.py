"""benchmarks/bench_rillflow.py at a tiny size: a correctness check of the executor under
load, never a timing assert. Two uvicorn workers on Redis, a few tasks in flight for about two
seconds per pattern: every async dispatch gets exactly one callback, no sync one gets any."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import REDIS_URL

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_rillflow.py"


@pytest.mark.real_clock("a throughput check of real dispatches and callbacks through real Redis")
def test_every_async_dispatch_gets_exactly_one_callback(redis_url: str, tmp_path: Path) -> None:
    figures = tmp_path / "figures.json"
    command = [
        sys.executable, str(BENCH), "--arms", "redis", "--patterns", "async,sync",
        "--duration", "2", "--warmup", "0.5", "--rounds", "1", "--concurrency", "4",
        "--redis-url", REDIS_URL, "--json", str(figures), "--workdir", str(tmp_path),
    ]  # fmt: skip
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = json.loads(figures.read_text())["runs"]
    redis = run["arms"]["redis"]
    for pattern in ("async", "sync"):
        assert redis[pattern]["errors"] == 0, redis[pattern]
        assert redis[pattern]["missing"] == 0, redis[pattern]
        assert redis[pattern]["not_exactly_once"] == 0, redis[pattern]
    assert redis["async"]["dispatches_checked"] > 0
    assert run["callbacks_not_for_an_async_dispatch"] == 0
