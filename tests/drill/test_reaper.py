"""The drill's reaper: an interruption that lands while a process is being started waits
until the process is registered, so the watchdog still ends it."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from rill_executor.testing.drill import DrillInterrupted, Reaper, interruptible
from tests.clocks import SIGNALS


@pytest.mark.real_clock(SIGNALS)
def test_an_interruption_while_a_process_starts_waits_until_it_is_registered() -> None:
    with Reaper() as reaper, interruptible(reaper):
        started: list[subprocess.Popen[bytes]] = []
        with pytest.raises(DrillInterrupted, match="SIGTERM"), reaper.starting():
            os.kill(os.getpid(), signal.SIGTERM)  # between the fork and the registration
            time.sleep(0.2)  # the handler runs here, and holds the interruption back
            started.append(subprocess.Popen(["sleep", "60"], start_new_session=True))
            reaper.watch(started[0].pid)
        assert len(started) == 1, "interrupted before the process it started was registered"
        assert reaper.held is signal.SIGTERM
    # The reaper closed, its watchdog ended what was still registered.
    assert started[0].wait(timeout=10) == -signal.SIGKILL


@pytest.mark.real_clock(SIGNALS)
def test_a_process_started_but_not_yet_registered_ends_with_the_drill() -> None:
    """A SIGKILL of the drill between a process's fork and its ``watch``: the process
    carries the drill's mark, and the watchdog ends it all the same."""
    with Reaper() as reaper:
        unregistered = subprocess.Popen(
            ["sleep", "60"], env={**os.environ, **reaper.env}, start_new_session=True
        )
        stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        assert unregistered.wait(timeout=10) == -signal.SIGKILL
        assert stranger.poll() is None  # a process without the mark is not the drill's
    finally:
        stranger.kill()
        stranger.wait()
