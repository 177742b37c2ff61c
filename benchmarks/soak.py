"""A long run at a steady rate: does anything grow?

    make soak                                     # 30 minutes on a Redis server of its own
    .venv/bin/python benchmarks/soak.py [--store URL] [--duration 1800]
        [--warmup 300] [--sample-every 10] [--rate 10] [--processes 2] [--lease 10]
        [--faults dup,redo,refused-callback,lost-callback] [--fault-rate 1/4s]
        [--work 0.05:0.5] [--tolerance 0.05] [--out DIR] [--seed 1]

It is a fault drill (``rill_executor.testing.drill``) with only the engine's faults: the
example executor (``examples/rillflow_executor``) in ``--processes`` uvicorn processes of one
worker each on the store, behind the drill's round-robin front, dispatched to by the engine
simulator at ``--rate`` async dispatches a second (executions of three segment tasks whose
work takes ``--work`` seconds), with redos of running tasks (``dup``, a concurrent second
dispatch) and of finished ones (``redo``), and callbacks lost or refused by the engine (the
executor sends them again), one every ``--fault-rate`` on average. Its jobs go to a namespace
of their own (``soak-RUN``).

Every ``--sample-every`` seconds it samples each executor process's RSS, open file
descriptors and threads (from /proc) and the store's connections (PostgreSQL and MariaDB:
the sessions on the store's database; Redis: the clients of the store's database, CLIENT
LIST); after the run, each interval's callback latency (from a dispatch to the first
callback the engine received for it, p50 and p99 of the callbacks received in the interval).
At the end it waits for quiescence and checks the engine's records (every task succeeded,
told once, one result a key) and the store's (the namespace's drill report: no job left
processing or dangling, no notice pending or unsent, no broken invariant, a job a key).

It writes ``samples.csv`` and ``soak.json`` (settings, samples, summary, checks) to ``--out``
and prints the summary: each process's RSS at the end of the warm-up and at the end (each
the mean of a minute of samples), its change and its slope (least squares, MB a minute,
after the warm-up), file descriptors, connections and latency. Exit status 0 when every
check holds (RSS within ``--tolerance`` of its warm-up value included), 1 when one fails.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rill_executor import Ledger
from rill_executor.testing.drill import (
    DrillConfig,
    DrillRecord,
    FaultDrill,
    FaultKind,
    Reaper,
    RedisServer,
    SegmentWorkload,
    check,
    interruptible,
    parse_rate,
)

ROOT = Path(__file__).resolve().parents[1]
EXECUTOR = (
    f"{sys.executable} -m uvicorn --app-dir {ROOT} --log-level warning --no-access-log"
    " --port {port} examples.rillflow_executor.app:app"
)
SEGMENTS = 3  # tasks an execution
MB = 1024 * 1024
FAULT_LINE = re.compile(r"^\s*\d+\.\ds ")


# --- what is sampled ------------------------------------------------------------------------


def proc_sample(pid: int) -> dict[str, int] | None:
    """RSS (bytes), open file descriptors and threads of ``pid``; None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {
        "rss": int(fields["VmRSS"].split()[0]) * 1024,
        "fds": fds,
        "threads": int(fields["Threads"]),
    }


def connection_counter(url: str) -> Callable[[], int | None] | None:
    """A function counting the store's connections other than its own (None: a local file)."""
    scheme = urlsplit(url).scheme.partition("+")[0]
    if scheme == "postgresql":
        import psycopg

        parts = urlsplit(url)
        conninfo = f"postgresql://{parts.netloc}{parts.path}"
        sql = (
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )

        def postgres() -> int:
            with psycopg.connect(conninfo, autocommit=True, connect_timeout=5) as conn:
                row = conn.execute(sql).fetchone()
                return int(row[0]) if row else 0

        return postgres
    if scheme == "mysql":
        import pymysql

        parts = urlsplit(url)
        database = parts.path.lstrip("/")

        def mariadb() -> int:
            conn = pymysql.connect(
                host=parts.hostname or "127.0.0.1",
                port=parts.port or 3306,
                user=parts.username or "root",
                password=parts.password or "",
                connect_timeout=5,
            )
            try:
                with conn.cursor() as cur:
                    cur.execute(
                        "SELECT count(*) FROM information_schema.processlist"
                        " WHERE db = %s AND id <> connection_id()",
                        (database,),
                    )
                    row = cur.fetchone()
                    return int(row[0]) if row else 0
            finally:
                conn.close()

        return mariadb
    if scheme in {"redis", "rediss"}:
        import redis

        # Not from_url: the store's own options (durability=) are not redis-py's.
        parts = urlsplit(url)
        db = int(parts.path.lstrip("/") or 0)
        client = redis.Redis(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 6379,
            username=parts.username,
            password=parts.password,
            ssl=scheme == "rediss",
            socket_timeout=5,
        )

        def clients() -> int:
            own = client.client_id()
            return sum(
                1
                for c in client.client_list()
                if int(c.get("db", -1)) == db and int(c["id"]) != own
            )

        return clients
    return None


@dataclass
class Sampler:
    """Samples the drill's executors and the store every ``every`` seconds, on a thread of
    its own, until ``stop``; each sample is also appended to ``live`` as a JSON line."""

    drill: FaultDrill
    store: str
    every: float
    live: Path
    say: Callable[[str], None]
    samples: list[dict[str, Any]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="soak-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        count = connection_counter(self.store)
        while not self._stop.is_set() and not self._started():
            time.sleep(0.1)
        began = time.time()
        with self.live.open("a") as live:
            while not self._stop.is_set():
                sample = self._take(count)
                self.samples.append(sample)
                live.write(json.dumps(sample) + "\n")
                live.flush()
                if len(self.samples) % max(1, round(60 / self.every)) == 0:
                    self.say(_progress(sample, began))
                self._stop.wait(self.every - (time.time() - began) % self.every)

    def _started(self) -> bool:
        executors = self.drill.executors
        return bool(executors) and all(e.running for e in executors)

    def _take(self, count: Callable[[], int | None] | None) -> dict[str, Any]:
        at = time.time()
        workers = {}
        for executor in self.drill.executors:
            pid = executor.pid
            taken = None if pid is None else proc_sample(pid)
            if taken is not None:
                workers[str(executor.index)] = {"pid": pid, **taken}
        connections: int | None = None
        error = None
        if count is not None:
            try:
                connections = count()
            except Exception as exc:  # a sample that could not be taken is said, not fatal
                error = f"{type(exc).__name__}: {exc}"
        return {"at": at, "workers": workers, "connections": connections, "error": error}


def _progress(sample: dict[str, Any], began: float) -> str:
    rss = " ".join(
        f"w{i} {w['rss'] / MB:.1f} MB/{w['fds']} fds" for i, w in sample["workers"].items()
    )
    return f"soak: {(sample['at'] - began) / 60:5.1f} min  {rss}  {sample['connections']} conns"


# --- the summary ------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latencies(record: DrillRecord) -> list[tuple[float, float]]:
    """(received at, seconds) from each dispatch to the first callback received for it."""
    sent = {
        (d.execution_id, d.task_name, str(d.ts)): d.started_at
        for d in record.dispatches
        if d.send == 1
    }
    seen: dict[tuple[str, str, str], tuple[float, float]] = {}
    for cb in record.callbacks:
        query = cb.query
        key = (query.get("execution_id", ""), query.get("task_name", ""), query.get("ts", ""))
        if key in sent and key not in seen:
            seen[key] = (cb.received_at, cb.received_at - sent[key])
    return sorted(seen.values())


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (x, y)."""
    if len(points) < 2:
        return None
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    den = sum((x - mx) ** 2 for x, _ in points)
    return None if den == 0 else sum((x - mx) * (y - my) for x, y in points) / den


def with_latency(samples: list[dict[str, Any]], timed: list[tuple[float, float]]) -> None:
    """Add to each sample the p50, p99 and count of the callbacks received since the last."""
    previous = float("-inf")
    for sample in samples:
        these = [s for at, s in timed if previous < at <= sample["at"]]
        sample["callbacks"] = len(these)
        sample["latency_p50"] = percentile(these, 0.50)
        sample["latency_p99"] = percentile(these, 0.99)
        previous = sample["at"]


def summarise(
    samples: list[dict[str, Any]],
    timed: list[tuple[float, float]],
    started: float,
    ended: float,
    warmup: float,
    tolerance: float,
) -> dict[str, Any]:
    """RSS, fds, connections and latency at the end of the warm-up and at the end of the
    dispatches (the samples taken while the drill settled are not compared)."""
    after = [s for s in samples if started + warmup <= s["at"] <= ended]
    span = (after[-1]["at"] - after[0]["at"]) if after else 0.0
    window = max(1e-9, min(60.0, span / 4))  # a minute, or a quarter of a short run
    first = [s for s in after if s["at"] < after[0]["at"] + window]
    last = [s for s in after if s["at"] > after[-1]["at"] - window]
    workers: dict[str, Any] = {}
    for index in sorted({i for s in samples for i in s["workers"]}, key=int):

        def mean(group: list[dict[str, Any]], what: str, i: str = index) -> float | None:
            values = [s["workers"][i][what] for s in group if i in s["workers"]]
            return statistics.fmean(values) if values else None

        warm, end = mean(first, "rss"), mean(last, "rss")
        points = [
            ((s["at"] - started) / 60, s["workers"][index]["rss"] / MB)
            for s in after
            if index in s["workers"]
        ]
        fds = [s["workers"][index]["fds"] for s in after if index in s["workers"]]
        workers[index] = {
            "pids": sorted({s["workers"][index]["pid"] for s in samples if index in s["workers"]}),
            "rss_warm_mb": None if warm is None else round(warm / MB, 2),
            "rss_end_mb": None if end is None else round(end / MB, 2),
            "rss_change": None if not warm or end is None else round(end / warm - 1, 4),
            "rss_slope_mb_min": None if (k := slope(points)) is None else round(k, 4),
            "rss_max_mb": round(max(p[1] for p in points), 2) if points else None,
            "fds_warm": mean(first, "fds"),
            "fds_end": mean(last, "fds"),
            "fds_max": max(fds) if fds else None,
            "threads_end": mean(last, "threads"),
            "samples_after_warmup": len(points),
        }
    conns = [s["connections"] for s in after if s["connections"] is not None]
    after_warmup = [s for at, s in timed if started + warmup <= at <= ended]
    tail = [s for at, s in timed if (after[-1]["at"] - window if after else started) < at <= ended]
    return {
        "warmup_s": warmup,
        "window_s": round(window, 1),
        "tolerance": tolerance,
        "workers": workers,
        "connections": {
            "warm": statistics.fmean(c for s in first if (c := s["connections"]) is not None)
            if any(s["connections"] is not None for s in first)
            else None,
            "end": statistics.fmean(c for s in last if (c := s["connections"]) is not None)
            if any(s["connections"] is not None for s in last)
            else None,
            "min": min(conns) if conns else None,
            "max": max(conns) if conns else None,
        },
        "latency": {
            "callbacks": len(after_warmup),
            "p50": percentile(after_warmup, 0.50),
            "p99": percentile(after_warmup, 0.99),
            "max": max(after_warmup) if after_warmup else None,
            "last_window_p50": percentile(tail, 0.50),
            "last_window_p99": percentile(tail, 0.99),
        },
        "sample_errors": sorted({s["error"] for s in samples if s["error"]}),
    }


# --- the checks ---------------------------------------------------------------------------------


def steady_check(
    samples: list[dict[str, Any]], started: float, ended: float, warmup: float, rate: float
) -> dict[str, Any]:
    """Callbacks kept coming after the warm-up, in each window at least a quarter of the rate:
    an executor that receives nothing (a harness that fell behind and never caught up) has a
    flat RSS that says nothing."""
    after = [s for s in samples if started + warmup <= s["at"] <= ended]
    span = (after[-1]["at"] - after[0]["at"]) if after else 0.0
    window = max(1e-9, min(60.0, span / 4))
    problems = []
    begin = after[0]["at"] if after else started
    while after and begin < after[-1]["at"]:
        got = sum(s["callbacks"] for s in after if begin < s["at"] <= begin + window)
        if got < rate * window / 4:
            problems.append(
                f"{got} callbacks in {window:g} s from {begin - started:.0f} s, at"
                f" {rate:g} dispatches a second"
            )
        begin += window
    if not after:
        problems.append("no sample after the warm-up")
    return {"name": "steady_rate", "ok": not problems, "problems": problems}


def rss_check(summary: dict[str, Any]) -> dict[str, Any]:
    tolerance = summary["tolerance"]
    problems = []
    for index, w in summary["workers"].items():
        if w["rss_change"] is None or w["samples_after_warmup"] < 2:
            problems.append(f"executor {index}: too few samples after the warm-up")
        elif abs(w["rss_change"]) > tolerance:
            problems.append(
                f"executor {index}: RSS {w['rss_warm_mb']} MB -> {w['rss_end_mb']} MB"
                f" ({w['rss_change']:+.1%}, beyond ±{tolerance:.0%})"
            )
    if not summary["workers"]:
        problems.append("no executor was sampled")
    return {"name": "rss_flat", "ok": not problems, "problems": problems}


def store_checks(store: str, namespace: str, keys: int) -> list[dict[str, Any]]:
    """The namespace's drill report: nothing left pending, processing or dangling."""
    with Ledger(store, namespace=namespace) as ledger:
        report = ledger.drill()

    def one(name: str, problems: list[str]) -> dict[str, Any]:
        return {"name": name, "ok": not problems, "problems": problems}

    other = {state: n for state, n in report.states.items() if state != "succeeded"}
    return [
        one("a_job_a_key", [] if report.jobs == keys else [f"{report.jobs} jobs, {keys} keys"]),
        one("nothing_processing", [f"jobs not succeeded: {other}"] if other else []),
        one(
            "nothing_dangling",
            [f"{report.dangling_count} dangling: {', '.join(report.dangling[:5])}"]
            if report.dangling_count
            else [],
        ),
        one(
            "no_notice_pending",
            [
                f"{report.notices_pending} notices pending, {report.notices_unsent} unsent",
                *report.unsent[:5],
            ]
            if report.notices_pending or report.notices_unsent
            else [],
        ),
        one("audit_clean", [f"{f.key}: {f.invariant}: {f.detail}" for f in report.broken[:20]]),
    ]


def engine_checks(record: DrillRecord, namespace: str) -> list[dict[str, Any]]:
    """The drill's checks of the engine's records (every task succeeded, told once)."""
    return [
        {"name": c.name, "ok": c.ok, "problems": list(c.problems)}
        for c in check(replace(record, store=None), namespace=namespace)
        if c.skipped is None
    ]


# --- running ------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group()
    where.add_argument("--store", metavar="URL", help="the executors' store")
    where.add_argument(
        "--own-redis", action="store_true", help="a redis-server of its own (without --store)"
    )
    p.add_argument("--duration", type=float, default=1800.0, help="seconds of dispatches")
    p.add_argument("--warmup", type=float, default=300.0, help="seconds before RSS is compared")
    p.add_argument("--sample-every", type=float, default=10.0, metavar="SECONDS")
    p.add_argument("--rate", type=float, default=10.0, help="async dispatches a second")
    p.add_argument("--processes", type=int, default=2, help="executor processes")
    p.add_argument("--lease", type=float, default=10.0, help="the executors' lease, seconds")
    p.add_argument("--faults", default="dup,redo,refused-callback,lost-callback")
    p.add_argument("--fault-rate", default="1/4s", help="mean rate of the faults, e.g. 1/4s")
    p.add_argument("--work", default="0.05:0.5", help="MIN:MAX seconds of a task's work")
    p.add_argument("--tolerance", type=float, default=0.05, help="RSS change allowed")
    p.add_argument("--settle", type=float, default=180.0, help="seconds to wait for quiescence")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=Path("soak-out"), help="where the files go")
    p.add_argument("--command", default=EXECUTOR, help="one executor ({port}: its port)")
    args = p.parse_args(argv)
    if not 0 <= args.warmup < args.duration:
        p.error("--warmup must be at least 0 and less than --duration")
    if args.rate <= 0 or args.sample_every <= 0:
        p.error("--rate and --sample-every must be positive")
    if not re.fullmatch(r"\d+(\.\d+)?:\d+(\.\d+)?", args.work):
        p.error(f"--work is MIN:MAX seconds, e.g. 0.05:0.5, got {args.work!r}")
    try:
        args.faults = tuple(FaultKind(f) for f in args.faults.split(",") if f)
        args.every = parse_rate(args.fault_rate)
    except ValueError as exc:
        p.error(str(exc))
    return args


def soak(args: argparse.Namespace, store: str, reaper: Reaper) -> dict[str, Any]:
    run = uuid.uuid4().hex[:8]
    namespace = f"soak-{run}"
    low, high = (float(x) for x in args.work.split(":"))
    workload = SegmentWorkload(
        seed=args.seed,
        run=run,
        segments=SEGMENTS,
        min_seconds=low,
        max_seconds=high,
        namespace=namespace,
    )
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    log = (out / "drill.log").open("a")

    def say(line: str) -> None:
        log.write(line + "\n")
        log.flush()
        if not FAULT_LINE.match(line):  # the drill's fault lines go to the log alone
            print(line, flush=True)

    config = DrillConfig(
        command=args.command,
        store=store,
        processes=args.processes,
        duration=args.duration,
        seed=args.seed,
        faults=args.faults,
        every=args.every,
        submit_every=SEGMENTS / args.rate,
        lease=args.lease,
        settle=args.settle,
        env={"RILL_NAMESPACE": namespace},
        log_dir=out / "logs",
        progress=say,
        reaper=reaper,
    )
    drill = FaultDrill(config, workload)
    (out / "samples.jsonl").unlink(missing_ok=True)
    sampler = Sampler(drill, store, args.sample_every, out / "samples.jsonl", say)
    load_before = os.getloadavg()
    sampler.start()
    try:
        record = drill.run()
    finally:
        sampler.stop()
    say(f"soak: {len(record.watched)} tasks, checking the engine's records and the store")
    timed = latencies(record)
    samples = sampler.samples
    with_latency(samples, timed)
    summary = summarise(samples, timed, record.started, record.ended, args.warmup, args.tolerance)
    keys = len({w.key for w in record.watched})
    checks = [
        rss_check(summary),
        steady_check(samples, record.started, record.ended, args.warmup, args.rate),
        *engine_checks(record, namespace),
        *store_checks(store, namespace, keys),
    ]
    return {
        "settings": {
            **{k: v for k, v in vars(args).items() if k not in {"out", "faults"}},
            "faults": [f.value for f in args.faults],
            "store": store,
            "namespace": namespace,
        },
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "run": {
            "started": record.started,
            "ended": record.ended,
            "quiet": record.quiet,
            "executions": len({w.execution_id for w in record.watched}),
            "tasks": len(record.watched),
            "dispatches": len(record.dispatches),
            "callbacks": len(record.callbacks),
            "faults": {
                kind.value: sum(1 for f in record.faults if f.kind is kind and not f.skipped)
                for kind in args.faults
            },
            "task_rate": round(len(record.watched) / (record.ended - record.started), 2),
            "dispatch_errors": sum(1 for d in record.dispatches if d.error is not None),
        },
        "summary": summary,
        "checks": checks,
        "samples": samples,
    }


def write(result: dict[str, Any], out: Path) -> None:
    (out / "soak.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    indices = sorted({i for s in result["samples"] for i in s["workers"]}, key=int)
    started = result["run"]["started"]
    with (out / "samples.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        per_worker = [f"w{i}_{what}" for i in indices for what in ("rss_mb", "fds", "threads")]
        head = ["offset_s", *per_worker, "connections", "callbacks", "p50_s", "p99_s"]
        writer.writerow(head)
        for s in result["samples"]:
            row: list[Any] = [round(s["at"] - started, 1)]
            for i in indices:
                w = s["workers"].get(i)
                row += [round(w["rss"] / MB, 2), w["fds"], w["threads"]] if w else ["", "", ""]
            p50, p99 = s["latency_p50"], s["latency_p99"]
            row += [s["connections"], s["callbacks"], _ms(p50), _ms(p99)]
            writer.writerow(row)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 4)


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def report(result: dict[str, Any]) -> str:
    s, run = result["summary"], result["run"]
    lines = [
        f"soak on {result['settings']['store']}: {run['tasks']} tasks ({run['task_rate']}/s),"
        f" {run['dispatches']} dispatches ({run['dispatch_errors']} unanswered),"
        f" {run['callbacks']} callbacks, faults"
        f" {run['faults']}; load average {result['load_average']['before'][0]:.2f} ->"
        f" {result['load_average']['after'][0]:.2f}",
        f"RSS at the end of the warm-up ({s['warmup_s']:g} s) and at the end, each the mean of"
        f" {s['window_s']:g} s of samples:",
    ]
    for index, w in s["workers"].items():
        change = "-" if w["rss_change"] is None else f"{w['rss_change']:+.1%}"
        lines.append(
            f"  executor {index}: {_fmt(w['rss_warm_mb'])} -> {_fmt(w['rss_end_mb'])} MB"
            f" ({change}), slope {_fmt(w['rss_slope_mb_min'], '+.3f')} MB/min, max"
            f" {_fmt(w['rss_max_mb'])} MB; fds {_fmt(w['fds_warm'], '.0f')} ->"
            f" {_fmt(w['fds_end'], '.0f')} (max {w['fds_max']}), threads"
            f" {_fmt(w['threads_end'], '.0f')}"
        )
    c, lat = s["connections"], s["latency"]
    lines.append(
        f"store connections: {_fmt(c['warm'], '.1f')} -> {_fmt(c['end'], '.1f')}"
        f" (min {c['min']}, max {c['max']})"
    )
    lines.append(
        f"callback latency after the warm-up: p50 {_fmt(lat['p50'], '.3f')} s, p99"
        f" {_fmt(lat['p99'], '.3f')} s, max {_fmt(lat['max'], '.3f')} s over"
        f" {lat['callbacks']} callbacks; last window p50 {_fmt(lat['last_window_p50'], '.3f')}"
        f" s, p99 {_fmt(lat['last_window_p99'], '.3f')} s"
    )
    if s["sample_errors"]:
        lines.append(f"samples that failed: {s['sample_errors']}")
    for c in result["checks"]:
        verdict = "holds" if c["ok"] else f"FAILED: {'; '.join(c['problems'][:3])}"
        lines.append(f"  {c['name']:<22} {verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with Reaper() as reaper, interruptible(reaper):
        redis = RedisServer(reaper=reaper) if args.store is None else None
        try:
            if redis is not None:
                redis.start()
            elif urlsplit(args.store).scheme.partition("+")[0] in {"postgresql", "mysql"}:
                from rill_executor_sql import SqlStore

                SqlStore(args.store, upgrade=True).close()  # the schema, installed or upgraded
            result = soak(args, redis.url if redis else args.store, reaper)
        finally:
            if redis is not None:
                redis.close()
    write(result, args.out)
    print(report(result), flush=True)
    print(f"soak: samples in {args.out / 'samples.csv'}, everything in {args.out / 'soak.json'}")
    return 0 if all(c["ok"] for c in result["checks"]) else 1


if __name__ == "__main__":
    sys.exit(main())
