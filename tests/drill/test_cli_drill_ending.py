"""A drill stopped from outside leaves nothing behind: whatever ends it (SIGTERM, SIGINT,
SIGHUP, its parent's death, SIGKILL), no process it started survives, and its own Redis's
folder is gone. Usage is checked, and the store probed, before anything starts."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clocks import SIGNALS

from ..acceptance.cli import EXE, run
from .test_drill import EXAMPLE

pytestmark = pytest.mark.slow

Process = tuple[int, str]  # a pid and its start time: the pid alone may be reused


def _stat(pid: int) -> tuple[str, int, str] | None:
    """(state, parent pid, start time) of a live process, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return fields[0], int(fields[1]), fields[19]


def descendants(root: int) -> set[Process]:
    """Every process under ``root``, whatever session or group it leads."""
    children: dict[int, list[Process]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        found = _stat(int(entry.name)) if entry.name.isdigit() else None
        if found is not None and found[0] != "Z":
            children[found[1]].append((int(entry.name), found[2]))
    found_all: set[Process] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found_all.add(child)
            todo.append(child[0])
    return found_all


def alive(processes: set[Process]) -> set[Process]:
    living = set()
    for pid, started in processes:
        found = _stat(pid)
        if found is not None and found[0] != "Z" and found[2] == started:
            living.add((pid, started))
    return living


def redis_folders(processes: set[Process]) -> set[Path]:
    """The folders the Redis servers among ``processes`` keep their data in (a Redis
    server rewrites its command line, but runs in its --dir)."""
    folders = set()
    for pid, _ in processes:
        try:
            if Path(f"/proc/{pid}/comm").read_text().startswith("redis-server"):
                folders.add(Path(os.readlink(f"/proc/{pid}/cwd")))
        except OSError:
            continue
    return folders


def ports(processes: set[Process]) -> set[int]:
    """The ports ``processes`` listen on, from their command lines (an executor's --port, a
    Redis server's title): a process restarted since listens on the same one."""
    found = set()
    for pid, _ in processes:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        found |= {int(port) for port in re.findall(r"(?:--port |127\.0\.0\.1:)(\d+)", argv)}
    return found


def listening(found: set[int]) -> set[int]:
    listen = set()
    for port in found:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            listen.add(port)
    return listen


def survivors(processes: set[Process], within: float = 20.0) -> set[Process]:
    """Those still alive after ``within`` seconds (a generous bound: the cleanup of a
    drill killed with SIGKILL runs in its watchdog)."""
    deadline = time.monotonic() + within
    while alive(processes) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive(processes)


DRILL = [str(EXE), "drill", "--command", EXAMPLE, "--processes", "1", "--own-redis"]
DRILL += ["--duration", "60", "--rate", "1/1s", "--faults", "kill,stop,store-restart"]
DRILL += ["--lease", "2", "--seed", "3"]


def _faults_under_way(proc: subprocess.Popen[str], faults: int = 2) -> list[str]:
    """Read the drill's progress until ``faults`` faults were injected."""
    assert proc.stderr is not None
    lines: list[str] = []
    while sum(1 for line in lines if line.strip()[:1].isdigit()) < faults:
        line = proc.stderr.readline()
        assert line, f"the drill ended early: {''.join(lines)}"
        lines.append(line)
    return lines


# A drill leaves a signal it was started ignoring ignored (``nohup``), and a test run
# started in the background ignores SIGINT (and under nohup SIGHUP): each drill here starts
# with the default dispositions, as from a terminal, whatever the test run started with.
DEFAULT_SIGNALS = [
    sys.executable,
    "-c",
    "import os, signal, sys\n"
    "for each in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):\n"
    "    signal.signal(each, signal.SIG_DFL)\n"
    "os.execvp(sys.argv[1], sys.argv[1:])",
]


class Drills:
    """Starts drills as subprocesses; after the test, kills whatever of theirs survived."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []
        self.seen: set[Process] = set()
        self.cwd = Path()

    def start(self, argv: list[str], cwd: Path) -> subprocess.Popen[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RILL_")}
        proc = subprocess.Popen(
            [*DEFAULT_SIGNALS, *argv], cwd=cwd, env=env, stderr=subprocess.PIPE, text=True
        )
        self.procs.append(proc)
        self.cwd = cwd
        return proc

    def under(self, proc: subprocess.Popen[str]) -> tuple[set[Process], set[Path], set[int]]:
        """The processes under ``proc``, once its Redis and an executor run (a
        store-restart or a kill may have one down for a while), with the Redis's folder
        and the ports they listen on."""
        deadline = time.monotonic() + 15
        while True:
            found = descendants(proc.pid)
            self.seen |= found
            # A Redis that has not moved to its --dir yet is still in the drill's.
            folders, listen = redis_folders(found) - {self.cwd}, ports(found)
            if (folders and len(listen) >= 2) or time.monotonic() > deadline:
                return found, folders, listen
            time.sleep(0.1)

    def clean_up(self) -> None:
        for proc in self.procs:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=30)
            proc.kill()
            proc.communicate()
        for pid, _ in alive(self.seen):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def drills() -> Iterator[Drills]:
    found = Drills()
    yield found
    found.clean_up()


@pytest.mark.parametrize(
    "signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name
)
@pytest.mark.real_clock(SIGNALS)
def test_a_drill_ended_by_a_signal_ends_every_process_it_started(
    signum: signal.Signals, tmp_path: Path, drills: Drills
) -> None:
    proc = drills.start(DRILL, tmp_path)
    _faults_under_way(proc)
    under, folders, listen = drills.under(proc)
    assert len(folders) == 1 and len(listen) >= 2  # an executor and a Redis
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert survivors(under) == set()
    assert listening(listen) == set()
    assert not any(folder.exists() for folder in folders)
    assert not (tmp_path / "drill-redis").exists()
    assert proc.returncode == 6, err
    assert f"interrupted by {signum.name}" in err


@pytest.mark.real_clock(SIGNALS)
def test_a_drill_whose_parent_dies_ends_every_process_it_started(
    tmp_path: Path, drills: Drills
) -> None:
    wrapper = [sys.executable, "-c", "import subprocess, sys; subprocess.call(sys.argv[1:])"]
    proc = drills.start(wrapper + DRILL, tmp_path)
    _faults_under_way(proc)
    under, folders, listen = drills.under(proc)
    assert len(folders) == 1 and len(listen) >= 2
    proc.kill()  # the wrapper, as a supervisor dies; the drill sees its parent go
    proc.wait()
    assert proc.stderr is not None
    err = proc.stderr.read()  # to its end: the drill itself has exited
    assert survivors(under) == set()
    assert listening(listen) == set()
    assert not any(folder.exists() for folder in folders)
    assert "interrupted by SIGHUP" in err


@pytest.mark.real_clock(SIGNALS)
def test_a_drill_killed_with_sigkill_leaves_no_process_nor_folder_behind(
    tmp_path: Path, drills: Drills
) -> None:
    proc = drills.start(DRILL, tmp_path)
    _faults_under_way(proc)
    under, folders, listen = drills.under(proc)
    assert len(folders) == 1 and len(listen) >= 2
    proc.kill()
    proc.communicate(timeout=60)
    assert survivors(under) == set()
    assert listening(listen) == set()
    assert not any(folder.exists() for folder in folders)


@pytest.mark.parametrize(
    "bad",
    [
        ["--command", "true"],
        ["--rate", "abc"],
        ["--workload", "nosuch:x"],
        ["--each-kind", "--duration", "5", "--rate", "1/10s"],
    ],
)
def test_a_usage_error_starts_nothing(bad: list[str], tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tmp_path / "redis-started"
    fake = bin_dir / "redis-server"
    fake.write_text(f'#!/bin/sh\necho $$ >> {marker}\nexec /usr/bin/redis-server "$@"\n')
    fake.chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    args = ["drill", "--command", "true {port}", "--own-redis", *bad, "-o", "json"]
    done = run(*args, env={"PATH": path}, process=True)
    assert done.returncode == 2, done.stderr
    assert not marker.exists(), "a redis-server was started for a drill that could not run"


def test_an_unreachable_store_is_reported_before_any_executor_starts(tmp_path: Path) -> None:
    marker = tmp_path / "executor-started"
    command = f"sh -c 'touch {marker}; sleep 30' {{port}}"
    done = run(
        "drill",
        "--command",
        command,
        "--store",
        "redis://127.0.0.1:1/0",
        "-o",
        "json",
        process=True,
    )
    assert done.returncode == 4, done.stderr
    assert "store_unavailable" in done.stderr
    assert not marker.exists()
