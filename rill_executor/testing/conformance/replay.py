"""Replay: the decorator and what a handler returns (invariants 3, 11 and 12)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from ... import (
    AttemptOutcome,
    InProgress,
    InvalidResult,
    JobFailed,
    JobInProgress,
    JobState,
    KeyConflict,
    Replay,
    ResultNotSerializable,
    ResultTooLarge,
    StaleAttempt,
    TerminalError,
    UndecodableResult,
    fingerprint_of,
)
from .._driver import DrivenLedger, LedgerDriver, is_claim
from ._fixtures import KitBase
from ._support import Measured, Segment, Transcoded

__all__ = ["Replays"]


class Replays(KitBase):
    """Part of ``StoreConformance``: the group ``replay``."""

    # -- a failure replays as what it was: a retryable one runs again ----------------------

    def test_retryable_failure_runs_again_terminal_failure_replays(
        self, ledger: DrivenLedger
    ) -> None:
        a = ledger.claim("retry")
        a.fail(ValueError("flaky"), retryable=True)
        b = ledger.claim("retry")
        assert is_claim(b) and b.fence == a.fence + 1
        c = ledger.claim("final")
        c.fail(ValueError("bad input"), retryable=False)
        replay = ledger.claim("final")
        assert isinstance(replay, Replay) and not replay.succeeded
        assert replay.error is not None and replay.error.type == "ValueError"
        with pytest.raises(JobFailed, match="bad input"):
            replay.result()

    # -- the decorator -------------------------------------------------------------------------

    def test_decorator_runs_once_and_replays_the_annotated_type(self, ledger: DrivenLedger) -> None:
        runs: list[Segment] = []

        def body(job: Segment) -> Transcoded:
            runs.append(job)
            return Transcoded(uri=f"s3://out/{job.video}/{job.segment}", frames=250)

        transcode = ledger.idempotent(
            name="transcode",
            key=lambda job: f"{job.video}:{job.segment}:{job.profile}",
            result_version=lambda job: job.profile,
        )(body)
        job = Segment(video="A", segment=1, profile="h264-v2")
        first = transcode(job)
        again = transcode(Segment(video="A", segment=1, profile="h264-v2"))
        assert isinstance(again, Transcoded) and again == first
        assert len(runs) == 1
        same_key = ledger.idempotent(
            name="transcode", key=lambda job: "A:1:h264-v2", result_version="h264-v2"
        )(body)
        with pytest.raises(KeyConflict):
            same_key(Segment(video="B", segment=9, profile="h264-v2"))
        assert len(runs) == 1

    def test_decorator_failures(self, ledger: DrivenLedger) -> None:
        runs: Counter[str] = Counter()

        class BadInput(TerminalError):
            pass

        @ledger.idempotent(name="handler", key=lambda name: name)
        def handler(name: str) -> str:
            runs[name] += 1
            if name == "flaky" and runs[name] == 1:
                raise ConnectionError("first try fails")
            if name == "doomed":
                raise BadInput("cannot decode segment")
            return f"done {name}"

        with pytest.raises(ConnectionError):
            handler("flaky")
        assert handler("flaky") == "done flaky" and runs["flaky"] == 2
        for _ in range(2):
            with pytest.raises((BadInput, JobFailed)):
                handler("doomed")
        assert runs["doomed"] == 1
        with pytest.raises(JobFailed, match="cannot decode segment"):
            handler("doomed")

    def test_decorator_in_progress_raises_or_joins(self, ledger: DrivenLedger) -> None:
        started, release = threading.Event(), threading.Event()
        runs: list[int] = []

        def body(n: int) -> dict[str, int]:
            runs.append(n)
            started.set()
            release.wait(10)
            return {"n": n}

        eager = ledger.idempotent(
            name="body", key=lambda n: "shared", fingerprint=lambda n: "same"
        )(body)
        patient = ledger.idempotent(
            name="body", key=lambda n: "shared", fingerprint=lambda n: "same", wait=10
        )(body)
        results: list[Any] = []
        first = threading.Thread(target=lambda: results.append(eager(1)))
        first.start()
        assert started.wait(10)
        with pytest.raises(JobInProgress) as err:
            eager(2)
        assert err.value.lease_left > timedelta(0)
        joiners = [threading.Thread(target=lambda: results.append(patient(3))) for _ in range(4)]
        for t in joiners:
            t.start()
        time.sleep(0.2)
        release.set()
        for t in [first, *joiners]:
            t.join(20)
        assert runs == [1]
        assert results == [{"n": 1}] * 5

    def test_automatic_heartbeat_keeps_a_long_handler_owned(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        # Beats every second; 3.2 s of work outlives the lease unless they renew it, and a
        # loaded machine stalls a store round trip (an fsync) for less than 3 s.
        ledger = driver.ledger(namespace, lease=3.0)
        seen: list[Any] = []

        @ledger.idempotent(key=lambda k: k, name="slow")
        def slow(k: str) -> str:
            for _ in range(4):
                time.sleep(0.8)
                seen.append(ledger.claim(f"slow/{k}", fingerprint=fingerprint_of({"k": k})))
            return "survived"

        assert slow("k") == "survived"
        assert all(isinstance(s, InProgress) for s in seen), seen

    def test_a_decorated_zombie_cannot_commit(self, driver: LedgerDriver, namespace: str) -> None:
        """A handler that outlives its lease (no heartbeat) while a rival takes over: the
        decorator raises ``StaleAttempt`` and the rival's result stays."""
        ledger = driver.ledger(namespace, lease=0.3)
        fingerprint = fingerprint_of({"k": "k"})

        @ledger.idempotent(key=lambda k: k, heartbeat=False, name="slow")
        def slow(k: str) -> str:
            time.sleep(0.45)
            rival = ledger.claim(f"slow/{k}", fingerprint=fingerprint, lease=30)
            assert is_claim(rival)
            rival.commit("winner")
            return "zombie"

        with pytest.raises(StaleAttempt) as err:
            slow("k")
        assert err.value.reason == "superseded"
        assert ledger.claim("slow/k", fingerprint=fingerprint).result() == "winner"

    # -- what a handler returns is stored only if it replays (invariant 11) ----------------

    def test_a_result_that_would_not_replay_is_never_committed(self, ledger: DrivenLedger) -> None:
        runs: Counter[str] = Counter()
        wrong: dict[str, Any] = {
            "missing-field": {"uri": "s3://out/A/1"},
            "none": None,
            "nan": Measured(uri="s3://out/A/1", seconds=float("nan")),  # JSON stores null
        }

        @ledger.idempotent(key=lambda case: case, name="measure")
        def measure(case: str) -> Measured:
            runs[case] += 1
            if case == "fields-as-dict":
                return {"uri": "s3://out/A/1", "seconds": 1.5}  # type: ignore[return-value]
            return wrong[case]  # type: ignore[no-any-return]

        for case in wrong:
            with pytest.raises(InvalidResult, match="handler measure") as err:
                measure(case)
            assert "Measured" in str(err.value), err.value
            status = ledger.status(case, handler=measure)
            assert status is not None and status.state is JobState.FAILED, status
            assert status.error is not None and status.error.type == "InvalidResult"
            assert not status.error.retryable
            assert [(a.outcome, a.error and a.error.type) for a in status.attempts] == [
                (AttemptOutcome.FAILED, "InvalidResult")
            ]
            with pytest.raises(JobFailed, match="InvalidResult"):
                measure(case)
            assert runs[case] == 1
        missing = ledger.status("missing-field", handler=measure)
        assert missing is not None and "seconds" in str(missing.error)
        measure("fields-as-dict")
        assert measure("fields-as-dict") == Measured(uri="s3://out/A/1", seconds=1.5)
        assert runs["fields-as-dict"] == 1

    def test_a_result_stored_under_an_older_return_type_says_what_to_do(
        self, ledger: DrivenLedger
    ) -> None:
        @ledger.idempotent(key=lambda video: video, name="probe")
        def probe_v1(video: str) -> int:
            return 250

        @ledger.idempotent(key=lambda video: video, name="probe")
        def probe_v2(video: str) -> Transcoded:
            raise AssertionError("a replay must not run the handler")

        assert probe_v1("A") == 250
        with pytest.raises(UndecodableResult, match="result_version") as err:
            probe_v2("A")
        assert err.value.type_name == "Transcoded" and err.value.key == "probe/A"

    # -- once the handler ran, its attempt ends recorded (invariant 11) --------------------

    @pytest.mark.parametrize("problem", ["too_large", "not_serialisable"])
    def test_an_unstorable_result_is_a_recorded_terminal_failure(
        self, driver: LedgerDriver, namespace: str, problem: str
    ) -> None:
        ledger = driver.ledger(namespace, lease=30, max_result_bytes=100)
        runs: list[str] = []

        @ledger.idempotent(key=lambda k: k, name="h")
        def handler(k: str) -> Any:
            runs.append(k)
            return "x" * 200 if problem == "too_large" else object()

        expected = ResultTooLarge if problem == "too_large" else ResultNotSerializable
        with pytest.raises(expected) as err:
            handler("k")
        assert any("terminal failure" in note for note in err.value.__notes__)
        status = ledger.status("k", handler="h")
        assert status is not None and status.state is JobState.FAILED and status.owner is None
        assert [(a.outcome, a.error and a.error.type) for a in status.attempts] == [
            (AttemptOutcome.FAILED, expected.__name__)
        ]
        with pytest.raises(JobFailed):
            handler("k")
        assert runs == ["k"]

    # -- a decorated handler's jobs are its own (invariant 12) -----------------------------

    def test_two_handlers_never_replay_each_others_results(self, ledger: DrivenLedger) -> None:
        @ledger.idempotent(name="charge", key=lambda order: order)
        def charge(order: str) -> str:
            return f"charged {order}"

        @ledger.idempotent(name="refund", key=lambda order: order)
        def refund(order: str) -> str:
            return f"refunded {order}"

        @ledger.idempotent(key=lambda order: order, name=refund.__rill_handler__)  # type: ignore[attr-defined]
        def refund_moved(order: str) -> str:
            raise AssertionError("the same name shares the jobs: this must replay")

        assert charge("o-1") == "charged o-1"
        assert refund("o-1") == "refunded o-1"
        assert refund_moved("o-1") == "refunded o-1"
        assert ledger.status("o-1") is None  # explicit claims of "o-1" stay unaffected
        charged = ledger.status("o-1", handler=charge)
        assert charged is not None and charged.result == "charged o-1"
        assert charged.key == f"{charge.__rill_handler__}/o-1"  # type: ignore[attr-defined]
