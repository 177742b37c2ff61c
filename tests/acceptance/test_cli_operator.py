"""What an on-call engineer relies on, run as the installed command on every store: one
action per resolution, the job's own retention kept, honest retention checks, strict input,
one error vocabulary, resolutions told apart from failures, a terminal that reads."""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from rill_executor import Claim, InvalidResult, Ledger
from tests.clocks import STORE_CLOCK

from .cli import opts, run


@pytest.fixture(params=["sqlite", "postgres", "mariadb", "redis"])
def store_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_url"))


@pytest.fixture
def namespace() -> str:
    return f"ops-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def ledger(store_url: str, namespace: str) -> Iterator[Ledger]:
    with Ledger(store_url, namespace=namespace, retention=timedelta(days=30)) as found:
        yield found


def _dangling(ledger: Ledger, *keys: str) -> None:
    for key in keys:
        ledger.claim(key, lease=timedelta(milliseconds=50))
    time.sleep(0.2)  # the leases run out


def _claim(ledger: Ledger, key: str) -> Claim:
    claim = ledger.claim(key)
    assert isinstance(claim, Claim), claim
    return claim


def _json_error(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    error = json.loads(done.stderr)["error"]
    assert isinstance(error, dict)
    return error


@pytest.mark.parametrize(
    "flags",
    [("--redo", "--terminate"), ("--terminate", "--redo"), ("--redo", "--reuse")],
)
@pytest.mark.real_clock(STORE_CLOCK)
def test_two_actions_are_refused_and_nothing_is_written(
    store_url: str, namespace: str, ledger: Ledger, flags: tuple[str, ...]
) -> None:
    _dangling(ledger, "k")
    before = ledger.status("k")
    done = run("resolve", "k", *flags, "--reason", "x", *opts(store_url, namespace))
    assert done.returncode == 2, done.stderr
    assert "choose one" in done.stderr and "nothing was written" in done.stderr
    after = ledger.status("k")
    assert before is not None and after is not None
    assert (after.fence, after.state, after.events) == (before.fence, before.state, ())


ERROR_TYPES = {
    "check_failed": 1,
    "usage": 2,
    "config": 2,
    "not_found": 3,
    "store_unavailable": 4,
    "store_failed": 4,
    "refused": 5,
}


def test_json_errors_speak_one_vocabulary_with_the_exception_apart(
    store_url: str, namespace: str, ledger: Ledger
) -> None:
    ledger.claim("live", lease=timedelta(minutes=5))
    where = (*opts(store_url, namespace), "-o", "json")
    cases = [
        (("jobs", "--limit", "0", *where), "usage", "BadParameter"),
        (("status", "absent", *where), "not_found", None),
        (("resolve", "live", "--redo", "--reason", "r", *where), "refused", "ResolutionRefused"),
        (("jobs", "--store", "nowhere.db", "-n", namespace, "-o", "json"), "config", "ConfigError"),
        (
            ("jobs", "--store", "redis://127.0.0.1:1/0", "-n", namespace, "-o", "json"),
            "store_unavailable",
            "StoreUnavailable",
        ),
    ]
    for args, kind, exception in cases:
        done = run(*args)
        error = _json_error(done)
        assert (error["type"], error["exception"]) == (kind, exception), (args, error)
        assert error["exit_code"] == done.returncode == ERROR_TYPES[kind], (args, error)


def _keys(done: subprocess.CompletedProcess[str]) -> set[str]:
    assert done.returncode == 0, done.stderr
    return {job["key"] for job in json.loads(done.stdout)["jobs"]}


@pytest.mark.real_clock(STORE_CLOCK)
def test_resolutions_are_recorded_as_such_and_told_apart_from_failures(
    store_url: str, namespace: str, ledger: Ledger
) -> None:
    _dangling(ledger, "redone", "ended")
    _claim(ledger, "broken").fail(RuntimeError("codec missing"), retryable=False)
    where = (*opts(store_url, namespace), "-o", "json")
    for key, action in (("redone", "--redo"), ("ended", "--terminate")):
        done = run("resolve", key, action, "--reason", "host lost", "--actor", "bob", *where)
        assert done.returncode == 0, done.stderr
    for key, kind in (("redone", "resolved:redo"), ("ended", "resolved:terminate")):
        error = json.loads(run("status", key, *where).stdout)["error"]
        assert (error["type"], error["message"]) == (kind, "host lost (by bob)")
    assert _keys(run("jobs", "--failed", *where)) == {"broken"}
    assert _keys(run("jobs", "--resolved", *where)) == {"redone", "ended"}
    assert _keys(run("jobs", "--state", "failed", *where)) == {"broken", "redone", "ended"}


def _kept_for(ledger: Ledger, key: str) -> timedelta:
    status = ledger.status(key)
    assert status is not None and status.retain_until and status.finished_at
    return status.retain_until - status.finished_at


@pytest.mark.real_clock(STORE_CLOCK)
def test_a_resolution_from_the_command_line_keeps_the_jobs_own_retention(
    store_url: str, namespace: str, ledger: Ledger
) -> None:
    _claim(ledger, "done").commit({"uri": "s3://a"})
    _claim(ledger, "failed").fail(RuntimeError("codec missing"), retryable=False)
    _dangling(ledger, "stuck")
    where = opts(store_url, namespace)
    for key, action in (("done", "--reuse"), ("failed", "--terminate"), ("stuck", "--terminate")):
        done = run("resolve", key, action, "--reason", "checked by hand", *where)
        assert done.returncode == 0, done.stderr
        assert _kept_for(ledger, key) == timedelta(days=30), key
    python = ledger.resolve("done", "terminate", reason="by the application")
    assert python.retain_until and python.finished_at
    assert python.retain_until - python.finished_at == timedelta(days=30)


@pytest.mark.real_clock(STORE_CLOCK)
def test_check_retention_reads_past_a_redo_record(
    store_url: str, namespace: str, ledger: Ledger
) -> None:
    _claim(ledger, "done").commit({"uri": "s3://a"})
    _dangling(ledger, "redone")
    where = opts(store_url, namespace)
    assert run("resolve", "redone", "--redo", "--reason", "retry", *where).returncode == 0
    done = run("check-retention", "--task-timeout", "10m", *where, "-o", "json")
    assert done.returncode == 0, done.stderr + done.stdout
    assert json.loads(done.stdout)["retention_seconds"] == 30 * 86400


def test_jobs_input_is_strict_and_every_filter_holds(
    store_url: str, namespace: str, ledger: Ledger
) -> None:
    _claim(ledger, "done").commit({"uri": "s3://a"})
    _claim(ledger, "broken").fail(RuntimeError("codec missing"), retryable=False)
    where = (*opts(store_url, namespace), "-o", "json")
    bad = run("jobs", "--cursor", "not-a-cursor", *where)
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "cursor" in _json_error(bad)["message"]
    both = run("jobs", "--failed", "--state", "succeeded", *where)
    assert both.returncode == 2 and "every filter given must hold" in both.stderr, both.stderr
    assert _keys(run("jobs", "--state", "succeeded", "--state", "failed", "--failed", *where)) == {
        "broken"
    }
    assert _keys(run("jobs", "--older-than", "0s", *where)) == {"done", "broken"}


class Rendered(BaseModel):
    uri: str
    frames: int


def test_a_reused_result_is_checked_against_the_handlers_return_type(
    store_url: str, namespace: str, ledger: Ledger
) -> None:
    runs: list[str] = []

    @ledger.idempotent(key=lambda shot: shot, name="render")
    def render(shot: str) -> Rendered:
        runs.append(shot)
        raise RuntimeError("render farm lost")

    with pytest.raises(RuntimeError):
        render("s1")
    before = ledger.status("s1", handler=render)
    for wrong in (None, {"uri": "s3://x"}, {"path": "s3://x", "frames": "many"}):
        with pytest.raises(InvalidResult):
            ledger.resolve("s1", "reuse", reason="by hand", result=wrong, handler=render)
    after = ledger.status("s1", handler=render)
    assert before is not None and after is not None and after.fence == before.fence
    good = {"uri": "s3://x", "frames": 24}
    ledger.resolve("s1", "reuse", reason="by hand", result=good, handler=render)
    assert render("s1") == Rendered(uri="s3://x", frames=24) and runs == ["s1"]
    where = (*opts(store_url, namespace), "--handler", "render", "-o", "json")
    done = run("resolve", "s1", "--reuse", "--result", "null", "--reason", "r", *where)
    assert done.returncode == 0, done.stderr
    json.loads(done.stdout)
    (line,) = done.stderr.splitlines()
    assert line.startswith("warning: ") and "not checked" in line


@pytest.mark.real_clock(STORE_CLOCK)
def test_a_redo_stays_on_record_until_the_next_claim_and_gc_keeps_it(
    store_url: str, namespace: str, ledger: Ledger
) -> None:
    _dangling(ledger, "k")
    where = opts(store_url, namespace)
    done = run("resolve", "k", "--redo", "--reason", "host lost", "--actor", "alice", *where)
    assert done.returncode == 0, done.stderr
    swept = run("gc", *where)
    assert swept.returncode == 0, swept.stderr
    shown = run("attempts", "k", *where, "-o", "json")
    assert shown.returncode == 0, shown.stderr
    found = json.loads(shown.stdout)
    (event,) = found["events"]
    assert (event["kind"], event["actor"], event["reason"], event["detail"]) == (
        "resolved",
        "alice",
        "host lost",
        "redo",
    )
    assert event["data"]["before"]["state"] == "processing"
    (attempt,) = found["attempts"]
    assert attempt["outcome"] == "abandoned" and attempt["events"] == [event]


def test_a_namespace_with_no_jobs_is_reported_not_found(
    store_url: str, namespace: str, ledger: Ledger
) -> None:
    _claim(ledger, "k").commit({"uri": "s3://a"})
    typo = opts(store_url, namespace + "-typo")
    for command in ("audit", "gc", "deliver", "jobs"):
        done = run(command, *typo, "-o", "json")
        assert done.returncode == 3, (command, done.stdout, done.stderr)
        error = _json_error(done)
        assert error["type"] == "not_found" and "has no jobs" in error["message"], error
        if "redis" not in store_url:  # SQL lists its namespaces cheaply; Redis would scan
            assert "namespaces with jobs:" in error["message"] and namespace in error["message"]
    assert run("audit", *opts(store_url, namespace)).returncode == 0


@pytest.mark.real_clock(STORE_CLOCK)
def test_status_says_dangling_as_jobs_does_and_warnings_stay_one_line_on_stderr(
    store_url: str, namespace: str, ledger: Ledger
) -> None:
    _dangling(ledger, "k")
    url = store_url.replace("durability=ignore", "durability=warn")
    where = opts(url, namespace)
    shown = run("status", "k", *where)
    assert shown.returncode == 0, shown.stderr
    (state,) = [line for line in shown.stdout.splitlines() if line.startswith("state")]
    assert state.split() == ["state", "dangling"]
    as_json = run("status", "k", *where, "-o", "json")
    assert json.loads(as_json.stdout)["dangling"] is True
    for line in as_json.stderr.splitlines():  # Redis here keeps nothing on disk: it warns
        assert line.startswith("warning: DurabilityWarning: "), as_json.stderr
    assert ("redis" in url) == bool(as_json.stderr)


@pytest.mark.real_clock(STORE_CLOCK)
def test_the_jobs_table_fits_80_columns_in_time_order_and_json_stays_whole(
    store_url: str, namespace: str, ledger: Ledger
) -> None:
    keys = [f"video-{n}:segment-000{n}:h264-v2-with-a-long-profile-name" for n in (3, 1, 2)]
    for key in keys:
        _claim(ledger, key).commit({"uri": "s3://a"})
        time.sleep(0.01)
    _dangling(ledger, "video-9:segment-0009:h264-v2-with-a-long-profile-name")
    terminal = {"FORCE_COLOR": "1", "NO_COLOR": "1", "COLUMNS": "80"}
    shown = run("jobs", *opts(store_url, namespace), env=terminal)
    assert shown.returncode == 0, shown.stderr
    lines = re.sub(r"\x1b\[[0-9;]*m", "", shown.stdout).splitlines()  # bold, on a terminal
    assert all(len(line) <= 80 for line in lines), shown.stdout
    rows = [line.split() for line in lines if line.strip().startswith("video-")]
    assert [row[1] for row in rows] == ["succeeded"] * 3 + ["dangling"], shown.stdout
    assert [row[0][:7] for row in rows] == ["video-3", "video-1", "video-2", "video-9"]
    assert all("…" in row[0] for row in rows)
    whole = run("jobs", *opts(store_url, namespace), "-o", "json", env=terminal)
    found = [job["key"] for job in json.loads(whole.stdout)["jobs"]]
    assert found == [*keys, "video-9:segment-0009:h264-v2-with-a-long-profile-name"]
