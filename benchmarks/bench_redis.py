"""Redis store benchmark: rill-executor against Powertools' idempotency and a PING floor.

    .venv/bin/python benchmarks/bench_redis.py [--url redis://127.0.0.1:6379/0]
        [--calls 3000] [--concurrency 64] [--async-calls 20000] [--rounds 5]

Needs aws-lambda-powertools, a benchmark-only dependency (pip install aws-lambda-powertools).

Latency: every iteration times one call of each arm, in a random order, on one Redis: a
PING (the floor: one round trip through redis-py), rill-executor's decorator (claim +
commit with attempt history and fencing; replay in one script), the same with the
automatic heartbeat the decorator turns on by default, and Powertools'
``idempotent_function`` on ``CachePersistenceLayer`` (SET NX + SET; replay SET NX + GET).
Interleaving makes machine noise hit every arm alike, so the ratios mean more than the
absolute figures. Throughput: 64 concurrent asyncio calls of the ``AsyncLedger`` decorator
against 64 concurrent asyncio PINGs, in alternating rounds. Server time: Redis's own
``INFO commandstats`` per operation (claim, heartbeat, commit, replay, status), one
operation at a time after ``CONFIG RESETSTAT``.

Prints p50/p99 and ratios. It asserts nothing: figures belong in a report, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, cast

import redis
import redis.asyncio
import redis.utils
from _placement import PLACES, placed

from rill_executor import AsyncClaim, AsyncLedger, Claim, Ledger
from rill_executor_redis import AsyncRedisStore, RedisStore

Arm = Callable[[int], object]


class FakeLambdaContext:
    """What a Lambda would give Powertools: the time left sets its in-progress expiry."""

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def _store_url(url: str) -> str:
    return url + ("&" if "?" in url else "?") + "durability=ignore"  # reported below instead


def rill_arms(url: str) -> tuple[Arm, Arm, Arm, RedisStore]:
    store = RedisStore.from_url(_store_url(url))
    ledger = Ledger(store, namespace=f"bench-{uuid.uuid4().hex[:8]}", lease=30, retention=3600)

    def handler(order: dict[str, Any]) -> dict[str, Any]:
        return {"ok": order["id"], "amount": order["amount"]}

    plain = ledger.idempotent(name="handler", key=lambda order: order["id"], heartbeat=False)(
        handler
    )
    beating = ledger.idempotent(name="handler", key=lambda order: f"hb-{order['id']}")(handler)

    def explicit(i: int) -> object:
        """The store's share without the decorator: ``ledger.claim``, then commit on a
        claim (a replay returns after the claim)."""
        outcome = ledger.claim(f"x{i}")
        if isinstance(outcome, Claim):
            outcome.commit({"ok": i, "amount": i})
        return outcome

    return (
        lambda i: plain({"id": f"o{i}", "amount": i}),
        lambda i: beating({"id": f"o{i}", "amount": i}),
        explicit,
        store,
    )


def server_times(url: str, calls: int) -> dict[str, float]:
    """Redis's own time per operation: ``INFO commandstats`` (``evalsha`` usec_per_call)
    after ``CONFIG RESETSTAT``, one operation and one variant at a time, so a change to a
    script is measured where it runs rather than through the client."""
    admin = redis.Redis.from_url(url)
    ledger = Ledger(
        RedisStore.from_url(_store_url(url)),
        namespace=f"bench-{uuid.uuid4().hex[:8]}",
        lease=30,
        retention=3600,
    )
    short = Ledger(ledger.store, namespace=ledger.namespace + "-t", lease=0.001, retention=3600)
    keys = [f"k{i}" for i in range(calls)]
    claims: list[Claim] = []
    expired: list[Claim] = []

    def claim_new() -> None:
        claims.extend(cast(Claim, ledger.claim(key)) for key in keys)

    def commit_all() -> None:
        for claim in claims:
            claim.commit({"ok": claim.key})

    def short_claims() -> None:
        expired.extend(cast(Claim, short.claim(key)) for key in keys)
        time.sleep(0.01)  # every lease has run out

    traced = "00-" + "a1" * 16 + "-" + "b2" * 8 + "-01"
    phases: dict[str, Callable[[], object]] = {
        "claim (new key)": claim_new,
        "heartbeat": lambda: [claim.heartbeat() for claim in claims],
        "claim (in progress)": lambda: [ledger.claim(key) for key in keys],
        "claim (conflict)": lambda: [ledger.claim(key, fingerprint="f" * 64) for key in keys],
        "commit": commit_all,
        "claim (replay)": lambda: [ledger.claim(key) for key in keys],
        "status": lambda: [ledger.status(key) for key in keys],
        "claim (new key, traced + origin)": lambda: [
            ledger.claim(f"t{key}", trace=traced, origin={"task": key}) for key in keys
        ],
        "claim (takeover of an expired lease)": lambda: [short.claim(key) for key in keys],
    }
    print(f"\nserver time per operation (INFO commandstats evalsha, {calls} calls each)")
    times: dict[str, float] = {}
    for name, phase in phases.items():
        if name.startswith("claim (takeover"):
            short_claims()
        admin.config_resetstat()
        phase()
        stats = admin.info("commandstats").get("cmdstat_evalsha", {})
        times[name] = float(stats.get("usec_per_call", 0.0))
        print(f"  {name:<40}{times[name]:>10.1f} µs")
    for name in ("set", "hset", "get", "ping"):  # the floor, on the same server
        admin.config_resetstat()
        for key in keys[:500]:
            getattr(admin, name)(
                *{"set": (key, "v"), "hset": (key + "h", "f", "v"), "get": (key,), "ping": ()}[name]
            )
        stats = admin.info("commandstats").get(f"cmdstat_{name}", {})
        print(f"  {name.upper():<40}{float(stats.get('usec_per_call', 0.0)):>10.1f} µs")
    ledger.close()
    admin.close()
    return times


def powertools_arm(url: str) -> Arm:
    from aws_lambda_powertools.utilities.idempotency import (
        IdempotencyConfig,
        idempotent_function,
    )
    from aws_lambda_powertools.utilities.idempotency.persistence.cache import (
        CachePersistenceLayer,
    )

    client = redis.Redis.from_url(url, decode_responses=True)  # as Powertools documents
    config = IdempotencyConfig(expires_after_seconds=3600)
    config.register_lambda_context(FakeLambdaContext())  # type: ignore[arg-type]
    prefix = f"bench-{uuid.uuid4().hex[:8]}"

    @idempotent_function(  # type: ignore[untyped-decorator]
        data_keyword_argument="order",
        persistence_store=CachePersistenceLayer(client=client),  # type: ignore[arg-type]
        config=config,
        key_prefix=prefix,
    )
    def handler(order: dict[str, Any]) -> dict[str, Any]:
        return {"ok": order["id"], "amount": order["amount"]}

    return lambda i: handler(order={"id": f"o{i}", "amount": i})


def interleaved(arms: dict[str, Arm], indexes: list[int], batch: int = 1) -> dict[str, list[float]]:
    """Microseconds per call of each arm: ``batch`` calls of one arm, then the next, the
    arms in a new random order every round. Not a rotation: that keeps each arm behind the
    same other one, whose code leaves the processor's caches warm for some arms and cold
    for others (the arm after ``PING`` was 10 to 20 µs slower than the one after it)."""
    names = list(arms)
    samples: dict[str, list[float]] = {name: [] for name in names}
    order = random.Random(7)  # the same orders every run
    for start_at in range(0, len(indexes), batch):
        for name in order.sample(names, len(names)):
            for i in indexes[start_at : start_at + batch]:
                start = time.perf_counter_ns()
                arms[name](i)
                samples[name].append((time.perf_counter_ns() - start) / 1000)
    return samples


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(title: str, samples: dict[str, list[float]]) -> dict[str, tuple[float, float]]:
    print(f"\n{title}  (µs, {len(next(iter(samples.values())))} calls per arm, interleaved)")
    print(f"  {'arm':<34}{'p50':>10}{'p99':>10}")
    figures = {}
    for name, values in samples.items():
        figures[name] = (percentile(values, 0.50), percentile(values, 0.99))
        print(f"  {name:<34}{figures[name][0]:>10.1f}{figures[name][1]:>10.1f}")
    return figures


def ratio_line(what: str, a: tuple[float, float], b: tuple[float, float], target: float) -> None:
    p50, p99 = a[0] / b[0], a[1] / b[1]
    verdict = "meets" if p50 <= target else "MISSES"
    print(f"  {what:<44} p50 {p50:5.2f}x  p99 {p99:5.2f}x   (target <= {target}x: {verdict})")


async def throughput(
    calls: int, concurrency: int, call: Callable[[int], Awaitable[object]]
) -> float:
    """Calls per second of ``calls`` calls spread over ``concurrency`` tasks."""
    counter = iter(range(calls))

    async def worker() -> None:
        for i in counter:
            await call(i)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return calls / (time.perf_counter() - start)


async def async_rounds(url: str, calls: int, concurrency: int, rounds: int) -> None:
    """Throughput of 64 concurrent decorated calls (and of explicit claim + commit)
    against 64 concurrent PINGs, in alternating rounds."""
    ping_client = redis.asyncio.Redis.from_url(url)
    store = AsyncRedisStore.from_url(_store_url(url))
    ledger = AsyncLedger(store, namespace=f"bench-{uuid.uuid4().hex[:8]}", lease=30)

    @ledger.idempotent(name="handler", key=lambda order: order["id"], heartbeat=False)
    async def handler(order: dict[str, Any]) -> dict[str, Any]:
        return {"ok": order["id"]}

    async def ping(i: int) -> object:
        return await ping_client.ping()

    def fresh(prefix: str) -> Callable[[int], Awaitable[object]]:
        return lambda i: handler({"id": f"{prefix}{i}"})

    def explicit(prefix: str) -> Callable[[int], Awaitable[object]]:
        async def call(i: int) -> object:
            outcome = await ledger.claim(f"{prefix}{i}")
            if isinstance(outcome, AsyncClaim):
                await outcome.commit({"ok": i})
            return outcome

        return call

    await throughput(2000, concurrency, ping)  # warm up: connections, scripts
    await throughput(2000, concurrency, fresh("warm"))
    results: dict[str, list[float]] = {
        "PING": [],
        "rill fresh": [],
        "rill replay": [],
        "explicit claim + commit": [],
        "explicit replay": [],
    }
    for r in range(rounds):
        results["PING"].append(await throughput(calls, concurrency, ping))
        results["rill fresh"].append(await throughput(calls, concurrency, fresh(f"r{r}-")))
        results["rill replay"].append(await throughput(calls, concurrency, fresh(f"r{r}-")))
        each = explicit(f"x{r}-")
        results["explicit claim + commit"].append(await throughput(calls, concurrency, each))
        results["explicit replay"].append(await throughput(calls, concurrency, each))
    print(
        f"\nasyncio throughput, {concurrency} concurrent calls, {calls} calls per round,"
        f" median of {rounds} alternating rounds"
    )
    floor = statistics.median(results["PING"])
    targets = {"rill fresh": 0.4, "rill replay": 0.8}
    for name, values in results.items():
        value = statistics.median(values)
        line = f"  {name:<34}{value:>10.0f} calls/s   {value / floor:5.2f}x PING"
        if name in targets:
            verdict = "meets" if value / floor >= targets[name] else "MISSES"
            line += f"   (target >= {targets[name]}x: {verdict})"
        print(line)
    await store.close()
    await ping_client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--async-calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--batch", type=int, default=1, help="calls of one arm before the next (default: 1)"
    )
    parser.add_argument(
        "--place",
        choices=PLACES,
        default=None,
        help="pin this process and the local Redis server to one core (same) or to one each"
        " (apart); default: the scheduler decides",
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore", DeprecationWarning)  # Powertools' own, on import

    ping_client = redis.Redis.from_url(args.url)
    rill_fresh, rill_heartbeat, rill_explicit, store = rill_arms(args.url)
    powertools = powertools_arm(args.url)
    info = ping_client.info("server")
    parser_kind = "hiredis" if redis.utils.HIREDIS_AVAILABLE else "pure-Python"
    print(
        f"Redis {info['redis_version']} at {args.url}; redis-py {redis.__version__}"
        f" ({parser_kind} parser)"
    )
    print("deployment:", "; ".join(store.deployment().risks) or "no durability risks")
    arms: dict[str, Arm] = {
        "PING": lambda i: ping_client.ping(),
        "rill-executor": rill_fresh,
        "rill-executor + heartbeat": rill_heartbeat,
        "rill claim + commit (explicit)": rill_explicit,
        "Powertools CachePersistenceLayer": powertools,
    }
    with placed(args.place, lambda: [int(info["process_id"])]) as where:
        print(where)
        measure(args, arms)
    store.close()
    ping_client.close()


def measure(args: argparse.Namespace, arms: dict[str, Arm]) -> None:
    interleaved(arms, list(range(-500, 0)))  # warm-up: connections, scripts, imports
    fresh = report("fresh call", interleaved(arms, list(range(args.calls)), args.batch))
    replay = report(
        "replay of a completed key", interleaved(arms, list(range(args.calls)), args.batch)
    )

    print("\nratios")
    ratio_line(
        "fresh: rill / Powertools",
        fresh["rill-executor"],
        fresh["Powertools CachePersistenceLayer"],
        0.9,
    )
    ratio_line("fresh: rill / PING", fresh["rill-executor"], fresh["PING"], 2.5)
    ratio_line(
        "replay: rill / Powertools",
        replay["rill-executor"],
        replay["Powertools CachePersistenceLayer"],
        0.5,
    )
    ratio_line("replay: rill / PING", replay["rill-executor"], replay["PING"], 1.3)
    explicit, powertools_name = "rill claim + commit (explicit)", "Powertools CachePersistenceLayer"
    print("  the same for explicit ledger.claim + commit (the store's share, no decorator):")
    ratio_line("fresh: explicit / Powertools", fresh[explicit], fresh[powertools_name], 0.9)
    ratio_line("fresh: explicit / PING", fresh[explicit], fresh["PING"], 2.5)
    ratio_line("replay: explicit / Powertools", replay[explicit], replay[powertools_name], 0.5)
    ratio_line("replay: explicit / PING", replay[explicit], replay["PING"], 1.3)

    server_times(args.url, args.calls)
    asyncio.run(async_rounds(args.url, args.async_calls, args.concurrency, args.rounds))


if __name__ == "__main__":
    main()
