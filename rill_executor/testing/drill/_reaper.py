"""Everything a drill starts ends with it, however the drill ends.

The drill ends its executors and its Redis itself when it returns or raises. For the ends
it cannot see, ``Reaper`` starts a watchdog process of its own session and tells it, on a
pipe, each process group the drill starts and each folder it must not leave behind; when
that pipe closes (the drill exited, however: SIGKILL included), the watchdog kills the
groups still registered and removes the folders. A process started but not registered yet
when a SIGKILL ends the drill (between its fork and ``watch``) is found by the mark every
process the drill starts carries in its environment (``Reaper.env``): on Linux the watchdog
also kills, until it finds none for a while, every process whose environment has it.
``interruptible`` turns SIGTERM, SIGINT, SIGHUP and the death of the drill's parent (a
supervisor, ``timeout``, a closed terminal) into ``DrillInterrupted`` in the main thread, so
the drill unwinds and cleans up; given the reaper, it holds an interruption back while a
process is started and registered (``Reaper.starting``), so that none is started and
forgotten.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType, TracebackType

__all__ = ["DrillInterrupted", "Reaper", "interruptible"]

MARK = "RILL_DRILL_REAPER"
"""The environment variable that marks the processes of one drill (its value: the drill's)."""

# The watchdog: "+ PGID" / "- PGID" / "+dir PATH" / "-dir PATH" lines; at EOF, the rest goes,
# then the marked processes (argv[1] is the mark), until none is found for half a second.
_WATCHDOG = """
import os, shutil, signal, sys, time
groups, folders = set(), set()
for line in sys.stdin:
    verb, _, what = line.rstrip("\\n").partition(" ")
    {"+": groups.add, "-": groups.discard, "+dir": folders.add, "-dir": folders.discard}[verb](what)
for pgid in groups:
    try:
        os.killpg(int(pgid), signal.SIGKILL)
    except OSError:
        pass
def marked():
    found = set()
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                if sys.argv[1].encode() in environ.read().split(b"\\0"):
                    found.add(int(entry))
        except (OSError, ValueError):
            pass
    return found
quiet, deadline = 0, time.monotonic() + 10
while quiet < 5 and time.monotonic() < deadline:
    found = marked()
    quiet = 0 if found else quiet + 1
    for pid in found:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except OSError:
                pass
    time.sleep(0.1)
for folder in folders:
    shutil.rmtree(folder, ignore_errors=True)
"""


class Reaper:
    """The watchdog of a drill's processes and folders (see the module's docs). A context
    manager: on exit it closes the pipe, and the watchdog ends what is still registered."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.busy = False  # within ``starting``: an interruption waits for its end
        self.held: signal.Signals | None = None  # the interruption that waited
        self.env = {MARK: secrets.token_hex(8)}
        """What every process the drill starts adds to its environment: the watchdog's mark."""
        self._watchdog = subprocess.Popen(
            [sys.executable, "-I", "-c", _WATCHDOG, f"{MARK}={self.env[MARK]}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # neither a terminal's signals nor a group kill reach it
            text=True,
        )

    @contextmanager
    def starting(self) -> Iterator[None]:
        """Start a process and ``watch`` it within: an interruption (``interruptible``)
        waits until the end, then is raised (call it from the thread that runs the drill)."""
        self.busy = True
        try:
            yield
        finally:
            self.busy = False
        if self.held is not None:
            raise DrillInterrupted(self.held)

    def watch(self, pgid: int) -> None:
        """Kill process group ``pgid`` if the drill ends without ending it."""
        self._tell(f"+ {pgid}")

    def forget(self, pgid: int) -> None:
        """The group ended (and was reaped): its id may be some other group's next."""
        self._tell(f"- {pgid}")

    def remove_at_exit(self, folder: Path) -> None:
        self._tell(f"+dir {folder}")

    def _tell(self, line: str) -> None:
        stdin = self._watchdog.stdin
        assert stdin is not None
        # A watchdog gone (it cannot be, but by a kill of its own): the drill still cleans up.
        with self._lock, suppress(OSError, ValueError):
            stdin.write(line + "\n")
            stdin.flush()

    def close(self) -> None:
        with self._lock, suppress(OSError):
            assert self._watchdog.stdin is not None
            self._watchdog.stdin.close()
        try:
            self._watchdog.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._watchdog.kill()
            self._watchdog.wait()

    def __enter__(self) -> Reaper:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class DrillInterrupted(BaseException):
    """The drill was asked to stop (a signal, or its parent's death) before it was done.
    A ``BaseException``, as ``KeyboardInterrupt``: no ``except Exception`` swallows it."""

    def __init__(self, signum: signal.Signals) -> None:
        super().__init__(f"interrupted by {signum.name}")
        self.signal = signum


SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@contextmanager
def interruptible(reaper: Reaper | None = None, poll: float = 0.5) -> Iterator[None]:
    """Within it, SIGTERM, SIGINT and SIGHUP raise ``DrillInterrupted`` in the main thread
    (once: further ones are ignored while the drill cleans up; while ``reaper`` starts a
    process, when it is done), and so does the death of the parent process (as a SIGHUP),
    checked every ``poll`` seconds. A signal ignored on entry (``nohup``) stays ignored.
    Call it from the main thread."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        for each in SIGNALS:
            signal.signal(each, signal.SIG_IGN)
        if reaper is not None and reaper.busy:
            reaper.held = signal.Signals(signum)
            return
        raise DrillInterrupted(signal.Signals(signum))

    before = {s: signal.getsignal(s) for s in SIGNALS}
    for each in SIGNALS:
        if before[each] is not signal.SIG_IGN:
            signal.signal(each, interrupt)
    done = threading.Event()
    parent = os.getppid()

    def watch_parent() -> None:
        while not done.wait(poll):
            if os.getppid() != parent:  # re-parented: the parent is gone
                os.kill(os.getpid(), signal.SIGHUP)
                return

    watcher = threading.Thread(target=watch_parent, name="drill-parent-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        for each, handler in before.items():
            signal.signal(each, handler)
