"""Where a benchmark and its local server run, core by core (``--place``).

On a small virtual machine a round trip to a server process on the other core waits for
that core to wake, which can cost more than the statement; the same round trip to a
process on the caller's core does not. Unpinned, the scheduler decides per process: a
floor on one connection and the store on another may be served by server processes on
different cores, and their ratio then shows the placement more than the work. Pinning the
benchmark and every process of the server, both to one core (``same``) or each to its own
(``apart``), puts both sides of every ratio in the same place. Linux only; the server must
run on this machine, and changing its processes' affinity needs the right to (root, or
the server's user). The server's affinity is restored on the way out.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

PLACES = ("same", "apart")


def _threads(pid: int) -> list[int]:
    try:
        return [int(t.name) for t in Path(f"/proc/{pid}/task").iterdir()]
    except OSError:
        return []  # gone


def cpu_of(tid: int) -> int | None:
    """The core thread ``tid`` last ran on (``/proc``'s ``processor`` field), or None once
    it is gone."""
    try:
        stat = Path(f"/proc/{tid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[36])  # field 39; the list starts at field 3


class Sides:
    """Where this thread and a server's process stood, sampled now and then during a run:
    how often on one core, to tell a run that met the other core's wake-ups from one that
    did not."""

    def __init__(self, server: Callable[[], list[int]]) -> None:
        self._server = server
        self._me = threading.get_native_id()
        self.same = self.apart = 0

    def sample(self) -> None:
        pids = self._server()
        here, there = cpu_of(self._me), cpu_of(pids[0]) if pids else None
        if here is not None and there is not None:
            if here == there:
                self.same += 1
            else:
                self.apart += 1

    def __str__(self) -> str:
        samples = self.same + self.apart
        return f"the server's process on this process's core in {self.same} of {samples} samples"


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])  # after "pid (comm) state": the ppid


def with_children(pid: int) -> list[int]:
    """``pid`` and its children (a PostgreSQL postmaster and its backends and workers)."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                if _parent(int(entry.name)) == pid:
                    children.append(int(entry.name))
    return [pid, *children]


def postgres_server(backend_pid: int) -> Callable[[], list[int]]:
    """What lists every process of the PostgreSQL server one of whose backends is
    ``backend_pid``: its postmaster (new backends are forked by it and take its affinity)
    and the postmaster's children."""
    return functools.partial(with_children, _parent(backend_pid))


@contextlib.contextmanager
def placed(place: str | None, server: Callable[[], list[int]]) -> Iterator[str]:
    """Pin this process and the server's processes (``server()`` lists them, its main one
    first) as ``place`` says, for the block; answer a line that says where each runs. A
    process the server started meanwhile gets the main one's affinity back too."""
    if place is None:
        yield "placement: the scheduler's (unpinned; see --place)"
        return
    cpus = sorted(os.sched_getaffinity(0))
    if place == "apart" and len(cpus) < 2:
        raise SystemExit("--place apart needs two cores")
    client, host = cpus[0], cpus[0] if place == "same" else cpus[1]
    saved: dict[int, set[int]] = {}
    try:
        for tid in (t for pid in server() for t in _threads(pid)):
            saved[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, {host})
        for tid in _threads(os.getpid()):
            saved[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, {client})
    except PermissionError as exc:
        _restore(saved, server)
        raise SystemExit(
            f"--place {place}: cannot pin the server's processes ({exc}); run as root or as"
            " the server's user, or leave --place out"
        ) from None
    try:
        yield f"placement: {place} (this process on CPU {client}, the server on CPU {host})"
    finally:
        _restore(saved, server)


def _restore(saved: dict[int, set[int]], server: Callable[[], list[int]]) -> None:
    pids = server()
    if pids and pids[0] in saved:
        for tid in (t for pid in pids for t in _threads(pid)):
            saved.setdefault(tid, saved[pids[0]])  # forked while pinned
    for tid, cpus in saved.items():
        with contextlib.suppress(OSError):  # exited since
            os.sched_setaffinity(tid, cpus)
