"""Running the ``rill-executor`` command, as an operator would.

``run`` calls the command's real ``main`` group in this process (click's ``CliRunner``):
the same parsing, the same commands, the same exit statuses, stdout and stderr kept apart,
without a new interpreter's start-up for each call. ``run(..., process=True)`` starts the
installed command as a process instead; a test must, when the process itself is what it
checks:

- the entry point: that ``pip install`` put a ``rill-executor`` on the path that starts
  the group (``test_cli.py``);
- what only a real process has: its exit status as the shell sees it when the
  interpreter ends (uncaught errors, ``sys.exit`` in the extra's import guard), signals
  sent to it, its parent's death, and real streams (a pipe closed under it, a TTY, the
  locale's encoding);
- the drill (``tests/drill``): it starts and reaps processes of its own and installs
  signal handlers, which belong to a process of its own, never to the test run's.

In-process calls share the test run's globals, so a command that leaves a store, a
connection, a thread, a warnings hook or a logging handler behind shows here as a leak: a
thread still running fails the call, ``-W error`` turns an unclosed socket into a failure.
Such a leak is the command's defect, fixed in the command. (A closed SQLite connection's
file may stay open while another connection of the process holds the database: SQLite
keeps it until the last one closes, so as not to drop that one's POSIX locks.)
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import traceback
import warnings
from collections.abc import Mapping
from pathlib import Path

from click.testing import CliRunner

from rill_executor.cli import main

EXE = Path(sys.executable).parent / "rill-executor"


def run(
    *args: str, env: Mapping[str, str] | None = None, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """The command with ``args``; no ``RILL_*`` variable of the test run leaks into it.

    In this process unless ``process`` (see the module's docstring for when a test needs a
    real one)."""
    if process:
        return _process(args, env or {})
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("RILL_")}
    before = set(threading.enumerate())
    with warnings.catch_warnings():
        # As in a process of its own: a warning is shown (on stderr, by the command's own
        # hook), not raised as the test run's ``-W error`` would; a leaked socket or file
        # still fails the test.
        warnings.resetwarnings()
        warnings.simplefilter("default")
        warnings.simplefilter("error", ResourceWarning)
        result = CliRunner().invoke(
            main, list(args), env=unset | dict(env or {}), prog_name="rill-executor"
        )
    stderr = result.stderr
    if result.exc_info is not None and not isinstance(result.exc_info[1], SystemExit):
        # What the interpreter would print of an uncaught error, so a test sees it.
        stderr += "".join(traceback.format_exception(*result.exc_info))
    _no_thread_left(before, args)
    return subprocess.CompletedProcess(
        ["rill-executor", *args], result.exit_code, result.stdout, stderr
    )


def _no_thread_left(before: set[threading.Thread], args: tuple[str, ...]) -> None:
    """A command ends every thread it started (a process's end would hide one it forgot);
    a thread of the test's own (a server answering the command) is given time to end."""
    for thread in set(threading.enumerate()) - before:
        thread.join(timeout=5)
    left = [t.name for t in set(threading.enumerate()) - before]
    assert not left, f"rill-executor {' '.join(args)} left threads running: {left}"


def _process(args: tuple[str, ...], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    assert EXE.exists(), f"{EXE} is missing: install rill-executor[cli] in this environment"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RILL_")}
    return subprocess.run(
        [EXE, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=clean | dict(env),
    )


def opts(store_url: str, namespace: str) -> tuple[str, ...]:
    return ("--store", store_url, "--namespace", namespace)
