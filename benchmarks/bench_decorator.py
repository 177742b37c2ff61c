"""What the decorator adds to a call, on the in-memory store (no server, no network), or on
the store of ``--url`` (a scratch one: its jobs stay until their retention, an hour).

    .venv/bin/python benchmarks/bench_decorator.py [--rounds 40] [--batch 300] [--parts]
        [--url memory://]

Arms, interleaved round by round (in an order rotated each round) so machine noise hits them
alike, each call a fresh key:
an explicit ``claim`` + ``commit``; the decorated handler without heartbeat; the decorated
handler with its default heartbeat (lease / 3); the same three on ``AsyncLedger``. The
decorated arms also compute the call's fingerprint from its arguments and check the
result against the return annotation, which the explicit arm does not. Prints the median
microseconds per call and the difference to the explicit arm. It asserts nothing.

``--parts`` instead adds the decorator's named costs to the explicit call one at a time,
interleaved the same way: the call's identity (key scoping, arguments by name and their
fingerprint, ``IdempotentSpec.identity``), the same work done between the claim and the
commit instead (on a store that does I/O, after the wait for the claim's reply), then the
result check (``commit`` through the return type's adapter), then the whole decorated
call; and times each part alone in a loop of its own, with no store call between.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

from rill_executor import AsyncClaim, AsyncLedger, Claim, Ledger, fingerprint_of
from rill_executor.integration import IdempotentOptions

FINGERPRINT = fingerprint_of({"x": 1})
T = TypeVar("T")
TARGET_US = 15  # what the decorator may add to an explicit claim + commit


def _print(title: str, samples: dict[str, list[float]]) -> None:
    medians = {name: statistics.median(times) for name, times in samples.items()}
    floor = next(iter(medians.values()))
    print(title)
    for name, us in medians.items():
        verdict = ""
        if us is not floor:
            meets = "meets" if us - floor <= TARGET_US else "MISSES"
            verdict = f"   (target <= +{TARGET_US} µs: {meets})"
        print(f"  {name:32s} {us:7.1f} µs/call  {us - floor:+6.1f} µs{verdict}")


def _settle() -> None:
    """Keep the jobs of earlier rounds out of the collector's way: the in-memory store holds
    every job the run made, which a real store would not, and a full collection over them
    would be charged to whichever arm happened to trigger it."""
    gc.collect()
    gc.freeze()


def _namespace() -> str:
    """A namespace of the run's own: a store's jobs of an earlier run stay until retention."""
    return f"bench-{uuid.uuid4().hex[:8]}"


def _rotated(arms: dict[str, T], r: int) -> list[tuple[str, T]]:
    """The arms in another order each round: none always runs first after the collection."""
    items = list(arms.items())
    return items[r % len(items) :] + items[: r % len(items)]


def sync_arms(url: str, rounds: int, batch: int) -> dict[str, list[float]]:
    ledger = Ledger(url, namespace=_namespace(), lease=30, retention=3600)

    def handler(x: int) -> int:
        return x

    def explicit(i: int) -> None:
        claim = ledger.claim(f"e{i}", fingerprint=FINGERPRINT)
        assert isinstance(claim, Claim)
        claim.commit(i)

    arms: dict[str, Callable[[int], object]] = {
        "explicit claim + commit": explicit,
        "decorated, heartbeat=False": ledger.idempotent(
            name="handler", key=lambda x: f"p{x}", heartbeat=False
        )(handler),
        "decorated (default heartbeat)": ledger.idempotent(name="handler", key=lambda x: f"h{x}")(
            handler
        ),
    }
    samples: dict[str, list[float]] = {name: [] for name in arms}
    keys = itertools.count()
    for r in range(rounds):
        _settle()
        for name, arm in _rotated(arms, r):
            start = time.perf_counter()
            for _ in range(batch):
                arm(next(keys))
            samples[name].append((time.perf_counter() - start) / batch * 1e6)
    ledger.close()
    return samples


async def async_arms(url: str, rounds: int, batch: int) -> dict[str, list[float]]:
    ledger = AsyncLedger(url, namespace=_namespace(), lease=30, retention=3600)

    async def handler(x: int) -> int:
        return x

    async def explicit(i: int) -> None:
        claim = await ledger.claim(f"e{i}", fingerprint=FINGERPRINT)
        assert isinstance(claim, AsyncClaim)
        await claim.commit(i)

    arms: dict[str, Callable[[int], Awaitable[object]]] = {
        "explicit claim + commit": explicit,
        "decorated, heartbeat=False": ledger.idempotent(
            name="handler", key=lambda x: f"p{x}", heartbeat=False
        )(handler),
        "decorated (default heartbeat)": ledger.idempotent(name="handler", key=lambda x: f"h{x}")(
            handler
        ),
    }
    samples: dict[str, list[float]] = {name: [] for name in arms}
    keys = itertools.count()
    for r in range(rounds):
        _settle()
        for name, arm in _rotated(arms, r):
            start = time.perf_counter()
            for _ in range(batch):
                await arm(next(keys))
            samples[name].append((time.perf_counter() - start) / batch * 1e6)
    await ledger.close()
    return samples


def part_arms(url: str, rounds: int, batch: int) -> tuple[dict[str, list[float]], dict[str, float]]:
    """The explicit call with the decorator's costs added one by one, and each cost alone."""
    ledger = Ledger(url, namespace=_namespace(), lease=30, retention=3600)

    def handler(x: int) -> int:
        return x

    spec = ledger.spec(
        handler, IdempotentOptions(key=lambda x: f"p{x}", heartbeat=False, name="handler")
    )
    decorated = ledger.idempotent(name="handler", key=lambda x: f"d{x}", heartbeat=False)(handler)

    def explicit(i: int) -> None:
        claim = ledger.claim(f"handler/e{i}", fingerprint=FINGERPRINT)
        assert isinstance(claim, Claim)
        claim.commit(i)

    def identity(i: int) -> None:
        key, fingerprint, _ = spec.identity((i,), {})
        claim = ledger.claim(key, fingerprint=fingerprint)
        assert isinstance(claim, Claim)
        claim.commit(i)

    def between(i: int) -> None:
        """The same work as ``identity`` (its answer unused), done between the two store
        calls instead of before them: what the work costs after a wait on the store."""
        claim = ledger.claim(f"handler/b{i}", fingerprint=FINGERPRINT)
        assert isinstance(claim, Claim)
        spec.identity((i,), {})
        claim.commit(i)

    def checked(i: int) -> None:
        key, fingerprint, _ = spec.identity((-i - 1,), {})
        claim = ledger.claim(key, fingerprint=fingerprint)
        assert isinstance(claim, Claim)
        claim.commit(i, adapter=spec.adapter)

    arms: dict[str, Callable[[int], object]] = {
        "explicit claim + commit": explicit,
        "+ identity": identity,
        "+ identity's work between claim and commit": between,
        "+ identity + result check": checked,
        "decorated, heartbeat=False": decorated,
    }
    samples: dict[str, list[float]] = {name: [] for name in arms}
    keys = itertools.count()
    for r in range(rounds):
        _settle()
        for name, arm in _rotated(arms, r):
            start = time.perf_counter()
            for _ in range(batch):
                arm(next(keys))
            samples[name].append((time.perf_counter() - start) / batch * 1e6)
    claim = ledger.claim(f"alone-{uuid.uuid4().hex}", fingerprint=FINGERPRINT)
    assert isinstance(claim, Claim)
    alone: dict[str, Callable[[int], object]] = {
        "identity": lambda i: spec.identity((i,), {}),
        "fingerprint_of({'x': i})": lambda i: fingerprint_of({"x": i}),
        "result check (commit_of with the adapter - without)": lambda i: claim.commit_of(
            i, adapter=spec.adapter
        ),
        "commit_of without the adapter": claim.commit_of,
    }
    each: dict[str, float] = {}
    for name, fn in alone.items():
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            for i in range(batch):
                fn(i)
            times.append((time.perf_counter() - start) / batch * 1e6)
        each[name] = statistics.median(times)
    ledger.close()
    return samples, each


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--batch", type=int, default=300)
    parser.add_argument("--url", default="memory://", help="the job store (default memory://)")
    parser.add_argument("--parts", action="store_true", help="the decorator's costs one by one")
    args = parser.parse_args()
    if args.parts:
        samples, alone = part_arms(args.url, args.rounds, args.batch)
        _print(f"Ledger, {args.url}, the decorator's costs added one by one", samples)
        print("each part alone, in a loop of its own")
        without = alone.pop("commit_of without the adapter")
        for name, us in alone.items():
            print(f"  {name:52s} {us - without if 'without' in name else us:6.1f} µs")
        return
    _print(f"Ledger, {args.url}", sync_arms(args.url, args.rounds, args.batch))
    _print(f"AsyncLedger, {args.url}", asyncio.run(async_arms(args.url, args.rounds, args.batch)))


if __name__ == "__main__":
    main()
