"""The fault drill against the example executor (every check holds, on SQLite, PostgreSQL
and Redis) and against a naive executor like the engine's own samples (the drill reports
its lost callbacks, its doubles and its failures)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rill_executor.testing.drill import (
    DrillConfig,
    DrillResult,
    FaultDrill,
    FaultKind,
    RedisServer,
    SegmentWorkload,
    check,
    plan,
    summarise,
)
from tests.clocks import DRILL

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
UVICORN = f"{sys.executable} -m uvicorn --app-dir {ROOT} --log-level warning --port {{port}}"
EXAMPLE = f"{UVICORN} examples.rillflow_executor.app:app"
NAIVE = f"{UVICORN} tests.drill.naive_app:app"
ON_PROCESSES = ("kill", "stop")
ON_THE_ENGINE = ("dup", "redo", "timeout", "lost-callback", "refused-callback")
ON_THE_LINK = ("reset", "blackhole", "latency")


def drill(
    command: str,
    store: str | None,
    faults: tuple[str, ...],
    tmp_path: Path,
    *,
    seed: int = 7,
    duration: float = 30.0,
    settle: float = 40.0,
    fail_every: int | None = None,
    redis: RedisServer | None = None,
) -> DrillResult:
    workload = SegmentWorkload(seed=seed, fail_every=fail_every)
    config = DrillConfig(
        command=command,
        store=store,
        processes=3,
        duration=duration,
        seed=seed,
        faults=tuple(FaultKind(f) for f in faults),
        every=2.0,
        submit_every=2.0,
        lease=2.0,
        settle=settle,
        log_dir=tmp_path / "logs",
        store_server=redis,
    )
    record = FaultDrill(config, workload).run()
    result = summarise(record, check(record, namespace=workload.namespace))
    print(result.model_dump_json(indent=1))  # the figures, with -s
    return result


def failed(result: DrillResult) -> dict[str, tuple[str, ...]]:
    return {c.name: c.problems for c in result.checks if not c.ok}


def test_the_same_seed_plans_the_same_faults() -> None:
    kinds = list(FaultKind)
    assert plan(5, kinds, 2.0, 60.0) == plan(5, kinds, 2.0, 60.0)
    assert plan(5, kinds, 2.0, 60.0) != plan(6, kinds, 2.0, 60.0)


@pytest.mark.real_clock(DRILL)
def test_the_example_executor_holds_every_check_on_sqlite(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'jobs.db'}"
    result = drill(EXAMPLE, store, ON_PROCESSES + ON_THE_ENGINE, tmp_path)
    assert failed(result) == {}
    assert sum(s.injected - s.skipped for s in result.stats) >= 5
    assert all(
        c.skipped is None
        for c in result.checks
        if c.name not in {"orphans_collected", "one_output_per_key"}
    )


@pytest.mark.real_clock(DRILL)
def test_the_example_executor_holds_every_check_on_postgres(
    postgres_url: str, tmp_path: Path
) -> None:
    result = drill(EXAMPLE, postgres_url, ON_PROCESSES + ON_THE_LINK + ON_THE_ENGINE, tmp_path)
    assert failed(result) == {}


@pytest.mark.real_clock(DRILL)
def test_the_example_executor_holds_every_check_on_a_redis_the_drill_restarts(
    tmp_path: Path,
) -> None:
    redis = RedisServer(tmp_path / "redis")
    redis.start()
    try:
        faults = (*ON_PROCESSES, *ON_THE_LINK, *ON_THE_ENGINE, "store-restart")
        result = drill(EXAMPLE, redis.url, faults, tmp_path, redis=redis)
    finally:
        redis.stop()
    assert failed(result) == {}
    restarts = {s.kind: s for s in result.stats}.get("store-restart")
    assert restarts is not None and restarts.injected > restarts.skipped


@pytest.mark.real_clock(DRILL)
def test_the_drill_reports_the_naive_executors_lost_callbacks_doubles_and_failures(
    tmp_path: Path,
) -> None:
    faults = ("redo", "lost-callback", "dup")
    result = drill(NAIVE, None, faults, tmp_path, fail_every=4, settle=8.0)
    broken = failed(result)
    # A lost callback is never sent again: the task stays RUNNING.
    assert "every_task_succeeded" in broken
    assert any("RUNNING" in p for p in broken["every_task_succeeded"])
    # A redo runs the work again, and the engine takes a second, different result.
    assert "one_result_per_key" in broken
    # A failure reported with result_type is recorded by the engine as a success.
    assert "no_failure_as_success" in broken
