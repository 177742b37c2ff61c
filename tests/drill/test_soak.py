"""benchmarks/soak.py at a tiny size, so that the tool does not rot: a few seconds on SQLite
with two executor processes, never a timing or memory assert. The run's checks are all
computed and hold (every task told once, nothing left pending, processing or dangling in the
store); the RSS check itself is tried on samples made up to grow and to stay flat."""

from __future__ import annotations

import csv
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SOAK = Path(__file__).resolve().parents[2] / "benchmarks" / "soak.py"
STORE_CHECKS = (
    "a_job_a_key",
    "nothing_processing",
    "nothing_dangling",
    "no_notice_pending",
    "audit_clean",
)
ENGINE_CHECKS = ("every_task_succeeded", "notified_once", "one_result_per_key", "quiescent")


def _soak() -> ModuleType:
    spec = importlib.util.spec_from_file_location("soak", SOAK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["soak"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_a_short_soak_computes_every_check_and_leaves_nothing_pending(tmp_path: Path) -> None:
    out = tmp_path / "out"
    command = [
        sys.executable, str(SOAK), "--store", f"sqlite:///{tmp_path / 'soak.db'}",
        "--duration", "6", "--warmup", "2", "--sample-every", "0.5", "--rate", "10",
        "--fault-rate", "1/1s", "--work", "0.05:0.2", "--settle", "60", "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((out / "soak.json").read_text())
    checks = {c["name"]: c for c in result["checks"]}
    for name in ("rss_flat", "steady_rate", *ENGINE_CHECKS, *STORE_CHECKS):
        assert checks[name]["ok"], checks.get(name)
    assert result["run"]["tasks"] > 0 and result["run"]["callbacks"] >= result["run"]["tasks"]
    workers = result["summary"]["workers"]
    assert sorted(workers) == ["0", "1"]
    for w in workers.values():
        assert w["rss_warm_mb"] > 0 and w["rss_end_mb"] > 0 and w["fds_end"] > 0
        assert w["rss_slope_mb_min"] is not None and w["samples_after_warmup"] >= 2
    assert result["summary"]["latency"]["callbacks"] > 0
    assert result["summary"]["latency"]["p99"] is not None
    with (out / "samples.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= 4 and rows[0]["w0_rss_mb"] and rows[0]["w1_fds"]
    assert "rss_flat" in done.stdout and "FAILED" not in done.stdout


def _samples(growth: float) -> list[dict[str, Any]]:
    """A sample a second for 100 s, one executor whose RSS grows by ``growth`` in all."""
    mb = 1024 * 1024

    def worker(t: int) -> dict[str, int]:
        return {"pid": 7, "rss": int((100 + growth * t / 100) * mb), "fds": 20, "threads": 8}

    return [
        {"at": 1000.0 + t, "workers": {"0": worker(t)}, "connections": 4, "error": None}
        for t in range(101)
    ]


@pytest.mark.parametrize(("growth", "flat"), [(0.0, True), (2.0, True), (10.0, False)])
def test_rss_is_compared_from_the_end_of_the_warm_up_to_the_end(growth: float, flat: bool) -> None:
    soak = _soak()
    summary = soak.summarise(_samples(growth), [], 1000.0, 1100.0, 20.0, 0.05)
    worker = summary["workers"]["0"]
    assert worker["rss_slope_mb_min"] == pytest.approx(growth * 60 / 100, rel=1e-3)
    assert worker["rss_warm_mb"] < worker["rss_end_mb"] or growth == 0
    assert soak.rss_check(summary)["ok"] is flat


def test_rss_samples_after_the_dispatches_end_are_not_compared() -> None:
    soak = _soak()
    samples = _samples(0.0)
    for s in samples[60:]:  # the executor gives memory back once the dispatches end
        s["workers"]["0"]["rss"] //= 2
    summary = soak.summarise(samples, [], 1000.0, 1059.0, 20.0, 0.05)
    assert soak.rss_check(summary)["ok"], summary


def test_a_run_whose_callbacks_stop_is_not_steady() -> None:
    """A harness that falls behind for good leaves the executors idle, their RSS flat: the
    soak says the rate was not kept rather than that nothing grew."""
    soak = _soak()
    samples = _samples(0.0)
    for s in samples:
        s["callbacks"] = 10 if s["at"] < 1050 else 0  # 10 a second, then none
    assert not soak.steady_check(samples, 1000.0, 1100.0, 20.0, 10.0)["ok"]
    for s in samples:
        s["callbacks"] = 10
    assert soak.steady_check(samples, 1000.0, 1100.0, 20.0, 10.0)["ok"]
