"""Claims and fencing (invariants 1, 2, 6, 9 and 13 of docs/concepts.md, "Invariants")."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from ... import (
    MAX_KEY_BYTES,
    AttemptOutcome,
    ConfigError,
    Conflict,
    InProgress,
    InvalidKey,
    InvalidPayload,
    JobState,
    KeyConflict,
    OutcomeUnknown,
    Replay,
    ResultNotSerializable,
    ResultTooLarge,
    StaleAttempt,
    StoreUnavailable,
    fingerprint_of,
)
from .._driver import DrivenLedger, LedgerDriver, is_claim
from .._model import lifecycle_machine
from ._fixtures import KitBase
from ._support import _counting, _LosingReplies, _stable

__all__ = ["ClaimsAndFencing"]


class ClaimsAndFencing(KitBase):
    """Part of ``StoreConformance``: the group ``claims``."""

    # -- claim outcomes --------------------------------------------------------------------

    def test_fresh_claim_commit_then_replay(self, ledger: DrivenLedger) -> None:
        fp = fingerprint_of({"segment": 1})
        claim = ledger.claim("video-A:1:h264-v2", fingerprint=fp, result_version="h264-v2")
        assert is_claim(claim)
        assert claim.fence >= 1
        claim.commit({"uri": "s3://out/A/1"})
        replay = ledger.claim("video-A:1:h264-v2", fingerprint=fp, result_version="h264-v2")
        assert isinstance(replay, Replay) and replay.succeeded
        assert replay.result() == {"uri": "s3://out/A/1"}
        assert replay.fence == claim.fence and replay.result_version == "h264-v2"

    def test_concurrent_claim_answers_in_progress_with_owner(self, ledger: DrivenLedger) -> None:
        claim = ledger.claim("k")
        busy = ledger.claim("k")
        assert isinstance(busy, InProgress)
        assert busy.owner_attempt_id == claim.attempt_id and busy.fence == claim.fence
        assert timedelta(0) < busy.lease_left <= timedelta(seconds=30)
        assert abs(busy.since - datetime.now(UTC)) < timedelta(minutes=5)

    def test_other_fingerprint_or_version_is_a_conflict_and_writes_nothing(
        self, ledger: DrivenLedger
    ) -> None:
        claim = ledger.claim("k", fingerprint=fingerprint_of(1), result_version="v1")
        claim.commit(1)
        before = _stable(ledger.status("k"))
        for fingerprint, version in ((fingerprint_of(2), "v1"), (fingerprint_of(1), "v2")):
            conflict = ledger.claim("k", fingerprint=fingerprint, result_version=version)
            assert isinstance(conflict, Conflict)
            with pytest.raises(KeyConflict):
                raise conflict.error()
        assert _stable(ledger.status("k")) == before

    def test_attempt_id_and_lease_are_the_callers(self, ledger: DrivenLedger) -> None:
        claim = ledger.claim("k", attempt_id="dispatch-1700000000000", lease=90)
        assert claim.attempt_id == "dispatch-1700000000000"
        status = ledger.status("k")
        assert status is not None and status.owner is not None
        assert timedelta(seconds=60) < status.owner.lease_left <= timedelta(seconds=90)

    def test_namespaces_are_isolated(self, driver: LedgerDriver, namespace: str) -> None:
        one = driver.ledger(namespace, lease=30)
        two = driver.ledger(namespace + "x", lease=30)
        one.claim("shared-key").commit("one")
        claim = two.claim("shared-key")
        assert is_claim(claim)
        claim.commit("two")
        assert one.claim("shared-key").result() == "one"
        assert two.claim("shared-key").result() == "two"

    # -- fencing -----------------------------------------------------------------------------

    def test_takeover_after_expiry_fences_the_old_attempt(self, ledger: DrivenLedger) -> None:
        a = ledger.claim("k", lease=0.3)
        time.sleep(0.45)
        b = ledger.claim("k")
        assert is_claim(b) and b.fence > a.fence
        for write in (a.heartbeat, lambda: a.commit("from A"), lambda: a.fail("x", retryable=True)):
            with pytest.raises(StaleAttempt) as err:
                write()
            assert err.value.reason == "superseded" and err.value.current_fence == b.fence
        status = ledger.status("k")
        assert status is not None and status.state is JobState.PROCESSING
        assert status.owner is not None and status.owner.attempt_id == b.attempt_id
        b.commit("from B")
        status = ledger.status("k")
        assert status is not None and status.result == "from B"
        outcomes = {a.attempt_id: a.outcome for a in status.attempts}
        assert outcomes == {
            a.attempt_id: AttemptOutcome.EXPIRED,
            b.attempt_id: AttemptOutcome.SUCCEEDED,
        }

    def test_expired_lease_cannot_be_renewed_or_committed(self, ledger: DrivenLedger) -> None:
        a = ledger.claim("k", lease=0.2)
        time.sleep(0.3)
        before = _stable(ledger.status("k"))
        for write in (a.heartbeat, lambda: a.commit("late")):
            with pytest.raises(StaleAttempt) as err:
                write()
            assert err.value.reason == "lease_expired"
        assert _stable(ledger.status("k")) == before
        assert is_claim(ledger.claim("k"))

    def test_a_finished_attempt_cannot_write_again(self, ledger: DrivenLedger) -> None:
        a = ledger.claim("k")
        a.commit(1)
        for write in (a.heartbeat, lambda: a.commit(2), lambda: a.fail("x", retryable=True)):
            with pytest.raises(StaleAttempt) as err:
                write()
            assert err.value.reason == "finished"
        assert ledger.claim("k").result() == 1

    def test_paused_attempt_is_fenced_in_process(self, ledger: DrivenLedger) -> None:
        """The zombie, paused by simply not running: its writes bounce off B's fence."""
        a = ledger.claim("k", lease=0.25)
        time.sleep(0.4)
        b = ledger.claim("k", lease=30)
        b.commit({"by": "B"})
        with pytest.raises(StaleAttempt):
            a.heartbeat()
        with pytest.raises(StaleAttempt):
            a.commit({"by": "A"})
        assert ledger.claim("k").result() == {"by": "B"}

    # -- round trips -------------------------------------------------------------------------

    def test_every_operation_is_one_store_call(self, driver: LedgerDriver, namespace: str) -> None:
        calls: Counter[str] = Counter()
        ledger = driver.ledger(namespace, lease=30, wrap=lambda store: _counting(store, calls))
        claim = ledger.claim("k")
        assert calls == Counter(claim=1)
        claim.heartbeat()
        claim.commit(1)
        ledger.claim("k")
        ledger.status("k")
        assert calls == Counter(claim=2, heartbeat=1, finish=1, status=1)

    # -- bad input ---------------------------------------------------------------------------

    BAD_KEYS: tuple[Any, ...] = (
        "",
        "x" * (MAX_KEY_BYTES + 1),
        "é" * (MAX_KEY_BYTES // 2 + 1),
        b"\xff\xfe-not-utf8",
        "half\ud800surrogate",
        "tab\tinside",
        "nul\x00inside",
        12345,
        None,
    )

    def test_bad_keys_are_refused_and_change_nothing(self, ledger: DrivenLedger) -> None:
        ledger.claim("good").commit("kept")
        before = _stable(ledger.status("good"))
        for key in self.BAD_KEYS:
            with pytest.raises(InvalidKey):
                ledger.claim(key)
            with pytest.raises(InvalidKey):
                ledger.status(key)
        assert _stable(ledger.status("good")) == before
        assert MAX_KEY_BYTES == 512  # the documented limit
        for key in ("x" * 513, "é" * 257):
            with pytest.raises(InvalidKey):
                ledger.claim(key)
        assert is_claim(ledger.claim("x" * 512))
        longest = "é" * (MAX_KEY_BYTES // 2)
        assert is_claim(ledger.claim(longest))
        assert is_claim(ledger.claim(b"bytes-key-utf8-\xc3\xa9"))
        assert ledger.status("bytes-key-utf8-é") is not None

    def test_bad_payloads_are_refused_and_change_nothing(self, ledger: DrivenLedger) -> None:
        claim = ledger.claim("k", result_version="v1")
        before = _stable(ledger.status("k"))
        for options in (
            {"fingerprint": "not-a-digest"},
            {"fingerprint": fingerprint_of(1).upper()},
            {"result_version": ""},
            {"result_version": "v" * 200},
            {"attempt_id": ""},
            {"attempt_id": "a\nb"},
        ):
            with pytest.raises(InvalidPayload):
                ledger.claim("k", **options)
        for lease in (0, -1, "soon"):
            with pytest.raises(ConfigError):
                ledger.claim("k", lease=lease)
        with pytest.raises(ResultNotSerializable):
            claim.commit(object())
        with pytest.raises(ResultNotSerializable):
            claim.commit({"loop": float("nan"), "set": {object()}})
        assert _stable(ledger.status("k")) == before
        claim.commit("still the owner")
        assert ledger.claim("k", result_version="v1").result() == "still the owner"

    def test_oversized_result_is_refused_and_changes_nothing(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        ledger = driver.ledger(namespace, lease=30, max_result_bytes=1000)
        claim = ledger.claim("k")
        before = _stable(ledger.status("k"))
        with pytest.raises(ResultTooLarge) as err:
            claim.commit("x" * 1000)
        assert err.value.size > err.value.limit == 1000
        assert _stable(ledger.status("k")) == before
        claim.commit("x" * 990)

    def test_unsafe_configuration_is_refused(self, driver: LedgerDriver, namespace: str) -> None:
        for options in (
            {"lease": 30, "retention": 10},
            {"lease": 30, "retention": 3600, "duplicate_window": 7200},
            {"lease": timedelta(0)},
            {"lease": 30, "max_result_bytes": 0},
        ):
            with pytest.raises(ConfigError):
                driver.ledger(namespace, **options)
        for bad in ("", "has space", "x" * 65, "ünï"):
            with pytest.raises(ConfigError):
                driver.ledger(bad)

    # -- the lifecycle against an independent reference model ------------------------------

    def test_lifecycle_matches_the_reference_model(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        ledger = driver.ledger(namespace, lease=30, retention=3600)
        run_state_machine_as_test(
            lifecycle_machine(ledger),
            settings=settings(
                max_examples=30,
                stateful_step_count=20,
                deadline=None,
                suppress_health_check=list(HealthCheck),
            ),
        )

    # -- a lost reply is neither a false error nor a long wait (invariant 13) --------------

    @pytest.mark.parametrize("operation", ["claim", "heartbeat", "finish"])
    def test_an_applied_call_whose_reply_was_lost_is_resent_and_recognised(
        self, driver: LedgerDriver, namespace: str, operation: str
    ) -> None:
        losing = _LosingReplies(operation)
        ledger = driver.ledger(namespace, lease=30, wrap=losing.wrap)
        claim = ledger.claim("k")
        assert is_claim(claim) and claim.fence == 1
        claim.heartbeat()
        claim.commit("done")
        assert losing.lost == 1 and losing.calls == 2
        status = ledger.status("k")
        assert status is not None and status.state is JobState.SUCCEEDED
        assert status.result == "done" and status.fence == 1
        assert [(a.fence, a.outcome) for a in status.attempts] == [(1, AttemptOutcome.SUCCEEDED)]

    def test_a_decorated_call_survives_lost_replies(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        losing = _LosingReplies("claim", "finish")
        ledger = driver.ledger(namespace, lease=30, wrap=losing.wrap)
        runs: list[str] = []

        @ledger.idempotent(key=lambda k: k, name="h")
        def handler(k: str) -> str:
            runs.append(k)
            return f"done {k}"

        assert handler("k") == "done k" and runs == ["k"]
        assert losing.lost == 2
        status = ledger.status("k", handler="h")
        assert status is not None and status.state is JobState.SUCCEEDED
        assert [a.outcome for a in status.attempts] == [AttemptOutcome.SUCCEEDED]

    def test_a_finish_repeated_with_the_same_completion_is_applied_another_is_stale(
        self, ledger: DrivenLedger
    ) -> None:
        claim = ledger.claim("k")
        claim.commit({"uri": "s3://out/1"})
        claim.commit({"uri": "s3://out/1"})  # the same attempt, fence and completion
        rivals: list[Callable[[], None]] = [
            lambda: claim.commit({"uri": "s3://out/2"}),
            lambda: claim.fail("x", retryable=True),
        ]
        for write in rivals:
            with pytest.raises(StaleAttempt) as err:
                write()
            assert err.value.reason == "finished"
        status = ledger.status("k")
        assert status is not None and status.result == {"uri": "s3://out/1"}
        assert [a.outcome for a in status.attempts] == [AttemptOutcome.SUCCEEDED]

    def test_only_the_librarys_own_resend_may_take_back_its_claim(
        self, ledger: DrivenLedger
    ) -> None:
        """A caller reusing a live attempt id is in progress, never a second owner."""
        first = ledger.claim("k", attempt_id="dispatch-1")
        again = ledger.claim("k", attempt_id="dispatch-1")
        assert isinstance(again, InProgress) and again.fence == first.fence

    def test_a_finish_lost_twice_says_the_outcome_is_not_recorded(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        losing = _LosingReplies("finish", times=2, apply=False)
        ledger = driver.ledger(namespace, lease=30, wrap=losing.wrap)
        claim = ledger.claim("k")
        with pytest.raises(StoreUnavailable, match="NOT recorded") as err:
            claim.commit("done")
        assert "lease runs out" in str(err.value)
        assert err.value.applied is False and not isinstance(err.value, OutcomeUnknown)
        status = ledger.status("k")
        assert status is not None and status.state is JobState.PROCESSING

    def test_a_finish_applied_then_lost_twice_says_the_outcome_is_unknown(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        """Both replies lost after the store applied the commit: the error never says "not
        recorded", it is ``OutcomeUnknown`` and says how to learn the outcome; the record
        holds the commit, and a claim of the key replays it."""
        losing = _LosingReplies("finish", times=2, apply=True)
        ledger = driver.ledger(namespace, lease=30, wrap=losing.wrap)
        claim = ledger.claim("k")
        with pytest.raises(OutcomeUnknown) as err:
            claim.commit("done")
        assert err.value.applied is None and "NOT recorded" not in str(err.value)
        assert "UNKNOWN" in str(err.value) and "rill-executor status k" in str(err.value)
        status = ledger.status("k")
        assert status is not None and status.state is JobState.SUCCEEDED
        replay = ledger.claim("k")
        assert isinstance(replay, Replay) and replay.result() == "done"

    # -- fencing with a caller-chosen attempt id --------------------------------------------

    def test_reused_attempt_id_is_still_fenced(self, ledger: DrivenLedger) -> None:
        """An engine that re-dispatches with the same attempt id: the fence alone tells
        the zombie from the new owner."""
        a = ledger.claim("k", attempt_id="dispatch-7", lease=0.3)
        time.sleep(0.45)
        b = ledger.claim("k", attempt_id="dispatch-7")
        assert is_claim(b) and b.fence == a.fence + 1
        for write in (a.heartbeat, lambda: a.commit("from A"), lambda: a.fail("x", retryable=True)):
            with pytest.raises(StaleAttempt) as err:
                write()
            assert err.value.reason == "superseded"
        b.commit("from B")
        assert ledger.claim("k").result() == "from B"

    # -- conflicts on claimable jobs ----------------------------------------------------------

    @pytest.mark.parametrize("how", ["retryable", "expired"])
    def test_conflict_also_when_the_job_is_claimable(self, ledger: DrivenLedger, how: str) -> None:
        fp1, fp2 = fingerprint_of(1), fingerprint_of(2)
        if how == "retryable":
            ledger.claim("k", fingerprint=fp1, result_version="v1").fail("x", retryable=True)
        else:
            ledger.claim("k", fingerprint=fp1, result_version="v1", lease=0.2)
            time.sleep(0.3)
        before = _stable(ledger.status("k"))
        for fp, version in ((fp2, "v1"), (fp1, "v2"), (fp1, None)):
            assert isinstance(ledger.claim("k", fingerprint=fp, result_version=version), Conflict)
        assert _stable(ledger.status("k")) == before
        assert is_claim(ledger.claim("k", fingerprint=fp1, result_version="v1"))

    # -- a lost claim knows it --------------------------------------------------------------

    def test_a_lost_claim_knows_it(self, ledger: DrivenLedger) -> None:
        a = ledger.claim("k", lease=0.2)
        a.ensure_owned()
        time.sleep(0.3)
        assert is_claim(ledger.claim("k"))
        assert not a.lost  # nobody told it yet
        with pytest.raises(StaleAttempt):
            a.heartbeat()
        assert a.lost
        with pytest.raises(StaleAttempt):
            a.ensure_owned()

    # -- job identity --------------------------------------------------------------------------

    def test_distinct_keys_are_distinct_jobs(self, driver: LedgerDriver, namespace: str) -> None:
        one = driver.ledger(namespace, lease=30)
        two = driver.ledger(namespace + "a", lease=30)
        one.claim("ab").commit("one:ab")
        assert is_claim(two.claim("b")), "namespace/key boundary merged two jobs"
        for first, second in (("Key", "key"), ("ﬁle", "file"), ("é", "e\u0301")):
            one.claim(first).commit(first)
            assert is_claim(one.claim(second)), f"{first!r} and {second!r} became one job"

    # -- the optional ping answers ---------------------------------------------------------

    def test_ping_answers(self, driver: LedgerDriver) -> None:
        from ...store import AsyncPingable, Pingable

        store = driver.shared_store()
        assert isinstance(store, AsyncPingable if driver.is_async else Pingable)
        driver.resolve(store.ping())  # answers, raising nothing
