"""The lifecycle rules as cases, written once and replayed on every store (``test_rules``).

Each case: the job built by real operations at clock offsets (seconds on the store's own
clock, see ``table``), one more operation, its outcome and the job as it is left. A lease
is 10 s, a finish's retention 60 s, a resolution's 90 s, a purge's dangling_after 30 s
(``table``). The rules they pin: ``rill_executor._rules.decisions`` (claim, fenced writes),
``_notices`` (watches, lapse notices, the outbox's leases), ``_purge``, ``_resolution``,
``_events``; and their SQL (``postgres.sql``, the client-decided flows of SQLite and
MariaDB) and Lua (``lua/*.lua``) twins.
"""

from __future__ import annotations

from typing import Any

from .table import (
    OP,
    RETENTION,
    At,
    Case,
    Claim,
    Commit,
    Ev,
    Event,
    Fail,
    Heartbeat,
    LeaseNotices,
    Notice,
    Purge,
    Resolve,
    Row,
    Settle,
    Step,
    Try,
)

__all__ = ["CASES"]

RUNNING = (Try("a1", 1, "running"),)
SUCCEEDED = (Try("a1", 1, "succeeded"),)
FAILED = (Try("a1", 1, "failed"),)
TAKEN_OVER = (Try("a1", 1, "expired"), Try("a2", 2, "running"))

# The job as step 0 (a1's claim at 0 s) left it, and as a commit at step 1 left it.
HELD = Row("processing", 1, lease=At(0, 10), attempts=RUNNING)
COMMITTED = Row("succeeded", 1, retain=At(1, RETENTION), result=1, attempts=SUCCEEDED)
# a2's takeover at step 1 (11 s) of a1's claim at step 0
RETAKEN = Row("processing", 2, "a2", lease=At(1, 10), attempts=TAKEN_OVER)
WATCHED = (Claim(0, watch="w1"),)
JUST_BEFORE = 10 - 1e-6  # 1 µs before the end of a lease taken at 0 s


def _claim() -> list[Case]:
    def case(name: str, given: tuple[Step, ...], op: Claim, ok: bool, row: Row) -> Case:
        return Case("claim", name, given, op, ok, row)

    fresh = Row("processing", 1, lease=OP(10), attempts=RUNNING)
    return [
        case("fresh key: fence 1", (), Claim(0), True, fresh),
        case("committed: replayed", (Claim(0), Commit(1)), Claim(2, "a2"), False, COMMITTED),
        case(
            "committed: replayed after its lease would have run out",
            (Claim(0), Commit(1)),
            Claim(20, "a2"),
            False,
            COMMITTED,
        ),
        case("live lease: in progress", (Claim(0),), Claim(5, "a2"), False, HELD),
        case(
            "lease run out: taken over, fence + 1, old attempt expired",
            (Claim(0),),
            Claim(11, "a2"),
            True,
            Row("processing", 2, "a2", lease=OP(10), attempts=TAKEN_OVER),
        ),
        case(
            "lease ends this very instant: taken over",
            (Claim(0),),
            Claim(10, "a2"),
            True,
            Row("processing", 2, "a2", lease=OP(10), attempts=TAKEN_OVER),
        ),
        case(
            "1 µs before the lease ends: in progress",
            (Claim(0),),
            Claim(JUST_BEFORE, "a2"),
            False,
            HELD,
        ),
        case(
            "heartbeat extended the lease: in progress",
            (Claim(0), Heartbeat(5)),
            Claim(11, "a2"),
            False,
            Row("processing", 1, lease=At(1, 10), attempts=RUNNING),
        ),
        case(
            "retryable failure: run again",
            (Claim(0), Fail(1)),
            Claim(2, "a2"),
            True,
            Row(
                "processing",
                2,
                "a2",
                lease=OP(10),
                attempts=(Try("a1", 1, "failed"), Try("a2", 2, "running")),
            ),
        ),
        case(
            "terminal failure: replayed",
            (Claim(0), Fail(1, retryable=False)),
            Claim(2, "a2"),
            False,
            Row("failed", 1, retain=At(1, RETENTION), retryable=False, attempts=FAILED),
        ),
        case(
            "other fingerprint: conflict, nothing written",
            (Claim(0), Commit(1)),
            Claim(2, "a2", fingerprint="f2"),
            False,
            COMMITTED,
        ),
        case(
            "other result version on a run-out lease: conflict, not a takeover",
            (Claim(0),),
            Claim(11, "a2", version="v2"),
            False,
            HELD,
        ),
        case(
            "retention passed: claimed again whatever the fingerprint",
            (Claim(0), Commit(1)),
            Claim(62, "a2", fingerprint="f2"),
            True,
            Row(
                "processing",
                2,
                "a2",
                lease=OP(10),
                attempts=(Try("a1", 1, "succeeded"), Try("a2", 2, "running")),
            ),
        ),
        case(
            "retention not yet passed: the fingerprint still binds",
            (Claim(0), Commit(1)),
            Claim(59, "a2", fingerprint="f2"),
            False,
            COMMITTED,
        ),
        case(
            "retention ends this very instant: claimed again",
            (Claim(0), Commit(1)),
            Claim(61, "a2", fingerprint="f2"),
            True,
            Row(
                "processing",
                2,
                "a2",
                lease=OP(10),
                attempts=(Try("a1", 1, "succeeded"), Try("a2", 2, "running")),
            ),
        ),
        case(
            "1 µs before retention ends: the fingerprint still binds",
            (Claim(0), Commit(1)),
            Claim(61 - 1e-6, "a2", fingerprint="f2"),
            False,
            COMMITTED,
        ),
        case(
            "redone by an operator: claimed again whatever the fingerprint",
            (Claim(0), Fail(1, retryable=False), Resolve(2, "redo")),
            Claim(3, "a2", fingerprint="f2"),
            True,
            Row(
                "processing",
                3,
                "a2",
                lease=OP(10),
                attempts=(Try("a1", 1, "failed"), Try("a2", 3, "running")),
                events=(Ev("resolved", 2, "redo", At(2), lease_live=False),),
            ),
        ),
        case(
            "terminated by an operator: replayed as the failure",
            (Claim(0), Resolve(11, "terminate")),
            Claim(12, "a2"),
            False,
            Row(
                "failed",
                2,
                None,
                retain=At(1, 90),
                retryable=False,
                attempts=(Try("a1", 1, "abandoned"),),
                events=(Ev("resolved", 2, "terminate", At(1), lease_live=False),),
            ),
        ),
        case(
            "reused by an operator with a result: replayed",
            (Claim(0), Fail(1), Resolve(2, "reuse", result=2)),
            Claim(3, "a2"),
            False,
            Row(
                "succeeded",
                2,
                None,
                retain=At(2, RETENTION),
                result=2,
                attempts=FAILED,
                events=(Ev("resolved", 2, "reuse", At(2), lease_live=False),),
            ),
        ),
        Case(
            "claim",
            "purged: claimed again, the fence going on from the purged record's",
            (Claim(0), Commit(1), Purge(62)),
            Claim(63, "a2"),
            True,
            Row("processing", 2, "a2", lease=OP(10), attempts=(Try("a2", 2, "running"),)),
        ),
        case(
            "fresh key with a watch: the watch kept with the job",
            (),
            Claim(0, watch="w1"),
            True,
            Row("processing", 1, lease=OP(10), attempts=RUNNING, watchers=("w1",)),
        ),
        case(
            "committed, with a watch: answered by a notice at once",
            (Claim(0), Commit(1)),
            Claim(2, "a2", watch="w2"),
            False,
            Row(
                "succeeded",
                1,
                retain=At(1, RETENTION),
                result=1,
                attempts=SUCCEEDED,
                notices=(Notice("w2", 1, "succeeded"),),
            ),
        ),
        case(
            "live lease, with a watch: the watch waits for the end",
            (Claim(0),),
            Claim(5, "a2", watch="w2"),
            False,
            Row("processing", 1, lease=At(0, 10), attempts=RUNNING, watchers=("w2",)),
        ),
    ]


def _heartbeat() -> list[Case]:
    def case(name: str, given: tuple[Step, ...], op: Heartbeat, ok: bool, row: Row | None) -> Case:
        return Case("heartbeat", name, given, op, ok, row)

    return [
        case(
            "owner, live lease: extended from now",
            (Claim(0),),
            Heartbeat(5),
            True,
            Row("processing", 1, lease=OP(10), attempts=RUNNING),
        ),
        case(
            "superseded fence: refused, nothing written",
            (Claim(0), Claim(11, "a2")),
            Heartbeat(12),
            False,
            RETAKEN,
        ),
        case("lease run out: refused", (Claim(0),), Heartbeat(11), False, HELD),
        case("at the lease's very end: refused", (Claim(0),), Heartbeat(10), False, HELD),
        case(
            "1 µs before the lease ends: extended",
            (Claim(0),),
            Heartbeat(JUST_BEFORE),
            True,
            Row("processing", 1, lease=OP(10), attempts=RUNNING),
        ),
        case(
            "other attempt at the owner's fence: refused",
            (Claim(0),),
            Heartbeat(5, "a2"),
            False,
            HELD,
        ),
        case("finished job: refused", (Claim(0), Commit(1)), Heartbeat(2), False, COMMITTED),
        case("no job: refused", (), Heartbeat(0), False, None),
    ]


def _finish() -> list[Case]:
    def case(name: str, given: tuple[Step, ...], op: Commit | Fail, ok: bool, row: Row) -> Case:
        return Case("finish", name, given, op, ok, row)

    commit = Row("succeeded", 1, retain=OP(RETENTION), result=1, attempts=SUCCEEDED)
    fenced_off = Row(
        "failed",
        2,
        None,
        retain=At(1, 90),
        retryable=False,
        attempts=(Try("a1", 1, "fenced"),),
        events=(Ev("resolved", 2, "terminate", At(1), lease_live=True),),
    )
    return [
        case("commit by the owner: succeeded, retained", (Claim(0),), Commit(5), True, commit),
        case(
            "commit at a superseded fence: refused",
            (Claim(0), Claim(11, "a2")),
            Commit(12),
            False,
            RETAKEN,
        ),
        case(
            "commit by another attempt at the owner's fence",
            (Claim(0),),
            Commit(5, "a2"),
            False,
            HELD,
        ),
        case(
            "commit after the owner's lease ran out: refused", (Claim(0),), Commit(11), False, HELD
        ),
        case("commit at the lease's very end: refused", (Claim(0),), Commit(10), False, HELD),
        case("commit 1 µs before the lease ends", (Claim(0),), Commit(JUST_BEFORE), True, commit),
        case(
            "commit after a heartbeat kept the lease",
            (Claim(0), Heartbeat(5)),
            Commit(11),
            True,
            commit,
        ),
        case(
            "second commit: refused, the first result kept",
            (Claim(0), Commit(1)),
            Commit(2, result=2),
            False,
            COMMITTED,
        ),
        case(
            "retryable failure by the owner",
            (Claim(0),),
            Fail(5),
            True,
            Row("failed", 1, retain=OP(RETENTION), retryable=True, attempts=FAILED),
        ),
        case(
            "terminal failure by the owner",
            (Claim(0),),
            Fail(5, retryable=False),
            True,
            Row("failed", 1, retain=OP(RETENTION), retryable=False, attempts=FAILED),
        ),
        case(
            "failure at a superseded fence: refused",
            (Claim(0), Claim(11, "a2")),
            Fail(12, retryable=False),
            False,
            RETAKEN,
        ),
        case(
            "commit of a watched job: a notice per watch, in the same write",
            WATCHED,
            Commit(5),
            True,
            Row(
                "succeeded",
                1,
                retain=OP(RETENTION),
                result=1,
                attempts=SUCCEEDED,
                notices=(Notice("w1", 1, "succeeded"),),
            ),
        ),
        case(
            "failure of a watched job: a notice of the failure",
            WATCHED,
            Fail(5, retryable=False),
            True,
            Row(
                "failed",
                1,
                retain=OP(RETENTION),
                retryable=False,
                attempts=FAILED,
                notices=(Notice("w1", 1, "failed"),),
            ),
        ),
        case(
            "commit of an attempt an operator fenced off: refused",
            (Claim(0), Resolve(1, "terminate", force=True)),
            Commit(2),
            False,
            fenced_off,
        ),
    ]


def _lapse() -> list[Case]:
    def case(
        name: str, given: tuple[Step, ...], op: LeaseNotices, leased: tuple[Any, ...], row: Row
    ) -> Case:
        return Case("lapse notice", name, given, op, leased, row)

    watched = Row("processing", 1, lease=At(0, 10), attempts=RUNNING, watchers=("w1",))
    lapsed = Row(
        "processing",
        1,
        lease=At(0, 10),
        attempts=RUNNING,
        watchers=("w1",),
        notices=(Notice("", 1, "processing", leased=1, owner="d1"),),
    )
    moved = Row("processing", 1, lease=At(1, 10), attempts=RUNNING, watchers=("w1",))
    lapse = (("", "processing", 1),)
    sent = (Claim(0, watch="w1"), Commit(1), LeaseNotices(2))
    leased_once = Row(
        "succeeded",
        1,
        retain=At(1, RETENTION),
        result=1,
        attempts=SUCCEEDED,
        notices=(Notice("w1", 1, "succeeded", leased=1, owner="d1"),),
    )
    return [
        case("watched, lease live: none due", WATCHED, LeaseNotices(5), (), watched),
        case(
            "watched, lease run out: a lapse notice, leased",
            WATCHED,
            LeaseNotices(11),
            lapse,
            lapsed,
        ),
        case(
            "watched, lease ends this very instant: a lapse notice",
            WATCHED,
            LeaseNotices(10),
            lapse,
            lapsed,
        ),
        case("watched, 1 µs before: none due", WATCHED, LeaseNotices(JUST_BEFORE), (), watched),
        case(
            "a heartbeat moved the lease: none due",
            (Claim(0, watch="w1"), Heartbeat(5)),
            LeaseNotices(11),
            (),
            moved,
        ),
        case(
            "a heartbeat moved the lease, which then ran out",
            (Claim(0, watch="w1"), Heartbeat(5)),
            LeaseNotices(16),
            lapse,
            Row(
                "processing",
                1,
                lease=At(1, 10),
                attempts=RUNNING,
                watchers=("w1",),
                notices=(Notice("", 1, "processing", leased=1, owner="d1"),),
            ),
        ),
        case(
            "one lapse notice a fence, leased to one deliverer",
            (Claim(0, watch="w1"), LeaseNotices(11)),
            LeaseNotices(12, "d2"),
            (),
            lapsed,
        ),
        case("unwatched, lease run out: nothing due", (Claim(0),), LeaseNotices(11), (), HELD),
        case(
            "taken over: the new owner's lease end is watched too",
            (Claim(0, watch="w1"), Claim(11, "a2")),
            LeaseNotices(22),
            (("", "processing", 2),),
            Row(
                "processing",
                2,
                "a2",
                lease=At(1, 10),
                attempts=TAKEN_OVER,
                watchers=("w1",),
                notices=(Notice("", 2, "processing", leased=1, owner="d1"),),
            ),
        ),
        case(
            "a commit's notice: leased",
            (Claim(0, watch="w1"), Commit(1)),
            LeaseNotices(2),
            (("w1", "succeeded", 1),),
            leased_once,
        ),
        case("a leased notice: not leased twice", sent, LeaseNotices(3, "d2"), (), leased_once),
        case(
            "a notice whose lease ends this very instant: leased again",
            sent,
            LeaseNotices(32, "d2"),
            (("w1", "succeeded", 1),),
            Row(
                "succeeded",
                1,
                retain=At(1, RETENTION),
                result=1,
                attempts=SUCCEEDED,
                notices=(Notice("w1", 1, "succeeded", leased=2, owner="d2"),),
            ),
        ),
        case(
            "a notice whose lease ran out: leased again",
            sent,
            LeaseNotices(33, "d2"),
            (("w1", "succeeded", 1),),
            Row(
                "succeeded",
                1,
                retain=At(1, RETENTION),
                result=1,
                attempts=SUCCEEDED,
                notices=(Notice("w1", 1, "succeeded", leased=2, owner="d2"),),
            ),
        ),
    ]


def _settle() -> list[Case]:
    sent = (Claim(0, watch="w1"), Commit(1), LeaseNotices(2))
    leased = Row(
        "succeeded",
        1,
        retain=At(1, RETENTION),
        result=1,
        attempts=SUCCEEDED,
        notices=(Notice("w1", 1, "succeeded", leased=1, owner="d1"),),
    )
    delivered = Row(
        "succeeded",
        1,
        retain=At(1, RETENTION),
        result=1,
        attempts=SUCCEEDED,
        notices=(Notice("w1", 1, "succeeded", "delivered", leased=1),),
    )
    return [
        Case("settle", "by the lease holder: delivered", sent, Settle(3), True, delivered),
        Case("settle", "by another deliverer: refused", sent, Settle(3, owner="d2"), False, leased),
        Case("settle", "after its lease ran out: refused", sent, Settle(33), False, leased),
        Case("settle", "at its lease's very end: refused", sent, Settle(32), False, leased),
        Case("settle", "1 µs before its lease ends", sent, Settle(32 - 1e-6), True, delivered),
    ]


def _purge() -> list[Case]:
    def case(
        name: str, given: tuple[Step, ...], op: Purge, counts: tuple[int, int], row: Row | None
    ) -> Case:
        return Case("purge", name, given, op, counts, row)

    done = (Claim(0), Commit(1))
    redone = (Claim(0), Fail(1, retryable=False), Resolve(2, "redo"))
    released = Row(
        "failed",
        2,
        None,
        retain=At(2),
        retryable=True,
        attempts=FAILED,
        events=(Ev("resolved", 2, "redo", At(2), lease_live=False),),
    )
    notified = Row(
        "succeeded",
        1,
        retain=At(1, RETENTION),
        result=1,
        attempts=SUCCEEDED,
        notices=(Notice("w1", 1, "succeeded"),),
    )
    return [
        case("ended, within retention: kept", done, Purge(30), (0, 0), COMMITTED),
        case("ended, retention passed: deleted", done, Purge(62), (1, 0), None),
        case("dry run: counted, kept", done, Purge(62, dry_run=True), (1, 0), COMMITTED),
        case("processing, lease run out 31 s ago: deleted", (Claim(0),), Purge(41), (1, 0), None),
        case("processing, lease run out 25 s ago: kept", (Claim(0),), Purge(35), (0, 0), HELD),
        case(
            "processing, lease run out exactly 30 s ago: deleted",
            (Claim(0),),
            Purge(40),
            (1, 0),
            None,
        ),
        case(
            "processing, lease run out 30 s ago less 1 µs: kept",
            (Claim(0),),
            Purge(40 - 1e-6),
            (0, 0),
            HELD,
        ),
        case("ended, retention ends this very instant: deleted", done, Purge(61), (1, 0), None),
        case("ended, 1 µs before retention ends: kept", done, Purge(61 - 1e-6), (0, 0), COMMITTED),
        case(
            "retention passed, a notice pending: kept and counted",
            (Claim(0, watch="w1"), Commit(1)),
            Purge(62),
            (0, 1),
            notified,
        ),
        case(
            "retention passed, its notice delivered: deleted",
            (Claim(0, watch="w1"), Commit(1), LeaseNotices(2), Settle(3)),
            Purge(62),
            (1, 0),
            None,
        ),
        case(
            "watched, dangling: kept for its lapse notice",
            WATCHED,
            Purge(41),
            (0, 1),
            Row("processing", 1, lease=At(0, 10), attempts=RUNNING, watchers=("w1",)),
        ),
        case("released by a redo, recently: kept", redone, Purge(20), (0, 0), released),
        case("released by a redo 31 s ago: deleted", redone, Purge(33), (1, 0), None),
        case("released by a redo exactly 30 s ago: deleted", redone, Purge(32), (1, 0), None),
        case(
            "released by a redo 30 s ago less 1 µs: kept",
            redone,
            Purge(32 - 1e-6),
            (0, 0),
            released,
        ),
        case(
            "terminal failure, retention passed: deleted",
            (Claim(0), Fail(1, retryable=False)),
            Purge(62),
            (1, 0),
            None,
        ),
    ]


def _resolve() -> list[Case]:
    def case(name: str, given: tuple[Step, ...], op: Resolve, ok: bool, row: Row | None) -> Case:
        return Case("resolve", name, given, op, ok, row)

    def event(action: str, live: bool, fence: int = 2, at: At | None = None) -> Ev:
        return Ev("resolved", fence, action, at or OP(), lease_live=live)

    return [
        case(
            "redo a terminal failure: released, fence + 1",
            (Claim(0), Fail(1, retryable=False)),
            Resolve(2, "redo"),
            True,
            Row(
                "failed",
                2,
                None,
                retain=OP(),
                retryable=True,
                attempts=FAILED,
                events=(event("redo", False),),
            ),
        ),
        case(
            "terminate under a live lease, not forced: refused",
            (Claim(0),),
            Resolve(5, "terminate"),
            False,
            HELD,
        ),
        case(
            "terminate under a live lease, forced: the owner fenced off",
            (Claim(0),),
            Resolve(5, "terminate", force=True),
            True,
            Row(
                "failed",
                2,
                None,
                retain=OP(90),
                retryable=False,
                attempts=(Try("a1", 1, "fenced"),),
                events=(event("terminate", True),),
            ),
        ),
        case(
            "terminate at the lease's very end: not live, abandoned",
            (Claim(0),),
            Resolve(10, "terminate"),
            True,
            Row(
                "failed",
                2,
                None,
                retain=OP(90),
                retryable=False,
                attempts=(Try("a1", 1, "abandoned"),),
                events=(event("terminate", False),),
            ),
        ),
        case(
            "terminate 1 µs before the lease ends, not forced: refused",
            (Claim(0),),
            Resolve(JUST_BEFORE, "terminate"),
            False,
            HELD,
        ),
        case(
            "terminate after the lease ran out: the owner's attempt abandoned",
            (Claim(0),),
            Resolve(11, "terminate"),
            True,
            Row(
                "failed",
                2,
                None,
                retain=OP(90),
                retryable=False,
                attempts=(Try("a1", 1, "abandoned"),),
                events=(event("terminate", False),),
            ),
        ),
        case(
            "reuse the committed result: its own retention kept",
            (Claim(0), Commit(1)),
            Resolve(2, "reuse"),
            True,
            Row(
                "succeeded",
                2,
                None,
                retain=OP(RETENTION),
                result=1,
                attempts=SUCCEEDED,
                events=(event("reuse", False),),
            ),
        ),
        case(
            "reuse with no result to reuse: refused",
            (Claim(0), Fail(1, retryable=False)),
            Resolve(2, "reuse"),
            False,
            Row("failed", 1, retain=At(1, RETENTION), retryable=False, attempts=FAILED),
        ),
        case(
            "reuse with a result given: succeeded",
            (Claim(0), Fail(1, retryable=False)),
            Resolve(2, "reuse", result=2),
            True,
            Row(
                "succeeded",
                2,
                None,
                retain=OP(RETENTION),
                result=2,
                attempts=FAILED,
                events=(event("reuse", False),),
            ),
        ),
        case("no job: refused", (), Resolve(0, "terminate"), False, None),
        case(
            "terminate a watched job: its watches told, at the new fence",
            WATCHED,
            Resolve(1, "terminate", force=True),
            True,
            Row(
                "failed",
                2,
                None,
                retain=OP(90),
                retryable=False,
                attempts=(Try("a1", 1, "fenced"),),
                notices=(Notice("w1", 2, "failed"),),
                events=(event("terminate", True),),
            ),
        ),
        case(
            "redo a watched job: its watches wait for the run it asks for",
            WATCHED,
            Resolve(1, "redo", force=True),
            True,
            Row(
                "failed",
                2,
                None,
                retain=OP(),
                retryable=True,
                attempts=(Try("a1", 1, "fenced"),),
                watchers=("w1",),
                events=(event("redo", True),),
            ),
        ),
        case(
            "resolved twice: fence + 1 again, the recorded retention kept",
            (Claim(0), Commit(1), Resolve(2, "reuse")),
            Resolve(3, "terminate"),
            True,
            Row(
                "failed",
                3,
                None,
                retain=OP(RETENTION),
                retryable=False,
                attempts=SUCCEEDED,
                events=(event("reuse", False, 2, At(2)), event("terminate", False, 3)),
            ),
        ),
    ]


def _events() -> list[Case]:
    refused = Ev("token_refused", 1, None, OP())
    many = tuple(Event(1) for _ in range(64))
    kept = tuple(Ev("token_refused", 1, None, At(i + 1)) for i in range(64))
    return [
        Case(
            "event log",
            "appended, stamped on the store's clock",
            (Claim(0),),
            Event(1),
            True,
            Row("processing", 1, lease=At(0, 10), attempts=RUNNING, events=(refused,)),
        ),
        Case("event log", "no job: nothing written", (), Event(0), False, None),
        Case(
            "event log",
            "full: the first 64 kept, the rest counted",
            (Claim(0), *many),
            Event(1),
            True,
            Row("processing", 1, lease=At(0, 10), attempts=RUNNING, events=kept, dropped=1),
        ),
        Case(
            "event log",
            "full: a resolution still recorded",
            (Claim(0), *many, Event(1)),
            Resolve(11, "terminate"),
            True,
            Row(
                "failed",
                2,
                None,
                retain=OP(90),
                retryable=False,
                attempts=(Try("a1", 1, "abandoned"),),
                events=(*kept, Ev("resolved", 2, "terminate", OP(), lease_live=False)),
                dropped=1,
            ),
        ),
    ]


CASES: list[Case] = [
    *_claim(),
    *_heartbeat(),
    *_finish(),
    *_lapse(),
    *_settle(),
    *_purge(),
    *_resolve(),
    *_events(),
]
