"""A fault drill to run against your own executor.

``FaultDrill`` starts your executor's processes from a command, each behind a TCP fault proxy
on its link to the store, dispatches executions to them through the engine simulator, and
injects faults on a seeded schedule (same seed, same schedule): SIGKILL and SIGSTOP of the
processes, resets, black holes and latency on the store links, a store restart, and on the
engine's side concurrent dispatches, redos, task timeouts, lost and refused callbacks. Then
it waits for quiescence and ``check`` reads the engine's records, the store and the output
bucket (never the executor's logs) and says what held. ``summarise`` adds up the recovery
time and the success rate per fault kind, and judges each kind against a
``RecoveryTarget``. ``rill-executor drill`` is the same from a shell.
Every process a drill starts ends with it (``Reaper``, ``interruptible``).
"""

from ._checks import Check, check
from ._dag_workload import DagWorkload, TaskKey
from ._processes import ExecutorProcess
from ._proxy import FaultProxy
from ._reaper import DrillInterrupted, Reaper, interruptible
from ._record import DrillRecord, Injected
from ._report import DrillResult, FaultStats, summarise
from ._run import DrillConfig, FaultDrill
from ._schedule import FaultKind, PlannedFault, parse_rate, plan
from ._store_server import RedisServer, StoreServer
from ._target import RecoveryTarget
from ._workload import SegmentWorkload, Watched, Workload

__all__ = [
    "Check",
    "DagWorkload",
    "DrillConfig",
    "DrillInterrupted",
    "DrillRecord",
    "DrillResult",
    "ExecutorProcess",
    "FaultDrill",
    "FaultKind",
    "FaultProxy",
    "FaultStats",
    "Injected",
    "PlannedFault",
    "Reaper",
    "RecoveryTarget",
    "RedisServer",
    "SegmentWorkload",
    "StoreServer",
    "TaskKey",
    "Watched",
    "Workload",
    "check",
    "interruptible",
    "parse_rate",
    "plan",
    "summarise",
]
