"""The outbox: completion notices written by the fenced finish (invariant 10)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from ... import Conflict, InProgress, JobState, Replay, StaleAttempt, UsageError, fingerprint_of
from ...store import Watch
from .._driver import DrivenLedger, LedgerDriver, is_claim
from ._fixtures import KitBase
from ._support import _stable

__all__ = ["Outbox"]


class Outbox(KitBase):
    """Part of ``StoreConformance``: the group ``outbox``."""

    # -- the outbox: completion notices written by the fenced finish (invariant 10) --------

    def test_watches_of_a_running_job_become_notices_at_its_finish(
        self, ledger: DrivenLedger
    ) -> None:
        owner = ledger.claim("k", watch=Watch("task-1", {"url": "http://engine/cb?ts=1"}))
        busy = ledger.claim("k", watch=Watch("task-2", {"url": "http://engine/cb?ts=2"}))
        assert isinstance(busy, InProgress)
        again = ledger.claim("k", watch=Watch("task-1", {"url": "http://engine/cb?ts=3"}))
        assert isinstance(again, InProgress)
        status = ledger.status("k")
        assert status is not None and status.notices == ()
        assert status.watchers == {
            "task-1": {"url": "http://engine/cb?ts=3"},
            "task-2": {"url": "http://engine/cb?ts=2"},
        }
        owner.commit({"uri": "s3://out/1"})
        status = ledger.status("k")
        assert status is not None and status.watchers == {}
        assert sorted(
            (n.watch, n.target["url"], n.fence, n.state, n.status) for n in status.notices
        ) == [
            ("task-1", "http://engine/cb?ts=3", owner.fence, JobState.SUCCEEDED, "pending"),
            ("task-2", "http://engine/cb?ts=2", owner.fence, JobState.SUCCEEDED, "pending"),
        ]

    def test_a_watch_on_an_ended_job_is_answered_from_the_stored_outcome(
        self, ledger: DrivenLedger
    ) -> None:
        ledger.claim("ok").commit("done")
        replay = ledger.claim("ok", watch=Watch("task", {"url": "u1"}))
        assert isinstance(replay, Replay)
        resent = ledger.claim("ok", watch=Watch("task", {"url": "u2"}))
        assert isinstance(resent, Replay)
        status = ledger.status("ok")
        assert status is not None
        assert [(n.watch, n.target, n.state) for n in status.notices] == [
            ("task", {"url": "u2"}, JobState.SUCCEEDED)
        ]
        ledger.claim("doomed").fail("unsupported codec", retryable=False)
        ledger.claim("doomed", watch=Watch("task", {"url": "u"}))
        doomed = ledger.status("doomed")
        assert doomed is not None and len(doomed.notices) == 1
        notice = doomed.notices[0]
        assert notice.state is JobState.FAILED and notice.error is not None
        assert notice.error.message == "unsupported codec"

    def test_a_redispatch_while_its_notice_is_being_sent_gets_a_notice_of_its_own(
        self, ledger: DrivenLedger
    ) -> None:
        """A redo arriving while the callback to the earlier dispatch is on the wire: that
        notice keeps its target, and the redo's is sent after it (else the redone engine task
        would wait for a callback nobody sends)."""
        ledger.claim("ok", watch=Watch("task", {"url": "u1"})).commit("done")
        (sending,) = ledger.lease_notices(owner="d", lease=30)
        ledger.claim("ok", watch=Watch("task", {"url": "u1"}))  # the engine's resend: no more
        ledger.claim("ok", watch=Watch("task", {"url": "u2"}))  # the redo
        assert ledger.settle_notice(sending, "delivered", "ok", detail="200")
        assert sending.info.target == {"url": "u1"}
        (redo,) = ledger.lease_notices(owner="d", lease=30)
        assert (redo.info.target, redo.info.fence) == ({"url": "u2"}, sending.info.fence)
        assert ledger.settle_notice(redo, "delivered", "ok", detail="200")
        status = ledger.status("ok")
        assert status is not None
        assert [(n.target, n.status) for n in status.notices] == [
            ({"url": "u1"}, "delivered"),
            ({"url": "u2"}, "delivered"),
        ]
        report = ledger.drill()
        assert report.broken == ()

    def test_a_resent_dispatch_already_answered_gets_no_second_notice(
        self, ledger: DrivenLedger
    ) -> None:
        ledger.claim("ok", watch=Watch("task", {"url": "u1"})).commit("done")
        (sent,) = ledger.lease_notices(owner="d", lease=30)
        assert ledger.settle_notice(sent, "delivered", "ok", detail="200")
        ledger.claim("ok", watch=Watch("task", {"url": "u1"}))  # the same dispatch, resent
        status = ledger.status("ok")
        assert status is not None
        assert [(n.target, n.status) for n in status.notices] == [({"url": "u1"}, "delivered")]
        ledger.claim("ok", watch=Watch("task", {"url": "u2"}))  # a new dispatch of the task
        status = ledger.status("ok")
        assert status is not None
        assert [(n.target, n.status) for n in status.notices] == [
            ({"url": "u1"}, "delivered"),
            ({"url": "u2"}, "pending"),
        ]

    def test_a_conflicting_request_leaves_no_watch(self, ledger: DrivenLedger) -> None:
        ledger.claim("k", fingerprint=fingerprint_of(1))
        before = _stable(ledger.status("k"))
        conflict = ledger.claim("k", fingerprint=fingerprint_of(2), watch=Watch("t", "u"))
        assert isinstance(conflict, Conflict)
        assert _stable(ledger.status("k")) == before

    def test_a_failure_notifies_too_and_a_zombie_notifies_nothing(
        self, ledger: DrivenLedger
    ) -> None:
        zombie = ledger.claim("k", watch=Watch("task", {"try": 1}), lease=0.2)
        time.sleep(0.3)
        heir = ledger.claim("k", watch=Watch("task-retry", {"try": 2}))
        assert is_claim(heir)
        with pytest.raises(StaleAttempt):
            zombie.commit("zombie result")
        status = ledger.status("k")
        assert status is not None and status.notices == ()
        heir.fail("network down", retryable=True)
        status = ledger.status("k")
        assert status is not None
        assert sorted((n.watch, n.fence, n.state) for n in status.notices) == [
            ("task", heir.fence, JobState.FAILED),
            ("task-retry", heir.fence, JobState.FAILED),
        ]

    def test_notices_are_leased_to_one_deliverer_at_a_time(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        ledger = driver.ledger(namespace, lease=30)
        other = driver.ledger(namespace + "x", lease=30)
        for n in range(6):
            ledger.claim(f"k{n}", watch=Watch("t", {"n": n})).commit({"n": n})
        other.claim("elsewhere", watch=Watch("t", {})).commit("not ours")
        leased: list[list[Any]] = [[], []]

        def deliverer(i: int) -> None:
            leased[i] = ledger.lease_notices(owner=f"d{i}", lease=30, limit=4)

        threads = [threading.Thread(target=deliverer, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        got = [(n.key, n.info.id) for batch in leased for n in batch]
        assert sorted(got) == sorted({(f"k{n}", "1.1") for n in range(6)})  # each once
        assert {n.result["n"] for batch in leased for n in batch} == set(range(6))
        assert ledger.lease_notices(owner="d3", lease=30) == []  # all leased
        mine = leased[0][0]
        stolen = type(mine)(mine.job_id, mine.namespace, mine.key, "intruder", mine.info, None)
        assert not ledger.settle_notice(stolen, "delivered", "ok")  # not its lease
        assert ledger.settle_notice(mine, "delivered", "ok")

    def test_a_settled_notice_is_done_a_pending_one_comes_back(self, ledger: DrivenLedger) -> None:
        for key in ("a", "b", "c"):
            ledger.claim(key, watch=Watch("t", key)).commit(key)
        due = {n.key: n for n in ledger.lease_notices(owner="d", lease=30)}
        assert sorted(due) == ["a", "b", "c"]
        assert ledger.settle_notice(due["a"], "delivered", "ok", detail="200")
        assert ledger.settle_notice(due["b"], "dropped", "refused", detail="400 30109")
        assert ledger.settle_notice(due["c"], "pending", "retry_later", retry_in=0.3)
        assert not ledger.settle_notice(due["a"], "delivered", "ok")  # settled already
        assert ledger.lease_notices(owner="d", lease=30) == []
        time.sleep(0.4)
        (again,) = ledger.lease_notices(owner="e", lease=30)
        assert again.key == "c" and again.info.attempts == 2
        statuses = {k: ledger.status(k) for k in ("a", "b", "c")}
        a, b = statuses["a"], statuses["b"]
        assert a is not None and a.notices[0].status == "delivered"
        assert a.notices[0].outcome == "ok" and a.notices[0].settled_at is not None
        assert b is not None and (b.notices[0].status, b.notices[0].detail) == (
            "dropped",
            "400 30109",
        )

    def test_a_notice_given_back_unsent_counts_no_try(self, ledger: DrivenLedger) -> None:
        """A deliverer that may not send a notice (invariant 20) gives it back: pending,
        its lease's try taken off again, the reason kept; the next deliverer's try is the
        notice's first, so its doubling delay and its give-up count start there."""
        ledger.claim("k", watch=Watch("t", {"url": "http://engine-a/cb"})).commit("done")
        (passed,) = ledger.lease_notices(owner="b", lease=30)
        with pytest.raises(UsageError, match="stays pending"):
            ledger.settle_notice(passed, "dropped", "passed_over", tried=False)
        for _ in range(3):
            assert ledger.settle_notice(
                passed, "pending", "passed_over", detail="not engine-b's", tried=False
            )
            status = ledger.status("k")
            assert status is not None
            (notice,) = status.notices
            assert (notice.status, notice.attempts, notice.outcome, notice.detail) == (
                "pending",
                0,
                "passed_over",
                "not engine-b's",
            )
            (passed,) = ledger.lease_notices(owner="b", lease=30)
            assert passed.info.attempts == 1
        assert ledger.settle_notice(passed, "delivered", "ok")
        status = ledger.status("k")
        assert status is not None and status.notices[0].attempts == 1

    def test_a_lapsed_delivery_lease_frees_the_notice(self, ledger: DrivenLedger) -> None:
        ledger.claim("k", watch=Watch("t", "u")).commit("done")
        (first,) = ledger.lease_notices(owner="crashed", lease=0.2)
        assert ledger.lease_notices(owner="other", lease=30) == []
        time.sleep(0.3)
        (second,) = ledger.lease_notices(owner="other", lease=30)
        assert second.info.id == first.info.id and second.info.attempts == 2
        assert not ledger.settle_notice(first, "delivered", "ok")  # its lease ran out
        assert ledger.settle_notice(second, "delivered", "ok")

    def test_a_delivery_lease_that_ran_out_settles_nothing(self, ledger: DrivenLedger) -> None:
        ledger.claim("k", watch=Watch("t", "u")).commit("done")
        (first,) = ledger.lease_notices(owner="slow", lease=0.2)
        time.sleep(0.3)
        # no other deliverer took the notice, yet its owner's lease ran out: not settled
        assert not ledger.settle_notice(first, "delivered", "ok")
        (again,) = ledger.lease_notices(owner="slow", lease=30)
        assert again.info.id == first.info.id and again.info.attempts == 2

    def test_a_watched_job_whose_owner_lapsed_gets_one_lapse_notice(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        """Invariant 16: nobody else would tell the watchers of a job whose owner died."""
        ledger = driver.ledger(namespace, lease=1.0, retention=3600)
        owner = ledger.claim("k", watch=Watch("task", {"url": "u"}))
        ledger.claim("unwatched")  # nobody waits for it: no lapse notice
        assert ledger.lease_notices(owner="d", lease=30) == []  # the lease is live
        time.sleep(1.2)
        assert self._purge_all(ledger, dangling_after=0.1)[:2] == (1, 1)  # a watcher waits
        (lapse,) = ledger.lease_notices(owner="d", lease=30)
        assert (lapse.key, lapse.info.watch, lapse.info.state) == ("k", "", JobState.PROCESSING)
        assert lapse.info.fence == owner.fence and lapse.result is None
        assert ledger.lease_notices(owner="e", lease=30) == []  # one lapse per fence
        assert ledger.settle_notice(lapse, "delivered", "redriven")
        assert ledger.lease_notices(owner="e", lease=30) == []
        heir = ledger.claim("k", lease=0.2)  # the re-drive takes it over; the watches stay
        assert is_claim(heir)
        status = ledger.status("k")
        assert status is not None and status.watchers == {"task": {"url": "u"}}
        time.sleep(0.4)
        (again,) = ledger.lease_notices(owner="e", lease=30)
        assert again.info.state is JobState.PROCESSING and again.info.fence == heir.fence

    def test_a_renewed_lease_is_no_lapse_and_a_finish_answers_the_watch(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        ledger = driver.ledger(namespace, lease=1.2, retention=3600)
        owner = ledger.claim("k", watch=Watch("task", {"url": "u"}))
        time.sleep(0.3)
        owner.heartbeat(lease=5)
        time.sleep(1.0)  # past the first lease's end
        assert ledger.lease_notices(owner="d", lease=30) == []
        owner.commit("done")
        (done,) = ledger.lease_notices(owner="d", lease=30)
        assert (done.info.watch, done.info.state) == ("task", JobState.SUCCEEDED)
