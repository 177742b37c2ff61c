#!/usr/bin/env python
"""Redis Cluster throughput: 64 concurrent clients' fresh calls on 1 and on 3 primaries.

    make bench-cluster                                  # CLUSTER_ARGS to change the defaults
    .venv/bin/python benchmarks/bench_cluster.py [--clients 64] [--seconds 5] [--rounds 5]
        [--primaries 1,3] [--modes asyncio,threads]

It starts one Redis Cluster per ``--primaries`` entry (``rill_executor_redis.testing``: each
``redis-server`` on a free port, no replicas, no persistence, stopped at the end), all of
them before the first measure, so the rounds can alternate between them. In each round, for
each mode and each Cluster (their order reversed every other round, so a drift of the
machine's load falls on both), ``--clients`` concurrent clients run for ``--seconds`` doing:

- **rill fresh**: a first call of an ``@ledger.idempotent`` handler (``heartbeat=False``),
  a distinct business key every call, through the store opened by its
  ``redis+cluster://`` URL: a claim and a commit, two ``EVALSHA`` round trips to the
  primary that holds the job's slot;
- **floor**: the same clients, through a plain redis-py Cluster client, sending two ``SET``s
  (as many round trips) on two keys named as a job's are (``job_keys`` of a SHA-256 digest,
  one hash tag), so they spread over the slots and the primaries as jobs do.

``asyncio``: one event loop, ``AsyncLedger`` on ``AsyncRedisStore`` (floor:
``redis.asyncio.cluster.RedisCluster``), ``--clients`` tasks. ``threads``: ``Ledger`` on
``RedisStore`` (floor: ``redis.cluster.RedisCluster``), ``--clients`` threads. One client
process either way: the one running this script.

Every window is measured whole: calls per second; the CPU seconds of this process and of
each ``redis-server`` (``/proc/<pid>/stat``, utime + stime), the seconds their threads
waited runnable for a core (``/proc/<pid>/task/*/schedstat``) and the whole machine's busy
time (``/proc/stat``), each over the window's wall time (1.00 = one core all along); and
each primary's own ``INFO commandstats`` after a ``CONFIG RESETSTAT`` (calls, µs a call).
It prints medians over the rounds (min-max), the ratios of 3 to 1 primaries for the
library and for the floor, the library against the floor, and where the CPU went. It
asserts nothing: figures belong in a report, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
import redis.asyncio.cluster
import redis.cluster
import redis.utils

from rill_executor import AsyncLedger, Ledger
from rill_executor_redis import AsyncRedisStore, RedisStore, job_keys
from rill_executor_redis.testing import RedisCluster

CLOCK_TICK = os.sysconf("SC_CLK_TCK")
ARMS = ("floor", "rill fresh")
MODES = ("asyncio", "threads")
VALUE = b'{"ok":1}'


# -- what a window costs ---------------------------------------------------------------------


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far, all its threads, ended ones too."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK  # utime, stime


def process_wait(pid: int) -> float:
    """Seconds the threads of ``pid`` that are alive now spent runnable but waiting for a core
    (the scheduler's run-queue delay, ``/proc/<pid>/task/*/schedstat``, second field)."""
    waited = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as stat:
                waited += int(stat.read().split()[1])
        except FileNotFoundError:  # the thread ended meanwhile
            continue
    return waited / 1e9


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of every core so far, from ``/proc/stat``."""
    with open("/proc/stat") as stat:
        ticks = [int(n) for n in stat.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    total = sum(ticks[:8])  # guest time is counted in user already
    return (total - idle) / CLOCK_TICK, total / CLOCK_TICK


@dataclass
class Snapshot:
    """CPU and run-queue seconds of the client (first) and each primary, and the machine's."""

    cpu: list[float]
    wait: list[float]
    machine: tuple[float, float]
    at: float


@dataclass
class Window:
    """One arm's run on one Cluster in one mode: what it did and what it cost, in seconds
    over ``wall``; index 0 of ``cpu`` and ``wait`` is the client, then each primary."""

    calls: int
    wall: float
    cpu: list[float]
    wait: list[float]
    machine_busy: float  # cores busy on average over the window, every process counted
    node_calls: list[int]  # the arm's commands each primary ran
    node_usec: list[float]  # their server µs a call on each primary

    @property
    def rate(self) -> float:
        return self.calls / self.wall

    def cores(self, seconds: list[float], first: int, last: int | None = None) -> float:
        """Cores' worth of ``seconds[first:last]`` over the window (1.00 = one, all along)."""
        return sum(seconds[first:last]) / self.wall

    @property
    def others(self) -> float:
        """Cores busy with processes other than the client and the primaries."""
        return self.machine_busy - self.cores(self.cpu, 0)


@dataclass
class Meter:
    """The processes and counters of one Cluster, read before and after a window."""

    cluster: RedisCluster
    admins: list[redis.Redis] = field(init=False)

    def __post_init__(self) -> None:
        self.admins = [node.client() for node in self.cluster.nodes]

    def pids(self) -> list[int]:
        return [os.getpid()] + [
            node.process.pid for node in self.cluster.nodes if node.process is not None
        ]

    def snapshot(self) -> Snapshot:
        pids = self.pids()
        return Snapshot(
            cpu=[process_cpu(pid) for pid in pids],
            wait=[process_wait(pid) for pid in pids],
            machine=machine_cpu(),
            at=time.perf_counter(),
        )

    def start(self) -> Snapshot:
        for admin in self.admins:
            admin.config_resetstat()
        return self.snapshot()

    def stop(self, before: Snapshot, calls: int, arm: str) -> Window:
        after = self.snapshot()
        wall = after.at - before.at
        busy, total = after.machine[0] - before.machine[0], after.machine[1] - before.machine[1]
        command = "cmdstat_evalsha" if arm == "rill fresh" else "cmdstat_set"
        stats = [admin.info("commandstats").get(command, {}) for admin in self.admins]
        return Window(
            calls=calls,
            wall=wall,
            cpu=[a - b for a, b in zip(after.cpu, before.cpu, strict=True)],
            wait=[a - b for a, b in zip(after.wait, before.wait, strict=True)],
            machine_busy=busy / max(total, 1e-9) * (os.cpu_count() or 1),
            node_calls=[int(s.get("calls", 0)) for s in stats],
            node_usec=[float(s.get("usec_per_call", 0.0)) for s in stats],
        )

    def close(self) -> None:
        for admin in self.admins:
            admin.close()


# -- the clients -----------------------------------------------------------------------------


def floor_keys(tag: str, i: int) -> tuple[str, str]:
    """The two keys a job would have, named by a digest as job ids are: the same spread."""
    return job_keys(hashlib.sha256(f"{tag}{i}".encode()).hexdigest())


def store_url(cluster: RedisCluster) -> str:
    return cluster.url + "?durability=ignore"  # the benchmark's Cluster keeps nothing on disk


class AsyncArms:
    """The asyncio arms on one Cluster: the decorated handler and the floor client."""

    def __init__(self, cluster: RedisCluster) -> None:
        self.store = AsyncRedisStore.from_url(store_url(cluster))
        ledger = AsyncLedger(self.store, namespace=f"bench-{uuid.uuid4().hex[:8]}", lease=30)

        @ledger.idempotent(name="handler", key=lambda order: order["id"], heartbeat=False)
        async def handler(order: dict[str, Any]) -> dict[str, Any]:
            return {"ok": order["id"]}

        self.handler = handler
        self.client = redis.asyncio.cluster.RedisCluster(
            host="127.0.0.1", port=cluster.nodes[0].port
        )

    def call(self, arm: str, tag: str) -> Callable[[int], Awaitable[object]]:
        if arm == "rill fresh":
            return lambda i: self.handler({"id": f"{tag}{i}"})

        async def floor(i: int) -> object:
            record, history = floor_keys(tag, i)
            await self.client.set(record, VALUE)
            return await self.client.set(history, VALUE)

        return floor

    async def connect(self) -> None:
        """The floor client's slot map, loaded once before the burst: redis-py lets a burst
        of first calls race to load it (the store does this itself)."""
        await self.client.initialize()

    async def close(self) -> None:
        await self.store.close()
        await self.client.aclose()


class SyncArms:
    """The same arms for threads: ``Ledger`` on ``RedisStore``, a sync Cluster client."""

    def __init__(self, cluster: RedisCluster) -> None:
        self.store = RedisStore.from_url(store_url(cluster))
        ledger = Ledger(self.store, namespace=f"bench-{uuid.uuid4().hex[:8]}", lease=30)

        @ledger.idempotent(name="handler", key=lambda order: order["id"], heartbeat=False)
        def handler(order: dict[str, Any]) -> dict[str, Any]:
            return {"ok": order["id"]}

        self.handler = handler
        self.client = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port)

    def call(self, arm: str, tag: str) -> Callable[[int], object]:
        if arm == "rill fresh":
            return lambda i: self.handler({"id": f"{tag}{i}"})

        def floor(i: int) -> object:
            record, history = floor_keys(tag, i)
            self.client.set(record, VALUE)
            return self.client.set(history, VALUE)

        return floor

    def close(self) -> None:
        self.store.close()
        self.client.close()


async def run_tasks(call: Callable[[int], Awaitable[object]], clients: int, seconds: float) -> int:
    """Calls completed by ``clients`` tasks, each calling until ``seconds`` have passed."""
    counter = itertools.count()
    deadline = time.perf_counter() + seconds

    async def client() -> int:
        done = 0
        while time.perf_counter() < deadline:
            await call(next(counter))
            done += 1
        return done

    return sum(await asyncio.gather(*(client() for _ in range(clients))))


def run_threads(
    pool: ThreadPoolExecutor, call: Callable[[int], object], clients: int, seconds: float
) -> int:
    """The same with ``clients`` threads of a pool that outlives the window (its threads'
    run-queue delay is read from the living threads)."""
    counter = itertools.count()  # next() on it is atomic under the GIL
    deadline = time.perf_counter() + seconds

    def client() -> int:
        done = 0
        while time.perf_counter() < deadline:
            call(next(counter))
            done += 1
        return done

    return sum(future.result() for future in [pool.submit(client) for _ in range(clients)])


# -- the run ---------------------------------------------------------------------------------


@dataclass
class Bench:
    clusters: dict[int, RedisCluster]
    clients: int
    seconds: float
    runner: asyncio.Runner
    meters: dict[int, Meter] = field(init=False)
    async_arms: dict[int, AsyncArms] = field(init=False)
    sync_arms: dict[int, SyncArms] = field(init=False)
    windows: dict[tuple[str, int, str], list[Window]] = field(default_factory=dict)
    tags: Iterator[int] = field(default_factory=itertools.count)
    pool: ThreadPoolExecutor = field(init=False)

    def __post_init__(self) -> None:
        self.pool = ThreadPoolExecutor(max_workers=self.clients)
        self.meters = {n: Meter(c) for n, c in self.clusters.items()}
        self.async_arms = {n: AsyncArms(c) for n, c in self.clusters.items()}
        for arms in self.async_arms.values():
            self.runner.run(arms.connect())
        self.sync_arms = {n: SyncArms(c) for n, c in self.clusters.items()}

    def window(self, mode: str, primaries: int, arm: str, seconds: float) -> Window:
        tag = f"w{next(self.tags)}-"
        meter = self.meters[primaries]
        if mode == "asyncio":
            call = self.async_arms[primaries].call(arm, tag)
            before = meter.start()
            calls = self.runner.run(run_tasks(call, self.clients, seconds))
        else:
            sync_call = self.sync_arms[primaries].call(arm, tag)
            before = meter.start()
            calls = run_threads(self.pool, sync_call, self.clients, seconds)
        return meter.stop(before, calls, arm)

    def warm_up(self, modes: list[str]) -> None:
        """Connections, slot maps, scripts: one short untimed window of every arm."""
        for mode in modes:
            for primaries in self.clusters:
                for arm in ARMS:
                    self.window(mode, primaries, arm, 1.0)

    def round(self, r: int, modes: list[str]) -> None:
        order = list(self.clusters) if r % 2 == 0 else list(reversed(self.clusters))
        for mode in modes:
            for primaries in order:
                for arm in ARMS:
                    got = self.window(mode, primaries, arm, self.seconds)
                    self.windows.setdefault((mode, primaries, arm), []).append(got)
                    print(
                        f"  round {r + 1}  {mode:<8}{primaries} primaries  {arm:<11}"
                        f"{got.rate:>9.0f} calls/s   client {got.cores(got.cpu, 0, 1):.2f}"
                        f" (waiting {got.cores(got.wait, 0, 1):.2f})"
                        f"  primaries {got.cores(got.cpu, 1):.2f}"
                        f" (waiting {got.cores(got.wait, 1):.2f})"
                        f"  others {got.others:.2f}  machine {got.machine_busy:.2f} cores",
                        flush=True,
                    )

    def close(self) -> None:
        for arms in self.async_arms.values():
            self.runner.run(arms.close())
        for sync in self.sync_arms.values():
            sync.close()
        for meter in self.meters.values():
            meter.close()
        self.pool.shutdown()


# -- the report ------------------------------------------------------------------------------


def spread(values: list[float], digits: int = 2) -> str:
    """Median (min-max)."""
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:.{digits}f}"
    return f"{med:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def per_round(
    over: list[Window], under: list[Window], measure: Callable[[Window], float]
) -> list[float]:
    """``measure`` of ``over``'s windows divided by ``under``'s, round by round."""
    return [measure(a) / measure(b) for a, b in zip(over, under, strict=True)]


def rate(w: Window) -> float:
    return w.rate


def client_per_call(w: Window) -> float:
    return w.cpu[0] / w.calls


def primaries_per_call(w: Window) -> float:
    return sum(w.cpu[1:]) / w.calls


def print_table(bench: Bench, mode: str) -> None:
    print(
        f"  {'arm':<12}{'primaries':>10}{'calls/s':>22}{'client':>18}{'waiting':>18}"
        f"{'primaries':>18}{'waiting':>18}{'others':>18}{'machine':>18}"
    )
    for arm in ARMS:
        for n in sorted(bench.clusters):
            ws = bench.windows[(mode, n, arm)]
            columns = [
                [w.cores(w.cpu, 0, 1) for w in ws],
                [w.cores(w.wait, 0, 1) for w in ws],
                [w.cores(w.cpu, 1) for w in ws],
                [w.cores(w.wait, 1) for w in ws],
                [w.others for w in ws],
                [w.machine_busy for w in ws],
            ]
            print(
                f"  {arm:<12}{n:>10}{spread([w.rate for w in ws], 0):>22}"
                + "".join(f"{spread(column):>18}" for column in columns)
            )


def print_ratios(bench: Bench, mode: str) -> None:
    sizes = sorted(bench.clusters)
    low, high = sizes[0], sizes[-1]
    windows = {(n, arm): bench.windows[(mode, n, arm)] for n in sizes for arm in ARMS}
    print("  ratios (round by round, then median)")
    for arm in ARMS:
        scale = per_round(windows[(high, arm)], windows[(low, arm)], rate)
        print(
            f"    {arm:<12} {high} / {low} primaries   {spread(scale)}   (linear: {high / low:g})"
        )
    for n in sizes:
        own = per_round(windows[(n, "rill fresh")], windows[(n, "floor")], rate)
        print(f"    rill fresh / floor, {n} primaries   {spread(own)}")
    for arm in ARMS:
        client = per_round(windows[(high, arm)], windows[(low, arm)], client_per_call)
        server = per_round(windows[(high, arm)], windows[(low, arm)], primaries_per_call)
        print(
            f"    {arm:<12} CPU a call took, {high} / {low} primaries: client"
            f" {spread(client)}, primaries together {spread(server)}"
        )


def print_time(bench: Bench, mode: str) -> None:
    print("  where the time goes (medians): CPU µs a call of the client and of each primary;")
    print("  [the primary's CPU µs a call; its share of the commands; its own µs a command]")
    for arm in ARMS:
        command = "EVALSHA" if arm == "rill fresh" else "SET"
        for n in sorted(bench.clusters):
            ws = bench.windows[(mode, n, arm)]
            client = statistics.median(client_per_call(w) * 1e6 for w in ws)
            nodes = [
                (
                    statistics.median(w.cpu[k + 1] / w.calls * 1e6 for w in ws),
                    statistics.median(w.node_calls[k] / max(sum(w.node_calls), 1) for w in ws),
                    statistics.median(w.node_usec[k] for w in ws),
                )
                for k in range(n)
            ]
            per_node = "  ".join(
                f"[{cpu:.0f} µs; {share:.0%} of {command}; {usec:.1f} µs]"
                for cpu, share, usec in nodes
            )
            print(f"    {arm:<12}{n} p   client {client:>6.0f} µs   {per_node}")
    low = min(bench.clusters)
    print(f"  what one core runs, from the CPU a call took ({low} primaries):")
    for arm in ARMS:
        ws = bench.windows[(mode, low, arm)]
        client = statistics.median(1 / client_per_call(w) for w in ws)
        server = statistics.median(1 / primaries_per_call(w) for w in ws)
        print(
            f"    {arm:<12}client {client:>7.0f} calls/s, primaries {server:>7.0f} calls/s:"
            f" {server / client:.1f} client cores keep one primary's core busy"
        )


def report(bench: Bench, modes: list[str], rounds: int) -> None:
    print(
        f"\n{bench.clients} concurrent clients, {bench.seconds:g} s a window, median of"
        f" {rounds} rounds (min-max). In cores (1.00 = one core all along the window): the"
        "\nclient process and the primaries on a core, and waiting for one (runnable, no core"
        "\nfree; with threads, the sum over the client's threads); others: every other process"
        "\nof the machine; machine: every core's busy time"
    )
    for mode in modes:
        print(f"\n{mode}")
        print_table(bench, mode)
        print_ratios(bench, mode)
        print_time(bench, mode)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--primaries", default="1,3", help="comma-separated Cluster sizes")
    parser.add_argument("--modes", default=",".join(MODES), help="asyncio, threads or both")
    args = parser.parse_args()
    sizes = sorted({int(n) for n in args.primaries.split(",")})
    modes = [m for m in args.modes.split(",") if m]
    if not set(modes) <= set(MODES):
        parser.error(f"--modes: one or more of {', '.join(MODES)}")

    load = os.getloadavg()
    parser_kind = "hiredis" if redis.utils.HIREDIS_AVAILABLE else "pure-Python"
    with tempfile.TemporaryDirectory(prefix="rill-bench-cluster-") as folder:
        clusters: dict[int, RedisCluster] = {}
        try:
            for n in sizes:
                (Path(folder) / f"p{n}").mkdir()
                clusters[n] = RedisCluster(Path(folder) / f"p{n}", masters=n)
            with clusters[sizes[0]].nodes[0].client() as admin:
                version = admin.info("server")["redis_version"]
            print(
                f"Redis {version} Clusters of {', '.join(map(str, sizes))} primaries on"
                f" 127.0.0.1 (no replicas, no persistence); redis-py {redis.__version__}"
                f" ({parser_kind} parser); {os.cpu_count()} cores; load average at the start"
                f" {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
            )
            with asyncio.Runner() as runner:
                bench = Bench(clusters, args.clients, args.seconds, runner)
                try:
                    bench.warm_up(modes)
                    for r in range(args.rounds):
                        bench.round(r, modes)
                    report(bench, modes, args.rounds)
                finally:
                    bench.close()
        finally:
            for cluster in clusters.values():
                cluster.stop()
    end = os.getloadavg()
    print(f"\nload average at the end {end[0]:.2f} {end[1]:.2f} {end[2]:.2f}")


if __name__ == "__main__":
    main()
