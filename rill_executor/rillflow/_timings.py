"""The engine's timings, read in its source, and the deliverer's settings chosen against them.

Paths are in the engine's repository (``weibocom/rill-flow``); lines as of the revision the
protocol reference was written from.

- **Task lock.** A callback's finish runs under the task's lock
  (``FunctionTaskRunner.java:291``), as does a dispatch of the task, for the whole HTTP call
  (``FunctionTaskRunner.java:108``): at most two sends of connect 0.5 s + write 1.5 s +
  read 1.5 s. A waiter spins every 50 ms for at most 10 s (``RedisDistributedLocker.java:44``,
  ``:62``, ``:70``), then the callback is answered 500 with ``30101`` (``BizError.java:22``,
  ``:47``, ``:77``: code 1 + 30100). A lock whose holder died expires after 300 s
  (``RedisStorageProcedure.java:30``): until then every callback of that task gets 30101.
- **Timers.** Retries and timeouts are members of a Redis sorted set
  (``TimeCheckRunner.java:141-147``, ``:181-193``) read by a poll every 3 s
  (``FlowSchedulerJobs.java:38``, ``cron = "0/3 * * * * *"``; ``DefaultTimeChecker.java:118-135``):
  a timer fires up to 3 s after it is due.
- **Retry interval.** ``int(intervalInSeconds * multiplier ** invokeTimes)``
  (``SimpleRetryPolicy.java:64-76``; ``intervalInSeconds`` is an Integer, ``Retry.java:31``);
  0 dispatches at once, more waits for the poll (``DAGOperations.java:174-181``,
  ``FunctionTaskRunner.java:373``).
"""

from __future__ import annotations

__all__ = [
    "CALLBACK_TIMEOUT",
    "ENGINE_LOCK_EXPIRY",
    "ENGINE_LOCK_WAIT",
    "ENGINE_POLL",
    "MAX_ATTEMPTS",
    "NOTICE_LEASE",
    "RETRY_BASE",
    "RETRY_CAP",
]

ENGINE_LOCK_WAIT = 10.0
"""Seconds a callback waits for the task lock before the engine answers 500/30101."""

ENGINE_LOCK_EXPIRY = 300.0
"""Seconds after which the engine's task lock of a dead holder expires."""

ENGINE_POLL = 3.0
"""Seconds between two polls of the engine's retry and timeout timers."""

CALLBACK_TIMEOUT = ENGINE_LOCK_WAIT + 2.0
"""Seconds a callback may take. Longer than the engine's lock wait, so that a callback
queued behind a dispatch of its task gets the engine's own answer (applied, or 30101)
rather than being cut and sent again while the first one may still be applied."""

NOTICE_LEASE = CALLBACK_TIMEOUT + 3.0
"""Seconds a deliverer holds a notice it sends. It must outlast one send (the callback
timeout) and the store write that settles it, or a second deliverer could send the same
notice meanwhile; any longer only delays the notice of a deliverer that died mid-send."""

RETRY_BASE = 1.0
"""Seconds before the first retry of a callback the engine did not take. A 30101 means the
engine already waited 10 s for the lock, longer than a dispatch holds it: try again soon."""

RETRY_CAP = 30.0
"""The longest delay between two tries. An engine back from an outage (or the 300-s expiry
of a dead holder's lock) gets the callback within 30 s, ten of its timer polls; a notice
costs at most two callbacks a minute meanwhile."""

MAX_ATTEMPTS = 240
"""Tries before a notice is dropped (its task then waits for the engine's own timeout).
With ``RETRY_CAP`` and full jitter the tries span about half an hour on average and far
more than the 310 s an engine lock of a dead holder can refuse a callback (lock expiry plus
one wait), whatever the draws: an outage of the engine shorter than that loses nothing."""
