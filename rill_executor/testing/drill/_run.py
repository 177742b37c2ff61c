"""Running a drill: executors behind fault proxies, the engine, the workload and the faults.

``FaultDrill(config, workload).run()`` reaches the store once (a wrong URL or a server down
is said before anything starts), starts ``processes`` executors from the command, a
round-robin front for the engine to dispatch to, and an ``EngineSimulator``; submits an
execution every ``submit_every`` seconds and injects the planned faults for ``duration``
seconds; then lifts every fault still on (continues stopped processes, heals links,
restarts killed ones), waits for quiescence and returns the ``DrillRecord``. Nothing here
reads the executor's logs: the record is the engine's and the drill's own. Every process
it starts is started from the thread that runs it and registered with a ``Reaper`` (its
config's, or one of its own), and ended when it returns or raises.
"""

from __future__ import annotations

import heapq
import itertools
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from rill_executor import ConfigError, UsageError, open_store
from rill_executor.rillflow import NOTICE_LEASE
from rill_executor.store import Pingable

from ..rillflow import EngineSimulator, TaskStatus, serve_app
from ._callbacks import CallbackFaults
from ._front import round_robin_app
from ._processes import ExecutorProcess
from ._reaper import Reaper
from ._record import DrillRecord, Injected
from ._schedule import FaultKind, PlannedFault, plan
from ._store_server import StoreServer
from ._target import ENGINE_RETRY, RecoveryTarget
from ._workload import Watched, Workload

__all__ = ["DrillConfig", "FaultDrill"]

ALL_FAULTS = tuple(FaultKind)


_SQL_BOUNDS = {
    "sqlite": ("busy_timeout",),
    "postgresql": ("connect_timeout", "statement_timeout", "lock_timeout",
                   "idle_in_transaction_timeout", "read_timeout"),
}  # fmt: skip
_SQL_BOUNDS["mysql"] = _SQL_BOUNDS["postgresql"]


def fitted_to_lease(store: str, lease: float) -> str:
    """``store`` with a SQL store's bounds it does not set at half ``lease``: an executor
    refuses a lease shorter than twice its store's longest wait, and the drill's lease is
    short (the defaults fit leases of 10 s)."""
    parts = urlsplit(store)
    names = _SQL_BOUNDS.get(parts.scheme.partition("+")[0], ())
    given = parse_qs(parts.query)
    extra = "&".join(f"{name}={lease / 2:g}" for name in names if name not in given)
    if not extra:
        return store
    return store + ("&" if "?" in store else "?") + extra  # not urlunsplit: sqlite:////x


@dataclass
class DrillConfig:
    """A drill's settings (see ``rill-executor drill --help`` for each one's meaning)."""

    command: str
    store: str | None = None  # None: the executor keeps no store the drill can read
    processes: int = 3
    outputs: str | None = None
    duration: float = 60.0
    seed: int = 1
    faults: tuple[FaultKind, ...] = ALL_FAULTS
    every: float = 5.0  # mean seconds between faults
    submit_every: float = 2.0  # seconds between two submitted executions
    lease: float = 3.0  # given to the executors as RILL_LEASE
    settle: float = 60.0  # how long to wait for quiescence after the last fault
    quiet: float = 2.0  # quiescent: every task final and no engine traffic for this long
    env: Mapping[str, str] = field(default_factory=dict)
    log_dir: Path | None = None  # each executor's stdout and stderr, appended
    store_server: StoreServer | None = None  # a store the drill owns and may restart
    progress: Callable[[str], None] | None = None
    reaper: Reaper | None = None  # None: the run starts a watchdog of its own
    each_kind: bool = False  # every kind of the menu once first, then at random
    notice_lease: float = NOTICE_LEASE  # the executors' deliverers': a recovery may wait for it
    engine_retry: float = ENGINE_RETRY  # the engine's retry interval as it fires (see _target)

    def __post_init__(self) -> None:
        if self.processes < 1 or self.duration <= 0 or self.every <= 0 or self.submit_every <= 0:
            raise ConfigError("processes, duration, the fault rate and submit_every must be > 0")
        if "{port}" not in self.command:
            raise ConfigError(f"the command must contain {{port}}, got {self.command!r}")
        drawn = {f.kind for f in self.schedule()}
        if self.each_kind and not drawn >= set(self.faults):
            raise UsageError(
                f"each kind once (--each-kind): the menu's {len(set(self.faults))} kinds do not"
                f" fit in {self.duration:g} s at one fault every {self.every:g} s on average"
                f" (seed {self.seed} plans {len(self.schedule())} faults); give a longer"
                " duration or a higher rate"
            )

    def target(self) -> RecoveryTarget:
        """The recovery this drill expects: its lease is the longer of the executors' job
        lease and their notice lease."""
        return RecoveryTarget(max(self.lease, self.notice_lease), self.engine_retry)

    def schedule(self) -> list[PlannedFault]:
        """The faults it plans (the same for the same seed, menu, rate and duration)."""
        return plan(
            self.seed,
            list(self.faults),
            self.every,
            self.duration,
            settle=1.0,
            each_kind=self.each_kind,
        )


def probe(url: str) -> None:
    """Reach the store once (``ping``): a wrong URL, a refused login, a missing database or a
    server down raises here, before the drill starts anything."""
    store = open_store(url)
    try:
        if isinstance(store, Pingable):
            store.ping()
    finally:
        store.close()


class FaultDrill:
    """One drill: ``run()`` once, then ``check`` and ``summarise`` what it returns.
    ``schedule`` is the plan, known before it runs (the same for the same seed)."""

    def __init__(self, config: DrillConfig, workload: Workload) -> None:
        self.config = config
        self.workload = workload
        self.schedule: list[PlannedFault] = config.schedule()
        self._executors: list[ExecutorProcess] = []
        self._routes: dict[tuple[str, str], set[int]] = defaultdict(set)
        self._routes_lock = threading.Lock()
        self._callback_faults = CallbackFaults()
        self._watched: list[Watched] = []
        self._faults: list[Injected] = []
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._serial = itertools.count()
        self._dead: set[int] = set()  # killed executors, until they listen again
        self._restarts: list[threading.Thread] = []
        self._failed_restarts: list[ConfigError] = []
        self._holes: set[int] = set()  # executors whose store link is a black hole
        self._slow: set[int] = set()  # executors whose store link has added latency

    @property
    def executors(self) -> list[ExecutorProcess]:
        """The executor processes, once ``run`` has started them (a restarted one keeps its
        place and gets a new ``pid``): what a soak samples while the drill runs."""
        return list(self._executors)

    # --- running ---------------------------------------------------------------------------

    def run(self) -> DrillRecord:
        if self.config.store:
            probe(self.config.store)
        if self.config.reaper is not None:
            return self._run(self.config.reaper)
        with Reaper() as reaper:
            return self._run(reaper)

    def _run(self, reaper: Reaper) -> DrillRecord:
        cfg = self.config
        # The engine simulator runs on this host: name it, or callbacks to it are refused.
        env = {"RILL_ENGINES": "127.0.0.1", **cfg.env, "RILL_LEASE": str(cfg.lease)}
        if cfg.outputs:
            env["RILL_OUTPUTS"] = cfg.outputs
        store = fitted_to_lease(cfg.store or "", cfg.lease)
        if cfg.log_dir is not None:
            cfg.log_dir.mkdir(parents=True, exist_ok=True)
        self._executors = [
            ExecutorProcess(
                i,
                cfg.command,
                store,
                env,
                None if cfg.log_dir is None else cfg.log_dir / f"executor-{i}.log",
                reaper=reaper,
            )
            for i in range(cfg.processes)
        ]
        try:
            for executor in self._executors:
                executor.start()
            front = round_robin_app([e.url for e in self._executors], self._route)
            with (
                serve_app(front, lifespan="on") as front_url,
                EngineSimulator(max_workers=64) as engine,
            ):
                engine.intercept = self._callback_faults
                try:
                    return self._drive(engine, front_url)
                finally:  # before the front: nothing it forwards hangs on a stopped process
                    self._close()
        finally:
            self._close()

    def _close(self) -> None:
        for executor in self._executors:
            executor.close()

    def _drive(self, engine: EngineSimulator, front_url: str) -> DrillRecord:
        cfg = self.config
        started = time.time()
        self._say(f"drill: {cfg.processes} executors, {len(self.schedule)} faults planned")
        planned = list(self.schedule)
        next_submit = 0.0
        while True:
            offset = time.time() - started
            while planned and planned[0].at <= offset:  # all of the plan, even if late
                self._inject(engine, front_url, planned.pop(0), started)
            if offset >= cfg.duration:
                break
            if next_submit <= offset:
                self._submit(engine, front_url, None)
                next_submit += cfg.submit_every
            self._run_timers(time.time())
            self._watched.extend(self.workload.discover(engine))
            wake = min(
                [next_submit, cfg.duration]
                + ([planned[0].at] if planned else [])
                + ([self._timers[0][0] - started] if self._timers else [])
            )
            time.sleep(max(0.0, min(0.2, wake - (time.time() - started))))
        ended = time.time()
        self._say("drill: injection over, lifting every fault and waiting for quiescence")
        self._callback_faults.disarm()
        self._run_timers(float("inf"))
        for thread in self._restarts:
            thread.join()
        if self._failed_restarts:
            raise self._failed_restarts[0]
        quiescent = self._settle(engine)
        quiet = time.time()
        tasks = {
            (w.execution_id, w.task_name): engine.task(w.execution_id, w.task_name)
            for w in self._watched
        }
        return DrillRecord(
            seed=cfg.seed,
            started=started,
            ended=ended,
            quiet=quiet,
            quiescent=quiescent,
            processes=cfg.processes,
            store=cfg.store,
            watched=list(self._watched),
            faults=self._faults,
            tasks=tasks,
            dispatches=engine.dispatches(),
            callbacks=engine.callbacks(),
            menu=tuple(dict.fromkeys(cfg.faults)),
            target=cfg.target(),
        )

    def _settle(self, engine: EngineSimulator) -> bool:
        cfg = self.config
        deadline = time.monotonic() + cfg.settle
        while time.monotonic() < deadline:
            self._watched.extend(self.workload.discover(engine))
            final = self.workload.settled(engine) and all(
                engine.status(w.execution_id, w.task_name).is_final for w in self._watched
            )
            last = max(
                [r.received_at for r in engine.callbacks()]
                + [r.started_at + r.elapsed for r in engine.dispatches()]
                + [0.0]
            )
            if final and time.time() - last >= cfg.quiet:
                return True
            time.sleep(0.2)
        return False

    def _submit(
        self, engine: EngineSimulator, front_url: str, timeout: float | None
    ) -> list[Watched]:
        watched = self.workload.submit(engine, front_url, next(self._serial), timeout)
        self._watched.extend(watched)
        return watched

    def _route(self, execution_id: str, name: str, index: int) -> None:
        with self._routes_lock:
            self._routes[(execution_id, name)].add(index)

    def _say(self, line: str) -> None:
        if self.config.progress is not None:
            self.config.progress(line)

    # --- timers (restarts, SIGCONTs, healed links), run on the drill's own thread ------------

    def _later(self, at: float, action: Callable[[], None]) -> None:
        heapq.heappush(self._timers, (at, next(self._seq), action))

    def _run_timers(self, now: float) -> None:
        while self._timers and self._timers[0][0] <= now:
            _, _, action = heapq.heappop(self._timers)
            action()

    # --- faults ------------------------------------------------------------------------------

    def _running(self, engine: EngineSimulator) -> list[Watched]:
        return [
            w
            for w in self._watched
            if engine.status(w.execution_id, w.task_name) is TaskStatus.RUNNING
        ]

    def _routed_to(self, running: list[Watched], index: int) -> list[tuple[str, str]]:
        with self._routes_lock:
            return [
                (w.execution_id, w.task_name)
                for w in running
                if index in self._routes.get((w.execution_id, w.task_name), set())
            ]

    def _inject(
        self, engine: EngineSimulator, front_url: str, fault: PlannedFault, started: float
    ) -> None:
        now = time.time()
        record = Injected(at=now, offset=round(now - started, 3), kind=fault.kind, target="")
        self._faults.append(record)
        kind, running = fault.kind, self._running(engine)
        if kind.on_process or kind.on_store_link:
            self._hit_executor(record, fault, running)
        elif kind is FaultKind.STORE_RESTART:
            self._restart_store(record, fault, running)
        elif kind is FaultKind.TIMEOUT:
            watched = self._submit(engine, front_url, timeout=1.0)
            record.target = watched[0].execution_id if watched else ""
            record.affected = [(w.execution_id, w.task_name) for w in watched]
        else:
            self._hit_task(engine, record, fault, running)
        self._say(f"{record.offset:7.1f}s {kind.value} {record.target or record.skipped}")

    def _hit_executor(self, record: Injected, fault: PlannedFault, running: list[Watched]) -> None:
        kind = fault.kind
        index = int(fault.pick * len(self._executors))
        executor = self._executors[index]
        record.target = f"executor {index}"
        record.affected = self._routed_to(running, index)
        if kind is FaultKind.KILL:
            if index in self._dead:
                record.skipped = "already killed"
                return
            executor.kill()
            self._dead.add(index)
            record.until = record.at + fault.hold
            self._later(record.until, lambda: self._restart(index))
        elif kind is FaultKind.STOP:
            if executor.stopped or index in self._dead:
                record.skipped = "already stopped or killed"
                return
            executor.signal(signal.SIGSTOP)
            record.until = record.at + fault.hold
            self._later(record.until, lambda: executor.signal(signal.SIGCONT))
        else:
            proxy = executor.proxy
            record.target = f"store link of executor {index}"
            if proxy is None:
                record.skipped = "no network link to the store (a local file)"
                return
            if kind is FaultKind.RESET:
                proxy.reset()
                record.until = record.at
            elif kind is FaultKind.BLACKHOLE:
                if index in self._holes:
                    record.skipped = "already a black hole"
                    return
                self._holes.add(index)
                proxy.blackhole(True)
                record.until = record.at + fault.hold
                self._later(record.until, lambda: self._heal(index))
            else:
                if index in self._slow:
                    record.skipped = "already slowed"
                    return
                self._slow.add(index)
                proxy.latency(fault.hold / 10)
                record.target += f" +{fault.hold * 100:.0f} ms"
                record.until = record.at + 2 * fault.hold
                self._later(record.until, lambda: self._speed_up(index))

    def _restart(self, index: int) -> None:
        """Start a killed executor again; the schedule goes on while it comes up (it stays
        dead to the faults until it listens). Spawned here, on the drill's own thread: a
        thread of its own would end before the process (see ``Reaper``)."""
        executor = self._executors[index]
        try:
            executor.spawn()
        except ConfigError as exc:
            self._failed_restarts.append(exc)
            return

        def wait() -> None:
            try:
                executor.wait_listening()
            except ConfigError as exc:
                self._failed_restarts.append(exc)
                return
            self._dead.discard(index)

        thread = threading.Thread(target=wait, name=f"restart-executor-{index}", daemon=True)
        self._restarts.append(thread)
        thread.start()

    def _speed_up(self, index: int) -> None:
        proxy = self._executors[index].proxy
        if proxy is not None:
            proxy.latency(0)
        self._slow.discard(index)

    def _heal(self, index: int) -> None:
        proxy = self._executors[index].proxy
        if proxy is not None:
            proxy.blackhole(False)
        self._holes.discard(index)

    def _restart_store(self, record: Injected, fault: PlannedFault, running: list[Watched]) -> None:
        server = self.config.store_server
        record.target = "store"
        if server is None:
            record.skipped = "the drill does not own the store"
            return
        if not server.running:
            record.skipped = "already down"
            return
        server.stop()
        record.affected = [(w.execution_id, w.task_name) for w in running]
        record.until = record.at + fault.hold
        self._later(record.until, server.start)

    def _hit_task(
        self, engine: EngineSimulator, record: Injected, fault: PlannedFault, running: list[Watched]
    ) -> None:
        kind = fault.kind
        if kind is FaultKind.REDO:
            candidates = [
                w
                for w in self._watched
                if engine.status(w.execution_id, w.task_name) is TaskStatus.SUCCEED
            ]
        else:
            candidates = running
        if not candidates:
            record.skipped = "no task to hit"
            return
        task = candidates[int(fault.pick * len(candidates))]
        record.target = f"{task.execution_id}/{task.task_name}"
        record.affected = [(task.execution_id, task.task_name)]
        if kind in {FaultKind.DUP, FaultKind.REDO}:
            engine.redo(task.execution_id, task.task_name)
        else:
            how = "lost" if kind is FaultKind.LOST_CALLBACK else "refused"
            self._callback_faults.arm(task.execution_id, task.task_name, how)
