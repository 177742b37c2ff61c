"""The Rill Flow executor end to end, against the engine's own sample executor.

    make bench-rillflow                                  # three runs, both stores
    .venv/bin/python benchmarks/bench_rillflow.py [--arms sample,redis,postgres]
        [--patterns async,sync] [--concurrency 64] [--rounds 3] [--duration 5]
        [--warmup 2] [--workers 2] [--runs 1] [--redis-url redis://127.0.0.1:6379/15]
        [--postgres-url postgresql+psycopg://postgres@127.0.0.1:5432/test]
        [--profile DIR] [--json FILE]

Each arm is a uvicorn server with ``--workers`` processes, started as a subprocess, all of
them served at once:

- ``sample``: Rill Flow's FastAPI sample executor (``rillflow_sample.py``), which persists
  nothing: the baseline;
- ``redis``, ``postgres``: ``RillFlowExecutor`` with a no-op ``async def`` handler
  (``rillflow_noop.py``) on that store, callbacks allowed only to the engine's URL
  (``engines=``, as docs/security.md describes).

The engine's side: a callback receiver, a subprocess (a small asyncio HTTP server answering
``/flow/trigger.json`` as the engine does: 200 the first time, 500 / 30601 "repeated
finish" after), reports each callback's arrival on a pipe; the load generator, in this
process (httpx, a client and connection per sender), sends dispatches with distinct
execution ids, the engine's headers (``X-Callback-Url`` with ``ts``, ``X-Flow-Server``,
``X-Mode: async``) and body (``{"execution_id": …, "id": …}``).

Each of the ``--concurrency`` senders keeps one task in flight: an async task is a dispatch,
its acknowledgement, then its callback; a sync task is a dispatch and its answer. So the
rate is what the executor sustains, callbacks included, and a backlog cannot hide in its
queue. A run is ``--rounds`` rounds; a round times one window of ``--duration`` seconds
(after ``--warmup`` untimed ones) of each arm and pattern, the arms' order rotated from round
to round, so that the machine's drift falls on every arm. It counts the tasks completed in
the windows (tasks/s), the dispatch-to-callback time (async) or the dispatch-to-answer time
(sync), p50 and p99, the executor's CPU time per task (its processes', from /proc), and on
PostgreSQL the database's commits per task. Every run ends with a check: each async
dispatch got exactly one callback, each sync one none.

Prints a table per run, and each store arm's ratio of tasks/s to the sample's in the same run.
It asserts nothing. Its jobs: on PostgreSQL deleted at the end; on Redis left to expire an
hour later (point it at a scratch database).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

HERE = Path(__file__).resolve().parent
TICK = os.sysconf("SC_CLK_TCK")
PY_SPY = shutil.which("py-spy", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
CALLBACK_WAIT = 30.0  # seconds an async task waits for its callback before it counts missing
# The engine's answer to a second callback of a task (docs/rillflow.md, the simulator's table).
REPEATED = b'{"request_id": "r", "error_code": 30601, "error": "repeated finish task noop"}'


# --- the engine's callback endpoint -------------------------------------------------------


async def serve_callbacks() -> None:
    """Answer ``/flow/trigger.json`` as the engine does and write one line per callback to
    stdout: ``execution_id monotonic_time n`` (n: the how-manyth callback of that task). The
    monotonic clock is the machine's, so the load generator compares it with its own."""
    seen: collections.Counter[str] = collections.Counter()
    out = sys.stdout

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                target = lines[0].split(" ")[1]
                length, close = 0, False
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    name = name.strip().lower()
                    if name == "content-length":
                        length = int(value)
                    elif name == "connection" and value.strip().lower() == "close":
                        close = True
                await reader.readexactly(length)
                now = time.monotonic()
                execution = parse_qs(urlsplit(target).query).get("execution_id", ["?"])[0]
                seen[execution] += 1
                out.write(f"{execution} {now:.6f} {seen[execution]}\n")
                out.flush()
                if seen[execution] == 1:
                    status, body = "200 OK", b'{"request_id": "r", "result": "ok"}'
                else:
                    status = "500 Internal Server Error"
                    body = REPEATED
                writer.write(
                    f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, IndexError, ValueError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    out.write(f"ready {port}\n")
    out.flush()
    async with server:
        await server.serve_forever()


class Receiver:
    """The callback receiver subprocess, and the arrivals it reports."""

    def __init__(self) -> None:
        self.process: asyncio.subprocess.Process | None = None
        self.url = ""
        self.counts: collections.Counter[str] = collections.Counter()
        self.waiting: dict[str, asyncio.Future[float]] = {}
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> Receiver:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--serve-callbacks", stdout=asyncio.subprocess.PIPE
        )
        assert self.process.stdout is not None
        ready = (await self.process.stdout.readline()).decode().split()
        self.url = f"http://127.0.0.1:{ready[1]}"
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        async for line in self.process.stdout:
            execution, at, _ = line.decode().split()
            self.counts[execution] += 1
            future = self.waiting.pop(execution, None)
            if future is not None and not future.done():
                future.set_result(float(at))

    async def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            await self.process.wait()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader


# --- the executors under test -------------------------------------------------------------


@dataclass(frozen=True)
class Arm:
    name: str
    module: str  # uvicorn's app, imported from benchmarks/
    path: str  # the task's resource
    store: str | None  # None: the sample, no store


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """uvicorn with ``workers`` processes, in a process group of its own."""

    def __init__(self, arm: Arm, workers: int, env: dict[str, str], log: Path) -> None:
        self.arm, self.workers, self.env, self.log = arm, workers, env, log
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Server:
        command = [
            sys.executable, "-m", "uvicorn", f"{self.arm.module}:app",
            "--app-dir", str(HERE), "--workers", str(self.workers),
            "--port", str(self.port), "--log-level", "warning", "--no-access-log",
        ]  # fmt: skip
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command, env={**os.environ, **self.env}, stdout=log, stderr=log,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.arm.name} exited: {self.log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                answer = httpx.get(f"{self.url}/openapi.json", timeout=1)
                if answer.status_code == 200 and len(self.worker_pids()) >= self.workers:
                    return self
            time.sleep(0.2)
        raise RuntimeError(f"{self.arm.name} did not start: {self.log.read_text()[-2000:]}")

    def worker_pids(self) -> list[int]:
        assert self.process is not None
        return descendants(self.process.pid)

    def cpu_seconds(self) -> float:
        """CPU time of the server's processes (the workers do the work)."""
        assert self.process is not None
        return sum(cpu_of(pid) for pid in [self.process.pid, *self.worker_pids()])

    def stop(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self.process = None


def _stat(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()  # fields from the 3rd (state) on


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = collections.defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                children[int(_stat(int(entry.name))[1])].append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children[todo.pop()]:
            found.append(child)
            todo.append(child)
    return found


def cpu_of(pid: int) -> float:
    try:
        fields = _stat(pid)
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def machine_busy() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return sum(values) - idle, sum(values)


# --- the load -----------------------------------------------------------------------------


@dataclass
class Phase:
    """One pattern on one arm: the sum of its timed windows."""

    pattern: str
    seconds: float = 0.0
    completed: int = 0  # tasks whose callback (async) or answer (sync) came in a window
    latencies: list[float] = field(default_factory=list)  # seconds, dispatch to completion
    acks: list[float] = field(default_factory=list)  # async: dispatch to acknowledgement
    errors: collections.Counter[str] = field(default_factory=collections.Counter)  # by kind
    # (a dispatch answered with another status than 200, or not answered: the exception)
    missing: int = 0  # an acknowledged async dispatch with no callback in CALLBACK_WAIT
    cpu: collections.Counter[str] = field(default_factory=collections.Counter)  # s, by role
    jiffies: list[int] = field(default_factory=lambda: [0, 0])  # the machine's busy, total
    transactions: int | None = None  # PostgreSQL: its database's commits in the windows
    dispatched: list[str] = field(default_factory=list)  # execution ids answered 200
    samples: list[str] = field(default_factory=list)  # py-spy files

    def summary(self) -> dict[str, Any]:
        done = max(self.completed, 1)
        return {
            "pattern": self.pattern,
            "seconds": self.seconds,
            "tasks_per_s": self.completed / self.seconds,
            "p50_ms": percentile(self.latencies, 0.50) * 1e3,
            "p99_ms": percentile(self.latencies, 0.99) * 1e3,
            "ack_p50_ms": percentile(self.acks, 0.50) * 1e3,
            "ack_p99_ms": percentile(self.acks, 0.99) * 1e3,
            "errors": sum(self.errors.values()),
            "error_kinds": dict(self.errors),
            "missing": self.missing,
            "executor_cpu_ms_per_task": self.cpu.get("executor", 0.0) / done * 1e3,
            "cpu_s": dict(self.cpu),
            "machine_busy": self.jiffies[0] / max(1, self.jiffies[1]),
            "store_transactions_per_task": (
                None if self.transactions is None else self.transactions / done
            ),
        }


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def make_clients(n: int) -> list[httpx.AsyncClient]:
    """A client per sender: httpcore checks every connection of its pool on each request,
    which would make one pool of 64 connections cost more than the servers. Made once, with
    one SSL context (httpx loads the CA bundle for each client it makes a context for)."""
    context = ssl.create_default_context()
    timeout = httpx.Timeout(10.0)
    return [httpx.AsyncClient(timeout=timeout, trust_env=False, verify=context) for _ in range(n)]


async def drive(
    receiver: Receiver,
    clients: list[httpx.AsyncClient],
    task_url: str,
    phase: Phase,
    tag: str,
    until: float,
    timed_from: float,
) -> None:
    """A sender per client, one task in flight each, until ``until``; a task that ends in
    the window from ``timed_from`` to ``until`` counts."""
    numbers = iter(range(1 << 62))
    asynchronous = phase.pattern == "async"

    async def send(client: httpx.AsyncClient) -> None:
        while (start := time.monotonic()) < until:
            execution = f"bench:noop_c_{tag}_{next(numbers)}"
            callback = (
                f"{receiver.url}/flow/trigger.json?execution_id={execution}"
                f"&task_name=noop&ts={int(time.time() * 1000)}"
            )
            headers = {
                "Content-Type": "application/json",
                "X-Callback-Url": callback,
                "X-Flow-Server": f"{receiver.url}/flow",
            }
            if asynchronous:
                headers["X-Mode"] = "async"
                arrived = receiver.waiting[execution] = asyncio.get_running_loop().create_future()
            body = json.dumps({"execution_id": execution, "id": execution})
            try:
                answer = await client.post(
                    f"{task_url}?execution_id={execution}&name=noop",
                    content=body,
                    headers=headers,
                )
                failure = None if answer.status_code == 200 else str(answer.status_code)
            except httpx.HTTPError as exc:
                failure = type(exc).__name__
            answered = time.monotonic()
            if failure is not None:
                phase.errors[failure] += 1
                receiver.waiting.pop(execution, None)
                continue
            phase.dispatched.append(execution)
            if asynchronous:
                try:
                    end = await asyncio.wait_for(arrived, CALLBACK_WAIT)
                except TimeoutError:
                    phase.missing += 1
                    continue
            else:
                end = answered
            if timed_from <= end <= until:
                phase.completed += 1
                phase.latencies.append(end - start)
                if asynchronous:
                    phase.acks.append(answered - start)

    await asyncio.gather(*(send(client) for client in clients))


async def measure(
    server: Server,
    receiver: Receiver,
    clients: list[httpx.AsyncClient],
    phase: Phase,
    args: argparse.Namespace,
    label: str,
) -> None:
    """Warm up, then time one window of a pattern on a running server, added to ``phase``."""
    task_url = f"{server.url}{server.arm.path}"
    tag = f"{uuid.uuid4().hex[:8]}{server.arm.name[0]}{phase.pattern[0]}"
    timed_from = time.monotonic() + args.warmup
    until = timed_from + args.duration
    load = asyncio.create_task(drive(receiver, clients, task_url, phase, tag, until, timed_from))
    await asyncio.sleep(max(0.0, timed_from - time.monotonic()))
    profilers = start_profilers(server, args, label)
    before, commits = _cpu(server, receiver), await asyncio.to_thread(committed, server, args)
    machine = machine_busy()
    await asyncio.sleep(max(0.0, until - time.monotonic()))
    after, commits_after = _cpu(server, receiver), await asyncio.to_thread(committed, server, args)
    machine_after = machine_busy()
    await load
    phase.seconds += args.duration
    phase.cpu.update({role: after[role] - before[role] for role in after})
    if commits is not None and commits_after is not None:
        phase.transactions = (phase.transactions or 0) + commits_after - commits
    phase.jiffies[0] += machine_after[0] - machine[0]
    phase.jiffies[1] += machine_after[1] - machine[1]
    phase.samples += stop_profilers(profilers)


def committed(server: Server, args: argparse.Namespace) -> int | None:
    """PostgreSQL: the transactions its database has committed so far (any client's)."""
    if server.arm.store != "postgres":
        return None
    from sqlalchemy import create_engine, text

    engine = create_engine(args.postgres_url)
    try:
        with engine.connect() as conn:
            query = "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
            return int(conn.execute(text(query)).scalar_one())
    finally:
        engine.dispose()


def _cpu(server: Server, receiver: Receiver) -> dict[str, float]:
    assert receiver.process is not None
    own = os.times()
    return {
        "executor": server.cpu_seconds(),
        "receiver": cpu_of(receiver.process.pid),
        "load": own.user + own.system,
    }


# --- profiles -----------------------------------------------------------------------------


def start_profilers(
    server: Server, args: argparse.Namespace, label: str
) -> list[tuple[subprocess.Popen[bytes], Path]]:
    """py-spy on each worker process for the timed window (``--profile DIR``)."""
    if not args.profile:
        return []
    if PY_SPY is None:
        raise SystemExit("--profile needs py-spy: .venv/bin/pip install py-spy")
    started = []
    for pid in server.worker_pids():
        out = Path(args.profile) / f"{label}-{pid}.txt"
        command = [
            PY_SPY, "record", "--pid", str(pid), "--duration", str(int(args.duration)),
            "--rate", "200", "--format", "raw", "--nonblocking", "--output", str(out),
        ]  # fmt: skip
        started.append(
            (subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE), out)
        )
    return started


def stop_profilers(started: list[tuple[subprocess.Popen[bytes], Path]]) -> list[str]:
    files = []
    for process, out in started:
        _, err = process.communicate(timeout=60)
        if out.exists():
            files.append(str(out))
        else:
            print(f"  py-spy wrote nothing: {err.decode(errors='replace')[-300:]}")
    return files


LIBRARIES = {  # a frame's file's first directory: what the time is spent on
    "rill_executor": "rill_executor core",
    "rill_executor_redis": "store adapter",
    "rill_executor_sql": "store adapter",
    "redis": "redis-py",
    "psycopg": "psycopg",
    "sqlalchemy": "SQLAlchemy",
    "greenlet": "SQLAlchemy",
    "httpx": "httpx / httpcore",
    "httpcore": "httpx / httpcore",
    "anyio": "anyio",
    "h11": "uvicorn / h11",
    "uvicorn": "uvicorn / h11",
    "fastapi": "FastAPI / Starlette",
    "starlette": "FastAPI / Starlette",
    "pydantic": "pydantic",
    "pydantic_core": "pydantic",
    "asyncio": "asyncio",
    "json": "json",
    "logging": "logging",
    "requests": "requests / urllib3 / http.client",
    "urllib3": "requests / urllib3 / http.client",
    "http": "requests / urllib3 / http.client",
    "importlib": "importing (a failed import, each call)",
    "<frozen importlib._bootstrap>": "importing (a failed import, each call)",
    "<frozen importlib._bootstrap_external>": "importing (a failed import, each call)",
    "concurrent": "threads",
    "threading.py": "threads",
    "queue.py": "threads",
}
ACTIVITIES = (  # (activity, a frame that marks it); the first match wins
    ("delivering callbacks (Deliverer)", "Deliverer."),
    ("running the handler and committing, after the answer", "RillFlowExecutor._start."),
    ("answering dispatches (the route)", "mount.<locals>.endpoint"),
    ("answering dispatches (the route)", "executor_api ("),
    ("the sample's callbacks (thread pool)", "async_processor ("),
    ("the sample's sync work (thread pool)", "_WorkItem.run ("),
    ("waiting for I/O (the event loop's select)", "select (selectors.py"),
    ("uvicorn and Starlette around the route", "uvicorn/"),
)


def summarise_profile(files: list[str], top: int = 12) -> str:
    """Where the workers' samples were: by activity, by the innermost frame's library
    (self time), and the project's functions most often on the stack, in % of samples."""
    activity: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for name in files:
        for line in Path(name).read_text().splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack:
                continue
            count = int(count_text)
            frames = stack.split(";")
            total += count
            activity[_activity(frames)] += count
            own[_library(frames[-1])] += count
            for frame in set(frames):
                if "rill_executor" in frame:
                    inclusive[frame] += count
    if not total:
        return "  (no samples)"
    lines = [f"  py-spy, {total} samples of the workers; by activity:"]
    lines += [f"    {n / total:6.1%}  {name}" for name, n in activity.most_common()]
    lines.append("  self time by library:")
    lines += [f"    {n / total:6.1%}  {name}" for name, n in own.most_common(10)]
    lines.append("  the project's functions most often on the stack:")
    lines += [f"    {n / total:6.1%}  {frame}" for frame, n in inclusive.most_common(top)]
    return "\n".join(lines)


def _activity(frames: list[str]) -> str:
    for name, marker in ACTIVITIES:
        if any(marker in frame for frame in frames):
            return name
    return "other"


def _library(frame: str) -> str:
    """``func (path/to/file.py:12)``: the library of the file's first directory."""
    where = frame[frame.rfind("(") + 1 : frame.rfind(":")]
    first = where.split("/")[0]
    if first == "rill_executor" and where.startswith("rill_executor/rillflow/"):
        return "rill_executor.rillflow"
    return LIBRARIES.get(first, "other (stdlib, C)")


# --- stores -------------------------------------------------------------------------------


def prepare_store(arm: Arm, url: str) -> str:
    """The store URL the executor is given (the PostgreSQL schema installed)."""
    if arm.store == "postgres":
        from rill_executor_sql import SqlStore

        SqlStore(url, upgrade=True).close()
        return url
    if "durability=" in url:
        return url
    return url + ("&" if "?" in url else "?") + "durability=ignore"  # its AOF is reported


def clean_store(arm: Arm, url: str, namespace: str) -> None:
    if arm.store != "postgres":
        return  # Redis: the jobs expire with their retention (an hour)
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.begin() as conn:
        for table in ("rill_jobs", "rill_fences"):
            conn.execute(text(f"DELETE FROM {table} WHERE namespace = :ns"), {"ns": namespace})
    engine.dispose()


def describe_stores(args: argparse.Namespace, arms: list[Arm]) -> str:
    parts = []
    for arm in arms:
        with contextlib.suppress(Exception):
            if arm.store == "redis":
                import redis

                with redis.Redis.from_url(args.redis_url) as client:
                    info = client.info()
                    aof = client.config_get("appendonly").get("appendonly")
                parts.append(f"Redis {info['redis_version']} (appendonly {aof})")
            elif arm.store == "postgres":
                from sqlalchemy import create_engine, text

                engine = create_engine(args.postgres_url)
                with engine.connect() as conn:
                    version = conn.execute(text("SHOW server_version")).scalar()
                    sync = conn.execute(text("SHOW synchronous_commit")).scalar()
                engine.dispose()
                parts.append(f"PostgreSQL {version} (synchronous_commit {sync})")
    return ", ".join(parts)


# --- a run --------------------------------------------------------------------------------


ARMS = {
    "sample": Arm("sample", "rillflow_sample", "/executor.json", None),
    "redis": Arm("redis", "rillflow_noop", "/noop", "redis"),
    "postgres": Arm("postgres", "rillflow_noop", "/noop", "postgres"),
}


async def run_once(args: argparse.Namespace, workdir: Path, run: int) -> dict[str, Any]:
    """Every arm served at once; ``--rounds`` rounds of one window per arm and pattern, the
    arms' order rotated each round, so that the machine's drift falls on all of them."""
    arms = [ARMS[name] for name in args.arms]
    receiver = await Receiver().start()
    namespace = f"bench-rf-{uuid.uuid4().hex[:8]}"
    urls = {"redis": args.redis_url, "postgres": args.postgres_url}
    servers: list[Server] = []
    phases = {(arm.name, pattern): Phase(pattern) for arm in arms for pattern in args.patterns}
    load = os.getloadavg()[0]
    clients = make_clients(args.concurrency)
    try:
        for arm in arms:
            env = {"SAMPLE_LOG_LEVEL": args.sample_log_level}
            if arm.store is not None:
                env |= {
                    "RILL_STORE": prepare_store(arm, urls[arm.store]),
                    "RILL_NAMESPACE": namespace,
                    "RILL_ENGINES": f"{receiver.url}/flow",
                }
            servers.append(Server(arm, args.workers, env, workdir / f"{arm.name}.log"))
            await asyncio.to_thread(servers[-1].start)
        for round_ in range(args.rounds):
            shift = round_ % len(servers)
            for server in servers[shift:] + servers[:shift]:
                for pattern in args.patterns:
                    label = f"{run}-{server.arm.name}-{pattern}-{round_}"
                    phase = phases[server.arm.name, pattern]
                    await measure(server, receiver, clients, phase, args, label)
        await asyncio.sleep(args.settle)  # a second callback of any task would come now
    finally:
        for client in clients:
            await client.aclose()
        for server in servers:
            server.stop()
        await receiver.stop()
        for arm in arms:
            if arm.store is not None:
                clean_store(arm, urls[arm.store], namespace)
    result: dict[str, Any] = {"load_before": load, "load_after": os.getloadavg()[0], "arms": {}}
    for (name, pattern), phase in phases.items():
        result["arms"].setdefault(name, {})[pattern] = checked(phase, receiver)
    async_callbacks = sum(
        receiver.counts[t] for p in phases.values() if p.pattern == "async" for t in p.dispatched
    )
    result["callbacks_not_for_an_async_dispatch"] = sum(receiver.counts.values()) - async_callbacks
    return result


def checked(phase: Phase, receiver: Receiver) -> dict[str, Any]:
    """The phase's figures, and how many of its dispatches did not get exactly the callbacks
    they should: one for an async dispatch, none for a sync one."""
    summary = phase.summary()
    expected = 1 if phase.pattern == "async" else 0
    summary["dispatches_checked"] = len(phase.dispatched)
    summary["not_exactly_once"] = sum(1 for t in phase.dispatched if receiver.counts[t] != expected)
    summary["duplicates"] = sum(1 for t in phase.dispatched if receiver.counts[t] > 1)
    if phase.samples:
        summary["profile"] = summarise_profile(phase.samples)
    return summary


def report(run: int, result: dict[str, Any], patterns: list[str]) -> None:
    print(f"\nrun {run}, load average {result['load_before']:.1f} → {result['load_after']:.1f}")
    print(
        f"  {'arm':<9}{'pattern':<8}{'tasks/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'ack p50':>9}"
        f"{'ack p99':>9}{'CPU ms/task':>12}{'x sample':>10}  errors/missing/not-once  busy"
    )
    arms = result["arms"]
    for name, figures in arms.items():
        for pattern in patterns:
            s = figures[pattern]
            base = arms.get("sample", {}).get(pattern, {}).get("tasks_per_s")
            ratio = f"{s['tasks_per_s'] / base:10.2f}" if base and name != "sample" else " " * 10
            print(
                f"  {name:<9}{pattern:<8}{s['tasks_per_s']:9.0f}{s['p50_ms']:9.1f}"
                f"{s['p99_ms']:9.1f}{s['ack_p50_ms']:9.1f}{s['ack_p99_ms']:9.1f}"
                f"{s['executor_cpu_ms_per_task']:12.2f}{ratio}  "
                f"{s['errors']}/{s['missing']}/{s['not_exactly_once']:<21}"
                f"{s['machine_busy']:.0%}"
            )
            cpu = ", ".join(f"{k} {v:.1f} s" for k, v in s["cpu_s"].items())
            line = f"      CPU in its {s['seconds']:g} s: {cpu}"
            if s["errors"]:
                line += f"; errors: {s['error_kinds']}"
            if s["store_transactions_per_task"] is not None:
                line += f"; PostgreSQL commits per task {s['store_transactions_per_task']:.1f}"
            print(line)
            if "profile" in s:
                print(s["profile"])
    print(f"  callbacks for no async dispatch: {result['callbacks_not_for_an_async_dispatch']}")


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    print(
        f"bench_rillflow: {args.workers} uvicorn workers per arm, {args.concurrency} tasks in"
        f" flight, {args.rounds} rounds of {args.warmup:g} s warm-up + {args.duration:g} s per"
        f" arm and pattern; {os.cpu_count()} cores;"
        f" {describe_stores(args, [ARMS[name] for name in args.arms])}"
    )
    runs = []
    workdir = Path(args.workdir or f"/tmp/bench-rillflow-{os.getpid()}")
    workdir.mkdir(parents=True, exist_ok=True)
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    for run in range(1, args.runs + 1):
        result = await run_once(args, workdir, run)
        report(run, result, args.patterns)
        runs.append(result)
    if args.runs > 1 and "sample" in args.arms:
        print("\nratio of tasks/s to the sample's, run by run:")
        for name in args.arms:
            if name == "sample":
                continue
            for pattern in args.patterns:
                ratios = [
                    r["arms"][name][pattern]["tasks_per_s"]
                    / max(r["arms"]["sample"][pattern]["tasks_per_s"], 1e-9)
                    for r in runs
                ]
                print(f"  {name:<9}{pattern:<6} " + " / ".join(f"{x:.2f}" for x in ratios))
    print(f"\nserver logs: {workdir}")
    return {"runs": runs}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--serve-callbacks", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--arms", default="sample,redis,postgres")
    parser.add_argument("--patterns", default="async,sync")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds of one window")
    parser.add_argument("--warmup", type=float, default=2.0, help="untimed, before each")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--settle", type=float, default=1.0)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "RILL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument("--sample-log-level", default="WARNING")
    parser.add_argument("--profile", default=None, help="a directory for py-spy's samples")
    parser.add_argument("--workdir", default=None, help="where the servers' logs go")
    parser.add_argument("--json", default=None, help="write the figures to this file")
    args = parser.parse_args(argv)
    args.arms = [a for a in args.arms.split(",") if a]
    args.patterns = [p for p in args.patterns.split(",") if p]
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.serve_callbacks:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve_callbacks())
        return
    figures = asyncio.run(main_async(args))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2, default=str))


if __name__ == "__main__":
    main()
