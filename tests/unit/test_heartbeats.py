"""The shared heartbeat thread of a ledger wakes for every claim that needs it: a handler
that starts after the thread has gone idle, or one that is due before all the others."""

from __future__ import annotations

import gc
import time
import weakref

from rill_executor import InProgress, Ledger, current_claim, fingerprint_of


def _slow(ledger: Ledger, name: str, nap: float) -> list[object]:
    seen: list[object] = []

    @ledger.idempotent(key=lambda k: k, name=name)
    def slow(k: str) -> str:
        for _ in range(3):
            time.sleep(nap)
            seen.append(ledger.claim(f"{name}/{k}", fingerprint=fingerprint_of({"k": k})))
        return "survived"

    assert slow("k") == "survived"
    return seen


def test_a_handler_started_after_the_thread_went_idle_is_renewed() -> None:
    ledger = Ledger("memory://", namespace="hb", lease=0.3)
    for name in ("first", "second"):
        seen = _slow(ledger, name, 0.25)
        assert all(isinstance(s, InProgress) for s in seen), (name, seen)
        time.sleep(0.3)  # the thread drops the ended claim and sleeps with nothing due


def test_a_claim_due_before_the_others_wakes_the_thread() -> None:
    ledger = Ledger("memory://", namespace="hb", lease=0.3)

    @ledger.idempotent(key=lambda k: k, name="long", heartbeat=30)
    def idle(k: str) -> str:
        return k

    idle("k")  # leaves an entry due in 30 s at the head of the schedule
    time.sleep(0.2)  # the thread sleeps towards it
    seen = _slow(ledger, "short", 0.25)  # renewed every 0.1 s: must not wait 30 s
    assert all(isinstance(s, InProgress) for s in seen), seen


def test_many_short_calls_do_not_keep_their_ended_claims() -> None:
    # Each call queues its first renewal, due only in 10 s; a run of short calls must not
    # pile up that long a queue of ended claims (memory, and a slower push for every call).
    ledger = Ledger("memory://", namespace="hb", lease=30)
    alive: list[weakref.ref[object]] = []

    @ledger.idempotent(key=lambda k: k, name="short")
    def short(k: str) -> str:
        alive.append(weakref.ref(current_claim()))
        return k

    for i in range(500):
        short(str(i))
    gc.collect()
    assert sum(ref() is not None for ref in alive) <= 100
