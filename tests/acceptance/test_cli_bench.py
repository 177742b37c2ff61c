"""``rill-executor bench``, run as the installed command against SQLite, PostgreSQL and Redis
at a tiny --n: the shape of what it prints and the jobs it leaves. No timing is asserted."""

from __future__ import annotations

import json
import sqlite3
import uuid
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from rill_executor import Ledger
from rill_executor.reports import JobSummary

from .cli import run

MEASURES = ["floor", "fresh", "decorated", "replay", "status"]


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def store_url(request: pytest.FixtureRequest) -> str:
    url = str(request.getfixturevalue(f"{request.param}_url"))
    Ledger(url, namespace="opened").close()  # a SQLite file must exist: bench creates none
    return url


def landed(store_url: str, namespace: str) -> dict[str, JobSummary]:
    """Every job of the namespace, by key (a Redis scan may list one twice)."""
    found: dict[str, JobSummary] = {}
    with Ledger(store_url, namespace=namespace) as ledger:
        page = ledger.jobs(limit=1000)
        found |= {job.key: job for job in page.jobs}
        while page.cursor is not None:
            page = ledger.jobs(limit=1000, after=page.cursor)
            found |= {job.key: job for job in page.jobs}
    return found


def rows(sqlite_url: str) -> int:
    with closing(sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))) as db:
        return int(db.execute("SELECT count(*) FROM rill_jobs").fetchone()[0])


def retention_of(jobs: dict[str, JobSummary]) -> set[timedelta]:
    return {
        job.retain_until - job.finished_at
        for job in jobs.values()
        if job.retain_until and job.finished_at
    }


def test_bench_prints_every_measure_as_a_ratio_to_the_floor(store_url: str) -> None:
    done = run("bench", "--store", store_url, "--n", "20", "-o", "json")
    assert done.returncode == 0, done.stderr
    shown: dict[str, Any] = json.loads(done.stdout)
    assert shown["namespace"].startswith("rill-bench-")
    assert (shown["n"], shown["warmup"], shown["floor"]) == (20, 20, "store.ping()")
    assert "password" not in shown["store"]
    assert [m["name"] for m in shown["measures"]] == MEASURES
    for measure in shown["measures"]:
        assert measure["samples"] == 20
        assert 0 < measure["p50_us"] <= measure["p99_us"]
        assert isinstance(measure["ratio"], float) and measure["ratio"] > 0, measure
    assert shown["measures"][0]["ratio"] == 1.0  # the floor over itself

    # fresh and decorated write one job a run, warm-up included; 20 more replay
    assert shown["written"] == 2 * (20 + 20) + 20
    jobs = landed(store_url, shown["namespace"])
    assert len(jobs) == shown["written"]
    assert {job.state.value for job in jobs.values()} == {"succeeded"}
    assert sum(key.startswith("rill-bench/") for key in jobs) == 40  # the decorated handler's
    assert shown["retention_seconds"] == 3600
    assert retention_of(jobs) == {timedelta(hours=1)}


def test_bench_text_names_the_namespace_and_what_it_left(store_url: str) -> None:
    namespace = f"given-{uuid.uuid4().hex[:8]}"
    done = run(
        "bench", "--store", store_url, "--n", "3", "--namespace", namespace, "--retention", "2h"
    )
    assert done.returncode == 0, done.stderr
    for measure in MEASURES:
        assert f" {measure} " in done.stdout
    assert "x " in done.stdout  # the ratio column, e.g. "3.41x"
    assert f"wrote 15 jobs, all committed, in namespace '{namespace}'" in done.stdout
    assert "(2h)" in done.stdout
    assert f"rill-executor gc --namespace {namespace}" in done.stdout
    assert "DELETE" not in done.stdout
    jobs = landed(store_url, namespace)
    assert len(jobs) == 15
    assert retention_of(jobs) == {timedelta(hours=2)}


def test_bench_without_a_store_is_a_usage_error() -> None:
    done = run("bench", "--n", "20")
    assert done.returncode == 2
    assert "Missing option '--store'" in done.stderr and done.stdout == ""
    as_json = run("bench", "-o", "json")
    assert as_json.returncode == 2
    assert json.loads(as_json.stderr)["error"]["type"] == "usage"


@pytest.mark.parametrize(
    "option", [("--n", "0"), ("--retention", "soon"), ("--namespace", "no spaces")]
)
def test_bench_refuses_bad_options_and_writes_nothing(
    sqlite_url: str, option: tuple[str, str]
) -> None:
    Ledger(sqlite_url, namespace="opened").close()
    before = rows(sqlite_url)
    done = run("bench", "--store", sqlite_url, *option)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ") and option[0].lstrip("-") in done.stderr
    assert rows(sqlite_url) == before


def test_bench_creates_no_sqlite_file(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    done = run("bench", "--store", f"sqlite:///{missing}", "--n", "5")
    assert done.returncode == 3, done.stderr
    assert not missing.exists()
