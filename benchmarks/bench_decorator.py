"""What the decorator adds to a call, on the in-memory store (no server, no network).

    .venv/bin/python benchmarks/bench_decorator.py [--rounds 40] [--batch 300]

Arms, interleaved round by round (in an order rotated each round) so machine noise hits them
alike, each call a fresh key:
an explicit ``claim`` + ``commit``; the decorated handler without heartbeat; the decorated
handler with its default heartbeat (lease / 3); the same three on ``AsyncLedger``. The
decorated arms also compute the call's fingerprint from its arguments and check the
result against the return annotation, which the explicit arm does not. Prints the median
microseconds per call and the difference to the explicit arm. It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from rill_executor import AsyncClaim, AsyncLedger, Claim, Ledger, fingerprint_of

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


def _rotated(arms: dict[str, T], r: int) -> list[tuple[str, T]]:
    """The arms in another order each round: none always runs first after the collection."""
    items = list(arms.items())
    return items[r % len(items) :] + items[: r % len(items)]


def sync_arms(rounds: int, batch: int) -> dict[str, list[float]]:
    ledger = Ledger("memory://", namespace="bench", lease=30, retention=3600)

    def handler(x: int) -> int:
        return x

    def explicit(i: int) -> None:
        claim = ledger.claim(f"e{i}", fingerprint=FINGERPRINT)
        assert isinstance(claim, Claim)
        claim.commit(i)

    arms: dict[str, Callable[[int], object]] = {
        "explicit claim + commit": explicit,
        "decorated, heartbeat=False": ledger.idempotent(key=lambda x: f"p{x}", heartbeat=False)(
            handler
        ),
        "decorated (default heartbeat)": ledger.idempotent(key=lambda x: f"h{x}")(handler),
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


async def async_arms(rounds: int, batch: int) -> dict[str, list[float]]:
    ledger = AsyncLedger("memory://", namespace="bench", lease=30, retention=3600)

    async def handler(x: int) -> int:
        return x

    async def explicit(i: int) -> None:
        claim = await ledger.claim(f"e{i}", fingerprint=FINGERPRINT)
        assert isinstance(claim, AsyncClaim)
        await claim.commit(i)

    arms: dict[str, Callable[[int], Awaitable[object]]] = {
        "explicit claim + commit": explicit,
        "decorated, heartbeat=False": ledger.idempotent(key=lambda x: f"p{x}", heartbeat=False)(
            handler
        ),
        "decorated (default heartbeat)": ledger.idempotent(key=lambda x: f"h{x}")(handler),
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--batch", type=int, default=300)
    args = parser.parse_args()
    _print("Ledger, memory://", sync_arms(args.rounds, args.batch))
    _print("AsyncLedger, memory://", asyncio.run(async_arms(args.rounds, args.batch)))


if __name__ == "__main__":
    main()
