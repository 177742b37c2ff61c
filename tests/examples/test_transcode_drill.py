"""The fault drill on the transcode executor: one workflow of 12 segments (split, a
transcode per segment, merge) through transcode.yaml, with faults every few seconds, on
SQLite, PostgreSQL and a Redis the drill restarts; every check holds, outputs included."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from examples.transcode.drill import workload
from rill_executor.testing.drill import (
    DrillConfig,
    DrillResult,
    FaultDrill,
    FaultKind,
    RedisServer,
    check,
    summarise,
)
from tests.clocks import DRILL

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
COMMAND = (
    f"{sys.executable} -m uvicorn --app-dir {ROOT} --log-level warning --port {{port}}"
    " --factory examples.transcode.app:from_env"
)
ON_PROCESSES = ("kill", "stop")
ON_THE_ENGINE = ("dup", "redo", "timeout", "lost-callback", "refused-callback")
ON_THE_LINK = ("reset", "blackhole", "latency")


def transcode_drill(
    store: str, outputs: str, faults: tuple[str, ...], tmp_path: Path, **more: object
) -> DrillResult:
    work = workload(11, segments=12)
    config = DrillConfig(
        command=COMMAND,
        store=store,
        processes=3,
        outputs=outputs,
        duration=40.0,
        seed=11,
        faults=tuple(FaultKind(f) for f in faults),
        every=4.0,
        submit_every=1000.0,  # one workflow (and one more for each timeout fault)
        lease=2.0,
        settle=120.0,
        log_dir=tmp_path / "logs",
        **more,  # type: ignore[arg-type]
    )
    record = FaultDrill(config, work).run()
    result = summarise(record, check(record, namespace=work.namespace, outputs=outputs))
    print(result.model_dump_json(indent=1))  # the figures, with -s
    return result


def assert_held(result: DrillResult) -> None:
    assert {c.name: c.problems for c in result.checks if not c.ok} == {}
    assert {c.name for c in result.checks if c.skipped} == set()
    assert result.tasks >= 14  # split, 12 transcodes and merge, of one workflow at least
    assert sum(s.injected - s.skipped for s in result.stats) >= 5


@pytest.mark.real_clock(DRILL)
def test_the_transcode_executor_holds_every_check_on_sqlite(outputs: str, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'jobs.db'}"
    assert_held(transcode_drill(store, outputs, ON_PROCESSES + ON_THE_ENGINE, tmp_path))


@pytest.mark.real_clock(DRILL)
def test_the_transcode_executor_holds_every_check_on_postgres(
    postgres_url: str, outputs: str, tmp_path: Path
) -> None:
    faults = ON_PROCESSES + ON_THE_LINK + ON_THE_ENGINE
    assert_held(transcode_drill(postgres_url, outputs, faults, tmp_path))


@pytest.mark.real_clock(DRILL)
def test_the_transcode_executor_holds_every_check_on_a_redis_the_drill_restarts(
    outputs: str, tmp_path: Path
) -> None:
    redis = RedisServer(tmp_path / "redis")
    redis.start()
    try:
        faults = (*ON_PROCESSES, *ON_THE_LINK, *ON_THE_ENGINE, "store-restart")
        assert_held(transcode_drill(redis.url, outputs, faults, tmp_path, store_server=redis))
    finally:
        redis.stop()
