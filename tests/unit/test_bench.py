"""The benchmark's arithmetic (nearest-rank percentiles, ratios to the floor) and its run on
the in-memory store: the samples it takes and the jobs it writes. No timing is asserted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rill_executor import Ledger, UsageError
from rill_executor.cli._measure import MEASURES, _rounds, figures, percentile, run_bench
from rill_executor.store import MemoryStore


def test_percentiles_are_nearest_rank_in_microseconds() -> None:
    ns = [i * 1000 for i in range(100, 0, -1)]  # 1..100 µs, out of order
    assert percentile(ns, 50) == 50.0
    assert percentile(ns, 99) == 99.0
    assert percentile(ns, 100) == 100.0
    assert percentile([7000, 1000, 3000], 50) == 3.0  # rank ceil(1.5) = 2
    assert percentile([7000, 1000, 3000], 99) == 7.0
    assert percentile([2500], 99) == 2.5


@pytest.mark.parametrize(("samples", "q"), [([], 50), ([1], 0), ([1], 101)])
def test_a_percentile_of_nothing_or_out_of_range_is_refused(samples: list[int], q: float) -> None:
    with pytest.raises(UsageError):
        percentile(samples, q)


def test_each_ratio_is_its_p50_over_the_floors_p50() -> None:
    found = figures(
        {
            "status": [4000, 4000, 9000],
            "floor": [1000, 2000, 30000],  # p50 2 µs; its p99 plays no part
            "fresh": [5000, 6000, 100000],
        }
    )
    assert [(f.name, f.samples, f.p50_us, f.p99_us, f.ratio) for f in found] == [
        ("floor", 3, 2.0, 30.0, 1.0),
        ("fresh", 3, 6.0, 100.0, 3.0),
        ("status", 3, 4.0, 9.0, 2.0),
    ]
    assert [f.what for f in found] == [MEASURES[f.name] for f in found]


def test_without_a_floor_there_are_no_ratios() -> None:
    found = figures({"fresh": [5000], "replay": [2000]})
    assert [(f.name, f.ratio) for f in found] == [("fresh", None), ("replay", None)]


def test_measures_run_interleaved_a_batch_each_in_rotated_rounds() -> None:
    calls: list[str] = []

    def measure(name: str) -> Callable[[], int]:
        def run() -> int:
            calls.append(name)
            return 1000

        return run

    samples = _rounds({name: measure(name) for name in "abc"}, 5, 2)
    assert samples == {name: [1000] * 5 for name in "abc"}
    assert "".join(calls) == "aabbcc" + "bbccaa" + "cab"  # the last round takes what is left


def _all_jobs(ledger: Ledger) -> list[Any]:
    page = ledger.jobs(limit=1000)
    found = list(page.jobs)
    while page.cursor is not None:
        page = ledger.jobs(limit=1000, after=page.cursor)
        found += page.jobs
    return found


def test_a_run_takes_n_samples_of_each_measure_and_counts_the_jobs_it_wrote() -> None:
    ledger = Ledger(MemoryStore(), namespace="bench", retention=3600)
    report = run_bench(ledger, n=30, batch=7, warmup=4)
    assert [f.name for f in report.figures] == list(MEASURES)
    assert {f.samples for f in report.figures} == {30}
    assert report.floor and all(f.ratio is not None and f.ratio > 0 for f in report.figures)
    # fresh and decorated write a job a run, warm-up included; replay and status read 30
    assert report.written == 2 * (30 + 4) + 30
    jobs = _all_jobs(ledger)
    assert len(jobs) == report.written
    assert {job.state.value for job in jobs} == {"succeeded"}
    assert sum(job.key.startswith("rill-bench/") for job in jobs) == 30 + 4  # decorated
    assert report.retention.total_seconds() == 3600 and report.namespace == "bench"


class _NoPing:
    """A store without the optional ping (a third-party store's)."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name == "ping":
            raise AttributeError(name)
        return getattr(self._store, name)


def test_a_store_without_ping_is_measured_without_a_floor() -> None:
    ledger = Ledger(_NoPing(MemoryStore()), namespace="bench")
    report = run_bench(ledger, n=5)
    assert not report.floor
    assert [f.name for f in report.figures] == [m for m in MEASURES if m != "floor"]
    assert all(f.ratio is None and f.samples == 5 for f in report.figures)


@pytest.mark.parametrize("options", [{"n": 0}, {"n": 5, "batch": 0}, {"n": 5, "warmup": -1}])
def test_bad_counts_are_refused_before_anything_is_written(options: dict[str, int]) -> None:
    ledger = Ledger(MemoryStore(), namespace="bench")
    with pytest.raises(UsageError):
        run_bench(ledger, **options)
    assert ledger.jobs().jobs == ()
