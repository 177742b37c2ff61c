"""``run_bench``: what the ledger costs on its store, as ratios to that store's floor.

The floor is ``store.ping()`` (see ``Pingable``): the cheapest round trip the server
answers, through the same pool and driver as every operation. Each measure is wall time in
the calling thread, the ledger's own Python included:

- ``floor``: ``store.ping()``;
- ``fresh``: ``ledger.claim(new_key)`` and ``claim.commit(result)``, explicit;
- ``decorated``: the first call of an ``@ledger.idempotent`` handler (claim, handler,
  commit; the decorator's defaults, heartbeat on);
- ``replay``: ``ledger.claim(committed_key)`` answering ``Replay``, and its ``.result()``;
- ``status``: ``ledger.status(committed_key)``, the job and its attempts.

The measures run interleaved: a warm-up of every measure first, then rounds of one batch
of each, in an order rotated every round, so drift and noise fall on all of them alike.
p50 and p99 are nearest-rank percentiles; a ratio is a p50 over the floor's p50.

Every key carries the run's id, so a run never touches a job it did not write, even in a
namespace that has others. Its jobs stay for the ledger's retention: nothing here deletes.
"""

from __future__ import annotations

import gc
import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .. import Claim, Ledger, Replay, StoreProtocolError, UsageError
from ..store import Pingable

__all__ = ["MEASURES", "BenchReport", "Figure", "figures", "percentile", "run_bench"]

FLOOR = "floor"
MEASURES = {
    FLOOR: "store.ping(): the store's cheapest round trip",
    "fresh": "claim of a new key + commit, explicit",
    "decorated": "first call of an @idempotent handler",
    "replay": "claim of a committed key + .result()",
    "status": "status of a committed key",
}
HANDLER = "rill-bench"  # the decorated handler's name: its jobs are HANDLER/KEY
RESULT = {"uri": "s3://media/video-A/1/h264-v2.mp4", "frames": 240, "bytes": 1048576}
_REPLAY_KEYS = 100  # committed keys that replay and status cycle through


@dataclass(frozen=True, slots=True)
class Figure:
    """One measure: its samples' p50 and p99 in microseconds, and p50 / the floor's p50
    (``ratio``, None when the store has no floor)."""

    name: str
    what: str
    samples: int
    p50_us: float
    p99_us: float
    ratio: float | None


@dataclass(frozen=True, slots=True)
class BenchReport:
    namespace: str
    n: int  # timed samples per measure
    warmup: int  # untimed runs of each measure first
    batch: int  # runs of one measure in a row, within a round
    floor: bool  # whether the store answers ping()
    figures: tuple[Figure, ...]
    written: int  # jobs the run wrote, all committed, in ``namespace``
    retention: timedelta  # how long they are kept at least (the ledger's retention)
    seconds: float  # the whole run, warm-up included


def percentile(samples: Sequence[int], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of nanosecond ``samples``, in µs."""
    if not samples:
        raise UsageError("a percentile of no samples: measure at least one")
    if not 0 < q <= 100:
        raise UsageError(f"a percentile is above 0 and at most 100, got {q!r}")
    ordered = sorted(samples)
    return ordered[math.ceil(len(ordered) * q / 100) - 1] / 1000


def figures(samples: Mapping[str, Sequence[int]]) -> tuple[Figure, ...]:
    """Each measure's percentiles, in ``MEASURES`` order, with its ratio to ``floor``."""
    floor = percentile(samples[FLOOR], 50) if FLOOR in samples else None
    found = []
    for name, what in MEASURES.items():
        if name not in samples:
            continue
        p50 = percentile(samples[name], 50)
        # A floor below the clock's resolution has no ratio worth printing.
        ratio = p50 / floor if floor else None
        found.append(
            Figure(name, what, len(samples[name]), p50, percentile(samples[name], 99), ratio)
        )
    return tuple(found)


def _transcode(key: str) -> dict[str, Any]:
    return RESULT


class _Run:
    """The measures of one run: each call runs its operation once and returns its ns."""

    def __init__(self, ledger: Ledger, replays: int) -> None:
        self.ledger = ledger
        self.run_id = uuid.uuid4().hex[:12]
        self.seq = 0
        self.written = 0
        self.handler = ledger.idempotent(key=lambda key: key, name=HANDLER)(_transcode)
        self.committed = [self._commit(self._key("replay")) for _ in range(replays)]

    def measures(self) -> dict[str, Callable[[], int]]:
        found: dict[str, Callable[[], int]] = {}
        store = self.ledger.store
        if isinstance(store, Pingable):
            found[FLOOR] = lambda: _timed(store.ping)
        return found | {
            "fresh": self.fresh,
            "decorated": self.decorated,
            "replay": self.replay,
            "status": self.status,
        }

    def _key(self, kind: str) -> str:
        self.seq += 1
        return f"bench-{self.run_id}-{kind}-{self.seq}"

    def _commit(self, key: str) -> str:
        claim = self.ledger.claim(key)
        if not isinstance(claim, Claim):
            raise StoreProtocolError(f"a first claim of the new key {key!r} answered {claim!r}")
        claim.commit(RESULT)
        self.written += 1
        return key

    def fresh(self) -> int:
        key = self._key("fresh")
        start = time.perf_counter_ns()
        claim = self.ledger.claim(key)
        if isinstance(claim, Claim):
            claim.commit(RESULT)
        took = time.perf_counter_ns() - start
        if not isinstance(claim, Claim):
            raise StoreProtocolError(f"a first claim of the new key {key!r} answered {claim!r}")
        self.written += 1
        return took

    def decorated(self) -> int:
        took = _timed(lambda: self.handler(self._key("decorated")))
        self.written += 1
        return took

    def replay(self) -> int:
        key = self.committed[self.seq % len(self.committed)]
        self.seq += 1
        start = time.perf_counter_ns()
        outcome = self.ledger.claim(key)
        value = outcome.result() if isinstance(outcome, Replay) else None
        took = time.perf_counter_ns() - start
        if value != RESULT:
            raise StoreProtocolError(f"a claim of the committed key {key!r} answered {outcome!r}")
        return took

    def status(self) -> int:
        key = self.committed[self.seq % len(self.committed)]
        self.seq += 1
        start = time.perf_counter_ns()
        found = self.ledger.status(key)
        took = time.perf_counter_ns() - start
        if found is None:
            raise StoreProtocolError(f"the committed key {key!r} has no status")
        return took


def _timed(call: Callable[[], object]) -> int:
    start = time.perf_counter_ns()
    call()
    return time.perf_counter_ns() - start


def _rounds(measures: Mapping[str, Callable[[], int]], n: int, batch: int) -> dict[str, list[int]]:
    """``n`` samples of each measure, a batch of each per round, rotated every round."""
    names = list(measures)
    samples: dict[str, list[int]] = {name: [] for name in names}
    for r in range(math.ceil(n / batch)):
        gc.collect()  # between rounds, not inside one
        turn = r % len(names)
        for name in names[turn:] + names[:turn]:
            take = min(batch, n - len(samples[name]))
            samples[name].extend(measures[name]() for _ in range(take))
    return samples


def run_bench(ledger: Ledger, *, n: int, batch: int = 50, warmup: int | None = None) -> BenchReport:
    """Measure ``n`` samples of every measure on ``ledger``'s store (see the module docs);
    ``warmup`` untimed runs of each first (default: ``min(n, 200)``)."""
    for name, value in (("n", n), ("batch", batch)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise UsageError(f"{name} must be a positive int, got {value!r}")
    warm = min(n, 200) if warmup is None else warmup
    if not isinstance(warm, int) or isinstance(warm, bool) or warm < 0:
        raise UsageError(f"warmup must be an int of 0 or more, got {warmup!r}")
    start = time.perf_counter()
    run = _Run(ledger, min(n, _REPLAY_KEYS))
    measures = run.measures()
    if warm:
        _rounds(measures, warm, min(batch, warm))
    samples = _rounds(measures, n, min(batch, n))
    return BenchReport(
        namespace=ledger.namespace,
        n=n,
        warmup=warm,
        batch=min(batch, n),
        floor=FLOOR in measures,
        figures=figures(samples),
        written=run.written,
        retention=ledger.retention,
        seconds=time.perf_counter() - start,
    )
