"""``rill-executor drill`` from a shell: the report as JSON, the timeline as SVG, exit codes."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.clocks import DRILL

from ..acceptance.cli import run
from .test_drill import EXAMPLE, NAIVE

pytestmark = pytest.mark.slow


@pytest.mark.real_clock(DRILL)
def test_a_short_drill_reports_json_and_draws_its_timeline(tmp_path: Path) -> None:
    picture = tmp_path / "drill.svg"
    args = ["drill", "--command", EXAMPLE, "--store", f"sqlite:///{tmp_path / 'jobs.db'}"]
    args += ["--duration", "8", "--rate", "1/2s", "--faults", "dup,redo,refused-callback"]
    args += ["--each-kind"]  # seed 4 draws four dups without it
    done = run(
        *args, "--lease", "2", "--seed", "4", "--svg", str(picture), "-o", "json", process=True
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True and report["seed"] == 4 and report["tasks"] > 0
    assert {s["kind"]: s["injected"] >= 1 for s in report["stats"]} == {
        "dup": True,
        "redo": True,
        "refused-callback": True,
    }
    assert {c["name"] for c in report["checks"]} >= {"every_task_succeeded", "audit_clean"}
    root = ET.fromstring(picture.read_text())
    assert (
        root.tag.endswith("svg") and len(root.findall(".//{*}g[@class='task']")) == report["tasks"]
    )


@pytest.mark.real_clock(DRILL)
def test_a_drill_that_finds_a_problem_exits_1(tmp_path: Path) -> None:
    args = ["drill", "--command", NAIVE, "--duration", "6", "--rate", "1/1s", "--faults", "redo"]
    done = run(*args, "--settle", "5", "--seed", "2", "-o", "json", process=True)
    assert done.returncode == 1
    assert json.loads(done.stderr)["error"]["type"] == "check_failed"
    assert json.loads(done.stdout)["ok"] is False


def test_an_unknown_fault_is_a_usage_error(tmp_path: Path) -> None:
    done = run(
        "drill", "--command", "true {port}", "--faults", "kill,meteor", "-o", "json", process=True
    )
    assert done.returncode == 2 and "meteor" in done.stderr


@pytest.mark.parametrize("command", ["no-such-program-rill {port}", "/dev/null {port}"])
def test_a_command_that_cannot_start_is_a_config_error(command: str) -> None:
    done = run("drill", "--command", command, "--processes", "1", "-o", "json", process=True)
    error = json.loads(done.stderr)["error"]
    assert done.returncode == 2 and error["type"] == "config", done.stderr
    assert command.split(maxsplit=1)[0] in error["message"]


@pytest.mark.parametrize("ref", ["examples.transcode.drill:nope", "no.such.module:workload", "x"])
def test_a_workload_that_cannot_be_found_is_a_usage_error(ref: str) -> None:
    done = run("drill", "--command", "true {port}", "--workload", ref, "-o", "json", process=True)
    assert done.returncode == 2 and ref in json.loads(done.stderr)["error"]["message"]


@pytest.mark.real_clock(DRILL)
def test_a_drill_on_its_own_redis_restarts_it_and_checks_it_before_it_stops(
    tmp_path: Path,
) -> None:
    args = ["drill", "--command", EXAMPLE, "--own-redis", "--logs", str(tmp_path)]
    args += ["--duration", "8", "--rate", "1/2s", "--faults", "store-restart", "--seed", "3"]
    done = run(*args, "--lease", "2", "-o", "json", process=True)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    [restarts] = [s for s in report["stats"] if s["kind"] == "store-restart"]
    assert restarts["injected"] > restarts["skipped"]
    assert {c["name"]: c["skipped"] for c in report["checks"]}["audit_clean"] is None


def test_a_missed_recovery_target_exits_1_only_when_enforced(tmp_path: Path) -> None:
    # A timed-out task's work lasts at least its timeline, a poll and 1 s more (5 s), so no
    # timeout recovers within a target of 2 + 0 + 2 s: every check holds, the target does not.
    args = ["drill", "--command", EXAMPLE, "--store", f"sqlite:///{tmp_path / 'jobs.db'}"]
    args += ["--duration", "6", "--rate", "1/2s", "--faults", "timeout", "--each-kind"]
    args += ["--lease", "2", "--notice-lease", "0.1", "--engine-retry", "0", "--seed", "3"]
    done = run(*args, "--enforce-target", "-o", "json", process=True)
    report = json.loads(done.stdout)
    assert report["ok"] is True, report["checks"]
    assert report["missed"] == ["timeout"] and report["target_p99"] == 4.0
    assert done.returncode == 1
    assert "the recovery target for timeout" in json.loads(done.stderr)["error"]["message"]
