"""Why a test waits on a real clock: the reasons ``@pytest.mark.real_clock`` gives.

Every other test runs the ledger on a ``VirtualClock`` or waits for nothing but the work it
starts. ``pytest -m real_clock --collect-only -q`` lists these, each with its reason.
"""

from __future__ import annotations

STORE_CLOCK = (
    "a lease or a retention runs out on a real store's own clock (its server's, SQLite's),"
    " which no test clock moves"
)
SIGNALS = (
    "real processes stopped, killed or interrupted with signals, and what they do once they go on"
)
DRILL = (
    "a fault drill: executors, a store and an engine as processes, faults injected over"
    " seconds of real time"
)
SYSTEM_CLOCK = "the process's own clock drives it: SystemClock, an event loop's timers"
SERVER_TIMER = "a server's own timer ends a connection or a session"
RECHECK = (
    "the store checks its server's durability again at most once a second on the process's"
    " clock, which the store's URL gives no test a way to move"
)
