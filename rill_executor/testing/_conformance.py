"""The store contract as tests: the invariants of docs/concepts.md ("Invariants"), sync and async.

Every test body runs twice, through ``Ledger`` and through ``AsyncLedger`` (see
``LedgerDriver``), against a real store opened by URL.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test
from pydantic import BaseModel

from .._claim import AsyncClaim
from .._errors import (
    ChecksumMismatch,
    ConfigError,
    InvalidKey,
    InvalidOutputName,
    InvalidPayload,
    InvalidResult,
    JobFailed,
    JobInProgress,
    KeyConflict,
    OutputExists,
    ResolutionRefused,
    ResultNotSerializable,
    ResultTooLarge,
    StaleAttempt,
    StoreUnavailable,
    TerminalError,
    UndecodableResult,
    UsageError,
)
from .._events import MAX_EVENTS
from .._housekeeping import ObjectState
from .._idempotent import current
from .._keys import MAX_KEY_BYTES, fingerprint_of
from .._memory_outputs import MemoryOutputStore
from .._notices import Watch
from .._outcomes import Conflict, InProgress, Replay, raise_for_outcome
from .._records import AttemptOutcome, JobState, JobStatus
from .._resolution import default_actor
from ._driver import DrivenLedger, LedgerDriver, is_claim
from ._hostile import HostileStrings
from ._model import lifecycle_machine

__all__ = ["StoreConformance"]


class Segment(BaseModel):
    video: str
    segment: int
    profile: str


class Transcoded(BaseModel):
    uri: str
    frames: int


class Measured(BaseModel):
    uri: str
    seconds: float


def _stable(status: JobStatus | None) -> dict[str, Any] | None:
    """A status without the fields that move with the clock alone."""
    if status is None:
        return None
    return status.model_dump(exclude={"store_time": True, "owner": {"lease_left"}})


def _store_id(driver: LedgerDriver) -> str:
    """The identity of the driver's store, through its sync or async face."""
    store = driver.shared_store()
    if driver._portal is None:
        return str(store.store_id())
    return str(driver._portal.call(store.store_id()))


def _counting(store: Any, calls: Counter[str]) -> Any:
    class Counting:
        def __getattr__(self, name: str) -> Any:
            target = getattr(store, name)

            def call(*args: Any, **kwargs: Any) -> Any:
                calls[name] += 1
                return target(*args, **kwargs)

            return call

    return Counting()


def _per_job(store: Any) -> Any:
    """``store`` without ``list_statuses``: a drill reads it one ``status`` a job."""

    class PerJob:
        def __getattr__(self, name: str) -> Any:
            if name == "list_statuses":
                raise AttributeError(name)
            return getattr(store, name)

    return PerJob()


class _LosingReplies:
    """Wraps a store so that the first ``times`` replies to ``operations`` are lost: each
    call is applied (or, with ``apply=False``, never arrives), then ``StoreUnavailable``."""

    def __init__(self, *operations: str, times: int = 1, apply: bool = True) -> None:
        self.operations, self.times, self.apply = operations, times, apply
        self.calls = 0
        self.lost_by: Counter[str] = Counter()

    @property
    def lost(self) -> int:
        return sum(self.lost_by.values())

    def _lose(self, operation: str) -> bool:
        if self.lost_by[operation] >= self.times:
            return False
        self.lost_by[operation] += 1
        return True

    def wrap(self, store: Any) -> Any:
        losing = self

        class Losing:
            def __getattr__(self, name: str) -> Any:
                target = getattr(store, name)
                if name not in losing.operations:
                    return target
                if inspect.iscoroutinefunction(target):

                    async def acall(*args: Any) -> Any:
                        losing.calls += 1
                        if losing._lose(name):
                            if losing.apply:
                                await target(*args)
                            raise StoreUnavailable(f"connection lost before the {name} reply")
                        return await target(*args)

                    return acall

                def call(*args: Any) -> Any:
                    losing.calls += 1
                    if losing._lose(name):
                        if losing.apply:
                            target(*args)
                        raise StoreUnavailable(f"connection lost before the {name} reply")
                    return target(*args)

                return call

        return Losing()


def _put_output(driver: LedgerDriver, name: str, data: bytes) -> Any:
    """Register and write an output from inside a decorated handler, on either twin (an
    async twin's handler runs in a worker thread of the driver's loop)."""
    claim = current.get()
    if isinstance(claim, AsyncClaim):
        assert driver._portal is not None
        return driver._portal.call(claim.outputs.put(name, data))
    return claim.outputs.put(name, data)


class StoreConformance(HostileStrings):
    """Subclass in a test module and provide a ``store_url`` fixture::

        class TestMyStore(StoreConformance):
            @pytest.fixture
            def store_url(self) -> str:
                return "mystore://127.0.0.1:1234/0"

    For a store that lives inside one process, set ``multiprocess = False`` (the race then
    runs on threads) and ``test_sigstopped_zombie_is_fenced = None`` (a stopped process
    cannot share it; ``test_paused_attempt_is_fenced_in_process`` covers the zombie).
    A store that lists jobs by scanning (Redis) sets ``exact_listing = False``: its pages
    may hold more than ``limit`` jobs and, while its keyspace is resized, repeat a job.
    A store without the optional ``ping`` sets ``test_ping_answers = None``.
    """

    multiprocess = True
    exact_listing = True
    expires_records = False

    @pytest.fixture(params=["sync", "async"])
    def driver(self, request: pytest.FixtureRequest, store_url: str) -> Iterator[LedgerDriver]:
        driver = LedgerDriver(store_url, request.param)
        yield driver
        driver.close()

    @pytest.fixture
    def namespace(self) -> str:
        return f"t{uuid.uuid4().hex[:16]}"

    @pytest.fixture
    def ledger(self, driver: LedgerDriver, namespace: str) -> DrivenLedger:
        return driver.ledger(namespace, lease=30)

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

    def test_heartbeat_keeps_the_lease_live(self, ledger: DrivenLedger) -> None:
        a = ledger.claim("k", lease=0.4)
        for _ in range(6):
            time.sleep(0.15)
            a.heartbeat()
            assert isinstance(ledger.claim("k"), InProgress)
        a.commit("done")
        assert ledger.claim("k").result() == "done"

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

    # -- failures and retention ----------------------------------------------------------------

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

    def test_after_retention_the_work_runs_again(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        ledger = driver.ledger(namespace, lease=0.2, retention=0.6)
        first = ledger.claim("k", fingerprint=fingerprint_of(1))
        first.commit("old")
        assert isinstance(ledger.claim("k", fingerprint=fingerprint_of(1)), Replay)
        time.sleep(0.8)
        again = ledger.claim("k", fingerprint=fingerprint_of(2))
        assert is_claim(again) and again.fence > first.fence

    def test_status_reports_job_and_every_attempt(self, ledger: DrivenLedger) -> None:
        assert ledger.status("nothing-here") is None
        a = ledger.claim("k", fingerprint=fingerprint_of("in"), result_version="v2", lease=0.2)
        a.heartbeat()
        time.sleep(0.3)
        b = ledger.claim("k", fingerprint=fingerprint_of("in"), result_version="v2")
        b.fail(RuntimeError("disk full"), retryable=True)
        c = ledger.claim("k", fingerprint=fingerprint_of("in"), result_version="v2")
        c.commit({"frames": 250})
        status = ledger.status("k")
        assert status is not None
        assert (status.namespace, status.key, status.state) == (
            ledger.namespace,
            "k",
            JobState.SUCCEEDED,
        )
        assert status.result_version == "v2" and status.fingerprint == fingerprint_of("in")
        assert status.result == {"frames": 250} and status.owner is None
        assert status.retain_until is not None and status.finished_at is not None
        assert status.retain_until > status.finished_at
        assert [(x.attempt_id, x.fence, x.outcome) for x in status.attempts] == [
            (a.attempt_id, a.fence, AttemptOutcome.EXPIRED),
            (b.attempt_id, b.fence, AttemptOutcome.FAILED),
            (c.attempt_id, c.fence, AttemptOutcome.SUCCEEDED),
        ]
        assert status.attempts[1].error is not None
        assert status.attempts[1].error.message == "disk full"
        assert all(x.ended_at is not None and x.ended_at >= x.started_at for x in status.attempts)

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

    # -- the store's clock -------------------------------------------------------------------

    def test_the_callers_clock_does_not_judge_leases(self, ledger: DrivenLedger) -> None:
        time_machine = pytest.importorskip("time_machine")
        owner = ledger.claim("k", lease=0.4)
        ahead = datetime.now(UTC) + timedelta(hours=5)
        with time_machine.travel(ahead, tick=True):
            assert isinstance(ledger.claim("k"), InProgress)  # cannot steal a live lease
        behind = datetime.now(UTC) - timedelta(hours=5)
        with time_machine.travel(behind, tick=True):
            time.sleep(0.6)  # real time passes; this caller's clock says it is hours earlier
            with pytest.raises(StaleAttempt) as err:
                owner.heartbeat()  # cannot keep a dead lease
            assert err.value.reason == "lease_expired"
            assert is_claim(ledger.claim("k"))

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

    # -- the decorator -------------------------------------------------------------------------

    def test_decorator_runs_once_and_replays_the_annotated_type(self, ledger: DrivenLedger) -> None:
        runs: list[Segment] = []

        def body(job: Segment) -> Transcoded:
            runs.append(job)
            return Transcoded(uri=f"s3://out/{job.video}/{job.segment}", frames=250)

        transcode = ledger.idempotent(
            key=lambda job: f"{job.video}:{job.segment}:{job.profile}",
            result_version=lambda job: job.profile,
        )(body)
        job = Segment(video="A", segment=1, profile="h264-v2")
        first = transcode(job)
        again = transcode(Segment(video="A", segment=1, profile="h264-v2"))
        assert isinstance(again, Transcoded) and again == first
        assert len(runs) == 1
        same_key = ledger.idempotent(key=lambda job: "A:1:h264-v2", result_version="h264-v2")(body)
        with pytest.raises(KeyConflict):
            same_key(Segment(video="B", segment=9, profile="h264-v2"))
        assert len(runs) == 1

    def test_decorator_failures(self, ledger: DrivenLedger) -> None:
        runs: Counter[str] = Counter()

        class BadInput(TerminalError):
            pass

        @ledger.idempotent(key=lambda name: name)
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

        eager = ledger.idempotent(key=lambda n: "shared", fingerprint=lambda n: "same")(body)
        patient = ledger.idempotent(key=lambda n: "shared", fingerprint=lambda n: "same", wait=10)(
            body
        )
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
        ledger = driver.ledger(namespace, lease=0.3)
        seen: list[Any] = []

        @ledger.idempotent(key=lambda k: k, name="slow")
        def slow(k: str) -> str:
            for _ in range(4):
                time.sleep(0.25)
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
            rival = ledger.claim(f"slow/{k}", fingerprint=fingerprint)
            assert is_claim(rival)
            rival.commit("winner")
            return "zombie"

        with pytest.raises(StaleAttempt) as err:
            slow("k")
        assert err.value.reason == "superseded"
        assert ledger.claim("slow/k", fingerprint=fingerprint).result() == "winner"

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
        @ledger.idempotent(key=lambda order: order)
        def charge(order: str) -> str:
            return f"charged {order}"

        @ledger.idempotent(key=lambda order: order)
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
        status = ledger.status("k")
        assert status is not None and status.state is JobState.PROCESSING

    # -- the event log: refusals kept on the record, nothing else changed -----------------

    def test_an_event_is_logged_on_the_stores_clock_and_changes_nothing_else(
        self, ledger: DrivenLedger
    ) -> None:
        zombie = ledger.claim("k", lease=0.2)
        time.sleep(0.3)
        heir = ledger.claim("k")
        assert is_claim(heir)
        before = ledger.status("k")
        assert before is not None and before.events == ()
        assert ledger.record_event(
            "k",
            "token_refused",
            attempt_id=zombie.attempt_id,
            fence=zombie.fence,
            reason="superseded",
            detail="complete",
        )
        assert ledger.record_event("k", "note.operator", detail="looked at it")
        after = ledger.status("k")
        assert after is not None
        unlogged: dict[str, Any] = {
            "events": True,
            "attempts": {"__all__": {"events"}},
            "store_time": True,
            "owner": {"lease_left"},
        }
        assert after.model_dump(exclude=unlogged) == before.model_dump(exclude=unlogged)
        assert [(e.kind, e.attempt_id, e.fence, e.reason, e.detail) for e in after.events] == [
            ("token_refused", zombie.attempt_id, zombie.fence, "superseded", "complete"),
            ("note.operator", None, None, None, "looked at it"),
        ]
        first, second = after.events
        assert before.store_time <= first.at <= second.at <= after.store_time
        by_attempt = {a.attempt_id: a.events for a in after.attempts}
        assert by_attempt == {zombie.attempt_id: (first,), heir.attempt_id: ()}
        heir.commit("done")  # a later write keeps the log
        done = ledger.status("k")
        assert done is not None and done.events == after.events

    def test_an_event_for_no_job_writes_nothing(self, ledger: DrivenLedger) -> None:
        assert ledger.record_event("absent", "token_refused", reason="expired") is False
        assert ledger.status("absent") is None
        ledger.claim("k")
        before = _stable(ledger.status("k"))
        for bad in ("", "Token Refused", "x" * 65, 7):
            with pytest.raises(InvalidPayload, match="event kind"):
                ledger.record_event("k", bad)
        with pytest.raises(InvalidPayload, match="fence"):
            ledger.record_event("k", "token_refused", fence="1")
        assert _stable(ledger.status("k")) == before

    def test_the_event_log_keeps_its_first_entries_and_counts_the_rest(
        self, ledger: DrivenLedger
    ) -> None:
        ledger.claim("k")
        for n in range(MAX_EVENTS + 3):
            ledger.record_event("k", "token_refused", reason=f"r{n}")
        status = ledger.status("k")
        assert status is not None
        assert [e.reason for e in status.events] == [f"r{n}" for n in range(MAX_EVENTS)]
        assert status.events_dropped == 3
        resolved = ledger.resolve("k", "terminate", reason="stuck", actor="alice", force=True)
        assert [e.kind for e in resolved.events[-2:]] == ["token_refused", "resolved"]
        assert len(resolved.events) == MAX_EVENTS + 1
        assert resolved.events_dropped == 3
        ledger.record_event("k", "token_refused", reason="late")
        after = ledger.status("k")
        assert after is not None
        assert (after.events, after.events_dropped) == (resolved.events, 4)

    # -- manual resolution: fenced, recorded with reason and actor ---------------------------

    def test_a_redo_fences_a_zombie_and_the_next_claim_runs(self, ledger: DrivenLedger) -> None:
        zombie = ledger.claim("k", fingerprint=fingerprint_of(1), lease=0.2)
        time.sleep(0.3)  # its lease ran out; its host is paused, not dead
        status = ledger.resolve("k", "redo", reason="poisoned record", actor="alice")
        assert (status.state, status.fence, status.owner) == (JobState.FAILED, 2, None)
        assert [a.outcome for a in status.attempts] == [AttemptOutcome.ABANDONED]
        (event,) = status.events
        assert (event.kind, event.detail, event.reason, event.actor, event.fence) == (
            "resolved",
            "redo",
            "poisoned record",
            "alice",
            2,
        )
        assert event.data == {
            "force": False,
            "before": {
                "state": "processing",
                "fence": 1,
                "owner_attempt": zombie.attempt_id,
                "lease_live": False,
            },
        }
        with pytest.raises(StaleAttempt) as stale:
            zombie.commit("the zombie's result")
        assert stale.value.reason == "superseded"
        assert _stable(ledger.status("k")) == _stable(status)
        heir = ledger.claim("k", fingerprint=fingerprint_of(2))  # any request runs again
        assert is_claim(heir) and heir.fence == 3
        heir.commit("done")
        done = ledger.status("k")
        assert done is not None and done.result == "done" and done.events == status.events

    def test_a_live_lease_is_refused_unless_forced(self, ledger: DrivenLedger) -> None:
        owner = ledger.claim("k", lease=30)
        before = _stable(ledger.status("k"))
        with pytest.raises(ResolutionRefused, match="live lease") as refused:
            ledger.resolve("k", "terminate", reason="stuck")
        assert refused.value.reason == "live_lease"
        assert _stable(ledger.status("k")) == before
        status = ledger.resolve("k", "terminate", reason="stuck", force=True)
        assert status.state is JobState.FAILED and status.error is not None
        assert status.error.retryable is False and "stuck" in status.error.message
        assert [a.outcome for a in status.attempts] == [AttemptOutcome.FENCED]
        (event,) = status.events
        assert event.actor == default_actor() and event.data is not None
        assert event.data["force"] is True and event.data["before"]["lease_live"] is True
        with pytest.raises(StaleAttempt):
            owner.heartbeat()
        with pytest.raises(JobFailed, match="stuck"):
            raise_for_outcome(ledger.claim("k"))

    def test_reuse_needs_a_result_and_answers_waiting_dispatches(
        self, ledger: DrivenLedger
    ) -> None:
        ledger.claim("k", watch=Watch("task", {"url": "u1"}), lease=0.2)
        time.sleep(0.3)
        before = _stable(ledger.status("k"))
        with pytest.raises(ResolutionRefused, match="no committed result") as refused:
            ledger.resolve("k", "reuse", reason="done by hand")
        assert refused.value.reason == "no_result"
        assert _stable(ledger.status("k")) == before
        status = ledger.resolve("k", "reuse", reason="done by hand", result={"uri": "s3://x"})
        assert status.state is JobState.SUCCEEDED and status.result == {"uri": "s3://x"}
        assert [(n.watch, n.fence, n.state) for n in status.notices] == [
            ("task", 2, JobState.SUCCEEDED)
        ]
        replay = ledger.claim("k")
        assert isinstance(replay, Replay) and replay.result() == {"uri": "s3://x"}
        again = ledger.resolve("k", "reuse", reason="confirmed")  # its committed result
        assert again.fence == 3 and again.result == {"uri": "s3://x"}
        assert [e.reason for e in again.events] == ["done by hand", "confirmed"]

    def test_a_resolution_that_cannot_apply_changes_nothing(self, ledger: DrivenLedger) -> None:
        with pytest.raises(ResolutionRefused, match="no job") as refused:
            ledger.resolve("absent", "redo", reason="r")
        assert refused.value.reason == "missing" and ledger.status("absent") is None
        ledger.claim("k", lease=0.2)
        time.sleep(0.3)
        before = _stable(ledger.status("k"))
        bad: list[dict[str, Any]] = [
            {"action": "delete", "reason": "r"},
            {"action": "redo", "reason": " "},
            {"action": "redo", "reason": "r", "actor": ""},
            {"action": "redo", "reason": "r", "result": 1},
        ]
        for options in bad:
            with pytest.raises(InvalidPayload):
                ledger.resolve("k", **options)
        assert _stable(ledger.status("k")) == before

    def test_the_drill_report_of_a_healthy_namespace_is_clean_and_counts_the_recovery(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        ledger = driver.ledger(namespace, lease=30)
        ledger.claim("done").commit("r")
        ledger.resolve("done", "redo", reason="re-encode")  # a second result, on the record
        ledger.claim("done").commit("r3")
        zombie = ledger.claim("taken", lease=0.2)
        ledger.claim("dangling", lease=0.2)
        ledger.claim("stuck", lease=0.2)
        ledger.claim("watched", watch=Watch("task", {"url": "u"})).commit("x")
        time.sleep(0.3)
        ledger.claim("taken").commit("r2")
        ledger.resolve("stuck", "terminate", reason="source deleted")
        ledger.record_event(
            "taken", "token_refused", attempt_id=zombie.attempt_id, fence=1, reason="superseded"
        )
        report = ledger.drill(page=2)
        assert report.ok and report.broken == ()
        assert (report.jobs, report.states) == (5, {"failed": 1, "processing": 1, "succeeded": 3})
        assert (report.dangling, report.dangling_count) == (("dangling",), 1)
        assert (report.attempts, report.max_attempts, report.takeovers) == (7, 2, 1)
        assert (report.refused_writes, report.resolutions) == (1, 2)
        assert (report.notices_pending, report.notices_dropped) == (1, 0)
        assert report.orphan_outputs is None  # no output store

    def test_the_drill_reads_a_page_of_whole_jobs_a_store_call(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        calls: Counter[str] = Counter()
        ledger = driver.ledger(namespace, lease=30, wrap=lambda store: _counting(store, calls))
        for i in range(30):
            ledger.claim(f"done-{i}").commit(i)
        ledger.claim("failed").fail(RuntimeError("disk full"), retryable=False)
        ledger.claim("dangling", lease=0.2)
        ledger.claim("live")
        time.sleep(0.3)
        calls.clear()
        report = ledger.drill(page=10)
        reads = sum(calls.values())
        assert reads <= 33 // 10 + 1, f"33 jobs in pages of 10 took {reads} reads: {calls}"
        assert (report.jobs, report.dangling, report.dangling_count) == (33, ("dangling",), 1)
        assert report.states == {"failed": 1, "processing": 2, "succeeded": 30}
        one_by_one = driver.ledger(namespace, lease=30, wrap=_per_job).drill(page=10)
        assert report.model_dump(exclude={"store_time"}) == one_by_one.model_dump(
            exclude={"store_time"}
        )  # the same report as reading each job alone

    # -- the outbox: completion notices written by the fenced finish (invariant 8) ----------

    def test_the_attempt_history_keeps_what_each_attempt_answered(
        self, ledger: DrivenLedger
    ) -> None:
        first = {"execution_id": "ws:dag_c_1", "task_name": "t", "ts": 1, "mode": "async"}
        a = ledger.claim("k", origin=first, lease=0.2)
        status = ledger.status("k")
        assert status is not None and status.attempts[0].origin == first
        time.sleep(0.3)
        second = {**first, "ts": 2}
        b = ledger.claim("k", origin=second)
        assert is_claim(b) and b.fence == a.fence + 1
        b.commit("done")
        status = ledger.status("k")
        assert status is not None
        assert [(x.outcome, x.origin) for x in status.attempts] == [
            (AttemptOutcome.EXPIRED, first),
            (AttemptOutcome.SUCCEEDED, second),
        ]

    def test_the_attempts_trace_context_is_kept_and_answered_to_duplicates(
        self, ledger: DrivenLedger
    ) -> None:
        first = "00-" + "a1" * 16 + "-" + "b2" * 8 + "-01"
        second = "00-" + "c3" * 16 + "-" + "d4" * 8 + "-00"
        a = ledger.claim("k", trace=first, lease=0.2)
        busy = ledger.claim("k", trace=second)
        assert isinstance(busy, InProgress) and busy.trace == first
        time.sleep(0.3)
        b = ledger.claim("k", trace=second)
        assert is_claim(b) and b.fence == a.fence + 1
        b.commit("done")
        replay = ledger.claim("k")
        assert isinstance(replay, Replay)
        assert (replay.trace, replay.attempt_id) == (second, b.attempt_id)
        untraced = ledger.claim("other")
        untraced.commit(1)
        again = ledger.claim("other", trace=first)
        assert isinstance(again, Replay) and again.trace is None
        status = ledger.status("k")
        assert status is not None
        assert [(x.outcome, x.trace) for x in status.attempts] == [
            (AttemptOutcome.EXPIRED, first),
            (AttemptOutcome.SUCCEEDED, second),
        ]
        with pytest.raises(InvalidPayload, match="traceparent"):
            ledger.claim("third", trace="00-abc")
        assert ledger.status("third") is None

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

    def test_a_lapsed_delivery_lease_frees_the_notice(self, ledger: DrivenLedger) -> None:
        ledger.claim("k", watch=Watch("t", "u")).commit("done")
        (first,) = ledger.lease_notices(owner="crashed", lease=0.2)
        assert ledger.lease_notices(owner="other", lease=30) == []
        time.sleep(0.3)
        (second,) = ledger.lease_notices(owner="other", lease=30)
        assert second.info.id == first.info.id and second.info.attempts == 2
        assert not ledger.settle_notice(first, "delivered", "ok")  # its lease ran out
        assert ledger.settle_notice(second, "delivered", "ok")

    def test_a_watched_job_whose_owner_lapsed_gets_one_lapse_notice(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        """Invariant 16: nobody else would tell the watchers of a job whose owner died."""
        ledger = driver.ledger(namespace, lease=0.3, retention=3600)
        owner = ledger.claim("k", watch=Watch("task", {"url": "u"}))
        ledger.claim("unwatched")  # nobody waits for it: no lapse notice
        assert ledger.lease_notices(owner="d", lease=30) == []  # the lease is live
        time.sleep(0.5)
        assert self._purge_all(ledger, dangling_after=0.1)[:2] == (1, 1)  # a watcher waits
        (lapse,) = ledger.lease_notices(owner="d", lease=30)
        assert (lapse.key, lapse.info.watch, lapse.info.state) == ("k", "", JobState.PROCESSING)
        assert lapse.info.fence == owner.fence and lapse.result is None
        assert ledger.lease_notices(owner="e", lease=30) == []  # one lapse per fence
        assert ledger.settle_notice(lapse, "delivered", "redriven")
        assert ledger.lease_notices(owner="e", lease=30) == []
        heir = ledger.claim("k")  # the re-drive takes it over; the watches stay
        assert is_claim(heir)
        status = ledger.status("k")
        assert status is not None and status.watchers == {"task": {"url": "u"}}
        time.sleep(0.5)
        (again,) = ledger.lease_notices(owner="e", lease=30)
        assert again.info.state is JobState.PROCESSING and again.info.fence == heir.fence

    def test_a_renewed_lease_is_no_lapse_and_a_finish_answers_the_watch(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        ledger = driver.ledger(namespace, lease=0.6, retention=3600)
        owner = ledger.claim("k", watch=Watch("task", {"url": "u"}))
        time.sleep(0.3)
        owner.heartbeat(lease=5)
        time.sleep(0.5)  # past the first lease's end
        assert ledger.lease_notices(owner="d", lease=30) == []
        owner.commit("done")
        (done,) = ledger.lease_notices(owner="d", lease=30)
        assert (done.info.watch, done.info.state) == ("task", JobState.SUCCEEDED)

    # -- more fencing, conflicts, retention and identity ------------------------------------

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

    # -- retention ----------------------------------------------------------------------------
    def test_retention_takeover_adopts_the_new_request(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        ledger = driver.ledger(namespace, lease=0.2, retention=0.5)
        ledger.claim("k", fingerprint=fingerprint_of(1), result_version="v1").commit("old")
        time.sleep(0.7)
        again = ledger.claim("k", fingerprint=fingerprint_of(2), result_version="v2")
        assert is_claim(again)
        again.commit("new")
        status = ledger.status("k")
        assert status is not None
        assert (status.fingerprint, status.result_version) == (fingerprint_of(2), "v2")
        replay = ledger.claim("k", fingerprint=fingerprint_of(2), result_version="v2")
        assert isinstance(replay, Replay) and replay.result() == "new"
        assert isinstance(
            ledger.claim("k", fingerprint=fingerprint_of(1), result_version="v1"), Conflict
        )

    def test_records_live_for_the_whole_retention(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        ledger = driver.ledger(namespace, lease=0.2, retention=1.5)
        ledger.claim("k").commit("kept")
        status = ledger.status("k")
        assert status is not None and status.retain_until and status.finished_at
        assert abs((status.retain_until - status.finished_at) - timedelta(seconds=1.5)) < timedelta(
            milliseconds=1
        )
        time.sleep(1.0)  # two thirds of the retention: still a replay
        replay = ledger.claim("k")
        assert isinstance(replay, Replay) and replay.result() == "kept"

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

    # -- listing a namespace's jobs -----------------------------------------------------------

    def _listing_fixture(self, driver: LedgerDriver, namespace: str) -> DrivenLedger:
        """Jobs in every state: done-1..3, failed (retryable), broken (terminal, version v2),
        live (processing), stuck (processing, lease run out); and one job next door."""
        ledger = driver.ledger(namespace, lease=30)
        for n in (1, 2, 3):
            ledger.claim(f"done-{n}", result_version="v1").commit(n)
        ledger.claim("failed", result_version="v1").fail("disk full", retryable=True)
        ledger.claim("broken", result_version="v2").fail("bad codec", retryable=False)
        ledger.claim("live", result_version="v1")
        stuck = ledger.claim("stuck", lease=0.2, result_version="v1")
        driver.ledger(namespace + "x", lease=30).claim("done-1").commit("next door")
        while (ledger.status("stuck") or stuck).owner.lease_left > timedelta(0):  # type: ignore[union-attr]
            time.sleep(0.05)
        return ledger

    def _all_pages(self, ledger: DrivenLedger, *, limit: int, **filters: Any) -> list[str]:
        keys: list[str] = []
        cursor = None
        for _ in range(100):
            page = ledger.jobs(after=cursor, limit=limit, **filters)
            keys += [job.key for job in page.jobs]
            if self.exact_listing:
                assert len(page.jobs) <= limit
            if (cursor := page.cursor) is None:
                if self.exact_listing:
                    assert len(keys) == len(set(keys)), f"a job was listed twice: {keys}"
                return keys
        raise AssertionError("the listing never ended")

    def test_jobs_lists_the_whole_namespace_page_by_page(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        ledger = self._listing_fixture(driver, namespace)
        everything = {"done-1", "done-2", "done-3", "failed", "broken", "live", "stuck"}
        keys = self._all_pages(ledger, limit=2)
        assert set(keys) == everything  # every job, none of the namespace next door
        page = ledger.jobs(limit=1000)
        assert {job.key for job in page.jobs} == everything and page.cursor is None
        stuck = next(job for job in page.jobs if job.key == "stuck")
        assert stuck.dangling and stuck.owner is not None and stuck.owner.lease_left < timedelta(0)
        assert not any(job.dangling for job in page.jobs if job.key != "stuck")
        assert page.store_time.tzinfo is not None
        empty = driver.ledger(namespace + "y", lease=30).jobs()
        assert empty.jobs == () and empty.cursor is None

    def test_jobs_filters_by_state_dangling_age_and_version(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        ledger = self._listing_fixture(driver, namespace)

        def keys(**filters: Any) -> set[str]:
            found = self._all_pages(ledger, limit=3, **filters)
            return set(found)

        assert keys(state="failed") == {"failed", "broken"}
        assert keys(state=("succeeded", "failed"), result_version="v2") == {"broken"}
        assert keys(state="processing") == {"live", "stuck"}
        assert keys(dangling=True) == {"stuck"}  # the owner of "live" still has its lease
        assert keys(result_version="v2") == {"broken"}
        assert keys(older_than=timedelta(hours=1)) == set()
        assert keys(older_than=timedelta(microseconds=1), state="succeeded") == {
            "done-1", "done-2", "done-3"
        }  # fmt: skip
        failed = ledger.jobs(state="failed", limit=10).jobs
        assert {job.error.message for job in failed if job.error} == {"disk full", "bad codec"}

    def test_jobs_reads_only_and_refuses_bad_filters(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        calls: Counter[str] = Counter()
        ledger = driver.ledger(namespace, lease=30, wrap=lambda store: _counting(store, calls))
        ledger.claim("k").commit(1)
        before = _stable(ledger.status("k"))
        calls.clear()
        ledger.jobs(limit=10)
        assert calls == Counter(list_jobs=1)  # a page is one call of the port
        for bad in ({"limit": 0}, {"limit": 1001}, {"state": "stuck"}, {"older_than": -1}):
            with pytest.raises((UsageError, ConfigError)):
                ledger.jobs(**bad)
        assert _stable(ledger.status("k")) == before

    # -- deleting records past retention (purge) ---------------------------------------------
    # Counts are exact on dangling jobs, which no store expires by itself; a store that
    # deletes finished records at retain_until on its own (expires_records) may have deleted
    # them before the purge looks, so only what is left is checked for those.

    def _purge_all(self, ledger: DrivenLedger, **options: Any) -> tuple[int, int, int]:
        """Purge page by page until the cursor is None: (purged, kept_notices, calls)."""
        purged = kept = calls = 0
        cursor = None
        limit = options.pop("limit", 1000)
        most = 100 if self.exact_listing else 100_000  # a scan may take many short calls
        for calls in range(1, most + 1):
            report = ledger.purge(after=cursor, limit=limit, **options)
            assert report.purged <= limit, f"one call deleted {report.purged} > {limit}"
            purged, kept = purged + report.purged, kept + report.kept_notices
            if (cursor := report.cursor) is None:
                return purged, kept, calls
        raise AssertionError("the purge never ended")

    def _finished_purged(self, found: int, expected: int) -> None:
        if self.expires_records:
            assert found <= expected, f"purged {found} finished records of {expected}"
        else:
            assert found == expected, f"purged {found} finished records, not {expected}"

    def _dead(self, ledger: DrivenLedger, *keys: str) -> None:
        """Jobs whose owners died: claimed with a 0.2 s lease, never ended."""
        for key in keys:
            assert is_claim(ledger.claim(key, lease=0.2))

    def test_purge_deletes_ended_records_past_retention_and_keeps_the_rest(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        brief = driver.ledger(namespace, lease=0.2, retention=0.4)
        kept = driver.ledger(namespace, lease=30, retention=3600)
        brief.claim("done").commit("old")
        brief.claim("broken").fail("bad codec", retryable=False)
        brief.claim("flaky").fail("disk full", retryable=True)
        kept.claim("recent").commit("new")
        kept.claim("running")
        time.sleep(0.6)
        purged, notices, _ = self._purge_all(brief)
        self._finished_purged(purged, 3)
        assert notices == 0
        for key in ("done", "broken", "flaky"):
            assert brief.status(key) is None, f"{key} outlived its retention"
        recent, running = kept.status("recent"), kept.status("running")
        assert recent is not None and recent.result == "new"
        assert running is not None and running.state is JobState.PROCESSING
        assert self._purge_all(brief)[:2] == (0, 0)  # nothing more to delete
        again = brief.claim("done")  # a purged key is claimed at once, by a new request
        assert is_claim(again)
        status = brief.status("done")
        assert status is not None and status.owner is not None
        assert status.owner.attempt_id == again.attempt_id

    def test_purge_takes_a_dangling_job_after_dangling_after(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        ledger = driver.ledger(namespace, lease=0.2, retention=3600)
        self._dead(ledger, "dead")  # nobody takes it over
        ledger.claim("live", lease=30)
        time.sleep(0.5)
        assert ledger.purge().purged == 0  # dangling_after defaults to the retention
        assert self._purge_all(ledger, dangling_after=30)[0] == 0  # its lease ran out 0.3 s ago
        assert self._purge_all(ledger, dangling_after=0.1)[:2] == (1, 0)
        assert ledger.status("dead") is None
        live = ledger.status("live")
        assert live is not None and live.owner is not None  # a live lease is never purged

    def test_a_key_claimed_after_its_purge_continues_its_fences(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        # A purged key keeps its fence for one retention: long enough here that a loaded
        # machine's claim after the purge still finds it.
        ledger = driver.ledger(namespace, lease=0.2, retention=1.5)
        ledger.claim("k").fail("flaky", retryable=True)
        second = ledger.claim("k")
        assert is_claim(second) and second.fence == 2
        second.commit("done")
        self._dead(ledger, "dangling")  # fence 1, its owner dies
        time.sleep(1.7)
        purged = self._purge_all(ledger, dangling_after=1.0)[0]
        self._finished_purged(purged - 1, 1)  # and the dangling one
        assert ledger.status("k") is None and ledger.status("dangling") is None
        third = ledger.claim("k")
        assert is_claim(third) and third.fence == 3, "a purged key's fence started over"
        heir = ledger.claim("dangling")
        assert is_claim(heir) and heir.fence == 2, "a purged key's fence started over"
        with pytest.raises(StaleAttempt):  # the old owner's fence stays superseded
            second.commit("late")
        third.commit("again")
        time.sleep(1.7)
        assert self._purge_all(ledger, dangling_after=1.0)[0] >= 1  # the heir died too
        fourth = ledger.claim("k")
        assert is_claim(fourth) and fourth.fence == 4
        assert ledger.claim("dangling").fence == 3

    def test_purge_keeps_a_record_whose_notice_is_pending(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        ledger = driver.ledger(namespace, lease=0.2, retention=0.4)
        ledger.claim("waiting", watch=Watch("task", {"n": 1})).commit("a")
        ledger.claim("told", watch=Watch("task", {"n": 2})).commit("b")
        ledger.claim("plain").commit("c")
        due = ledger.lease_notices(owner="d", lease=0.3)  # "waiting" is leased, not sent
        (told,) = [n for n in due if n.key == "told"]
        assert ledger.settle_notice(told, "delivered", "ok")
        time.sleep(0.6)
        purged, kept, _ = self._purge_all(ledger)
        self._finished_purged(purged, 2)
        assert kept == 1
        waiting = ledger.status("waiting")
        assert waiting is not None and [n.status for n in waiting.notices] == ["pending"]
        assert ledger.status("told") is None and ledger.status("plain") is None
        assert self._purge_all(ledger)[:2] == (0, 1)  # still pending: still kept
        (waited,) = ledger.lease_notices(owner="d", lease=30)  # its first lease ran out
        assert ledger.settle_notice(waited, "dropped", "refused")
        purged, kept, _ = self._purge_all(ledger)
        self._finished_purged(purged, 1)
        assert kept == 0 and ledger.status("waiting") is None

    def test_a_purge_dry_run_counts_and_deletes_nothing(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        ledger = driver.ledger(namespace, lease=0.2, retention=3600)
        keys = ["a", "b", "c"]
        self._dead(ledger, *keys)
        brief = driver.ledger(namespace, lease=0.2, retention=0.4)
        brief.claim("noticed", watch=Watch("t", "u")).commit("n")
        time.sleep(0.6)
        before = {key: _stable(ledger.status(key)) for key in [*keys, "noticed"]}
        report = ledger.purge(dry_run=True, dangling_after=0.1)
        assert report.dry_run
        if self.exact_listing:  # a scan may need more calls to see the namespace
            assert (report.purged, report.kept_notices) == (3, 1)
        assert {key: _stable(ledger.status(key)) for key in before} == before
        counted = self._purge_all(ledger, dry_run=True, limit=2, dangling_after=0.1)
        assert counted[:2] == (3, 1)
        assert {key: _stable(ledger.status(key)) for key in before} == before
        done = self._purge_all(ledger, dangling_after=0.1)  # deletes what it counted
        assert done[:2] == (3, 1)
        assert all(ledger.status(key) is None for key in keys)

    def test_purge_goes_through_every_record_once_in_batches(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        ledger = driver.ledger(namespace, lease=0.2, retention=3600)
        dead = [f"dead-{n}" for n in range(7)]
        self._dead(ledger, *dead)
        for key in ("live-1", "live-2"):
            ledger.claim(key, lease=30)
        time.sleep(0.5)
        purged, _, calls = self._purge_all(ledger, limit=3, dangling_after=0.1)
        assert purged == 7 and calls >= 3  # never more than 3 at once, each exactly once
        assert all(ledger.status(key) is None for key in dead)
        assert all(ledger.status(key) is not None for key in ("live-1", "live-2"))

    def test_purge_leaves_other_namespaces_alone(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        ours = driver.ledger(namespace, lease=0.2, retention=3600)
        theirs = driver.ledger(namespace + "x", lease=0.2, retention=3600)
        self._dead(ours, "k")
        self._dead(theirs, "k", "j")
        time.sleep(0.5)
        assert self._purge_all(ours, dangling_after=0.1)[0] == 1
        assert ours.status("k") is None
        left = theirs.status("k")
        assert left is not None and left.state is JobState.PROCESSING
        assert theirs.status("j") is not None
        assert self._purge_all(theirs, dangling_after=0.1)[0] == 2

    def test_purge_is_one_store_call_and_refuses_bad_input(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        calls: Counter[str] = Counter()
        ledger = driver.ledger(
            namespace, lease=0.2, retention=3600, wrap=lambda store: _counting(store, calls)
        )
        self._dead(ledger, "k")
        time.sleep(0.5)
        before = _stable(ledger.status("k"))
        bad: list[dict[str, Any]] = [
            {"limit": 0},
            {"limit": 10_001},
            {"limit": "9"},
            {"after": ""},
            {"dangling_after": -1},
            {"dry_run": "yes"},
        ]
        for options in bad:
            with pytest.raises(UsageError):
                ledger.purge(**options)
        assert _stable(ledger.status("k")) == before
        calls.clear()
        ledger.purge(limit=10, dangling_after=0.1)
        assert calls == Counter(purge=1)  # a batch is one call of the port
        assert self._purge_all(ledger, dangling_after=0.1)[0] <= 1
        assert ledger.status("k") is None

    # -- lease_left counts down ----------------------------------------------------------------
    def test_in_progress_lease_left_counts_down(self, ledger: DrivenLedger) -> None:
        ledger.claim("k", lease=3)
        time.sleep(1.0)
        busy = ledger.claim("k")
        assert isinstance(busy, InProgress)
        assert timedelta(0) < busy.lease_left <= timedelta(seconds=2.2)

    # -- huge error messages -------------------------------------------------------------------
    def test_huge_error_message_is_recorded_truncated(self, ledger: DrivenLedger) -> None:
        claim = ledger.claim("k")
        claim.fail(RuntimeError("x" * 300_000), retryable=False)
        replay = ledger.claim("k")
        assert isinstance(replay, Replay) and replay.error is not None
        assert len(replay.error.message) <= 5000

    # -- a simultaneous herd on one key ---------------------------------------------------------
    @pytest.mark.parametrize("path", ["fresh", "retryable", "expired"])
    def test_simultaneous_claims_grant_one_owner(
        self, driver: LedgerDriver, namespace: str, path: str
    ) -> None:
        ledger = driver.ledger(namespace, lease=30)
        threads_per_key = 8
        for round_ in range(40):
            key = f"herd-{round_}"
            if path == "retryable":
                ledger.claim(key).fail("x", retryable=True)
            elif path == "expired":
                ledger.claim(key, lease=0.05)
            if path == "expired":
                time.sleep(0.08)
            outcomes = _herd(ledger, key, threads_per_key)
            winners = [o for o in outcomes if is_claim(o)]
            others = [o for o in outcomes if not is_claim(o)]
            assert len(winners) == 1, (round_, outcomes)
            assert all(isinstance(o, InProgress) for o in others), others

    # -- outputs -----------------------------------------------------------------------------

    @pytest.fixture
    def outputs(self) -> MemoryOutputStore:
        return MemoryOutputStore()

    def test_outputs_commit_with_the_result(
        self, driver: LedgerDriver, namespace: str, outputs: MemoryOutputStore
    ) -> None:
        ledger = driver.ledger(namespace, lease=30, outputs=outputs)
        claim = ledger.claim("seg-1")
        video = claim.outputs.put("segment-1.mp4", b"\x00video" * 1000)
        meta = claim.outputs.put("segment-1.json", b'{"frames": 250}')
        assert video.sha256 == hashlib.sha256(b"\x00video" * 1000).hexdigest()
        assert video.size == 6000 and video.key.endswith(f"/{claim.attempt_id}/segment-1.mp4")
        status = ledger.status("seg-1")
        assert status is not None
        running = status.attempts[-1]
        assert [(o.name, o.committed) for o in running.outputs] == [
            ("segment-1.mp4", False),
            ("segment-1.json", False),
        ]
        claim.commit({"video": video.uri})
        status = ledger.status("seg-1")
        assert status is not None and status.outputs == (video, meta)
        assert all(o.committed for o in status.attempts[-1].outputs)
        audit = ledger.audit("seg-1")
        assert [e.state for e in audit.entries] == [ObjectState.COMMITTED] * 2
        assert audit.orphans == ()
        ledger.verify(video)

    def test_a_superseded_attempt_cannot_register_or_write(
        self, driver: LedgerDriver, namespace: str, outputs: MemoryOutputStore
    ) -> None:
        ledger = driver.ledger(namespace, lease=30, outputs=outputs)
        a = ledger.claim("k", lease=0.2)
        time.sleep(0.3)
        b = ledger.claim("k")
        with pytest.raises(StaleAttempt):
            a.outputs.put("late.mp4", b"zombie bytes")
        assert list(outputs.list(f"{namespace}/")) == []
        b.commit("B")
        status = ledger.status("k")
        assert status is not None and all(not x.outputs for x in status.attempts)

    def test_outputs_of_ended_attempts_are_orphans_and_collected(
        self, driver: LedgerDriver, namespace: str, outputs: MemoryOutputStore
    ) -> None:
        ledger = driver.ledger(namespace, lease=30, outputs=outputs)
        a = ledger.claim("k", lease=0.3)
        lost = a.outputs.put("out.mp4", b"from A")
        time.sleep(0.4)
        b = ledger.claim("k")
        kept = b.outputs.put("out.mp4", b"from B")
        failed = ledger.claim("other")
        abandoned = failed.outputs.put("out.mp4", b"failed attempt")
        failed.fail("boom", retryable=True)
        stray = f"{namespace}/{ledger.ledger._core.job_id('k')}/nobody/stray.bin"
        outputs.put(stray, b"written by no attempt")  # unknown: reported, never deleted
        in_flight = ledger.claim("running")
        flying = in_flight.outputs.put("partial.mp4", b"still being written")
        b.commit({"video": kept.uri})
        audit = ledger.audit("k")
        states = {e.key: (e.state, e.attempt_id) for e in audit.entries}
        assert states == {
            lost.key: (ObjectState.ORPHAN, a.attempt_id),
            kept.key: (ObjectState.COMMITTED, b.attempt_id),
            stray: (ObjectState.UNKNOWN, None),
        }
        young = ledger.collect_orphans(grace=3600)
        assert young.deleted == () and len(young.kept_young) == 2
        report = ledger.collect_orphans(grace=0)
        assert {e.key for e in report.deleted} == {lost.key, abandoned.key}
        assert [e.key for e in report.unknown] == [stray]
        for key in (kept.key, flying.key, stray):
            assert outputs.head(key) is not None
        assert ledger.collect_orphans(grace=0).deleted == ()  # idempotent
        left = sorted(e.state for e in ledger.audit("k").entries if e.exists)
        assert left == [ObjectState.COMMITTED, ObjectState.UNKNOWN]

    def test_a_changed_object_fails_verification(
        self, driver: LedgerDriver, namespace: str, outputs: MemoryOutputStore
    ) -> None:
        ledger = driver.ledger(namespace, lease=30, outputs=outputs)
        claim = ledger.claim("k")
        ref = claim.outputs.put("data.bin", b"0123456789")
        claim.commit("ok")
        outputs.put(ref.key, b"01234")  # truncated behind the ledger's back
        with pytest.raises(ChecksumMismatch, match="truncated"):
            ledger.verify(ref)

    def test_publishing_is_write_once(
        self, driver: LedgerDriver, namespace: str, outputs: MemoryOutputStore
    ) -> None:
        ledger = driver.ledger(namespace, lease=30, outputs=outputs)
        claim = ledger.claim("video-A:1", result_version="h264-v2")
        ref = claim.outputs.put("segment.mp4", b"the one")
        claim.commit("ok")
        (published,) = ledger.publish("video-A:1")
        assert published.key == f"{namespace}/published/video-A:1/h264-v2/segment.mp4"
        assert ledger.publish("video-A:1") == [published]  # again: same object, no error
        outputs.put(published.key, b"someone else's")
        with pytest.raises(OutputExists):
            ledger.publish("video-A:1")
        assert ref.sha256 == published.sha256
        assert ledger.collect_orphans(grace=0).deleted == ()  # published copies are not orphans

    def test_audit_and_publish_take_a_decorated_handlers_key(
        self, driver: LedgerDriver, namespace: str, outputs: MemoryOutputStore
    ) -> None:
        """As ``status`` and ``resolve`` do: ``handler=`` (the function or its name) finds
        the job a decorated call stored under ``{name}/{key}``."""
        ledger = driver.ledger(namespace, lease=30, outputs=outputs)
        refs = []

        @ledger.idempotent(key=lambda seg: seg, result_version="h264-v2")
        def transcode(seg: str) -> str:
            refs.append(_put_output(driver, "segment.mp4", f"{seg} encoded".encode()))
            return seg

        assert transcode("seg-1") == "seg-1"
        name = transcode.__rill_handler__  # type: ignore[attr-defined]
        for handler in (transcode, name):
            audit = ledger.audit("seg-1", handler=handler)
            assert audit.job_id == ledger.ledger._core.job_id(f"{name}/seg-1")
            assert [(e.key, e.state) for e in audit.entries] == [
                (refs[0].key, ObjectState.COMMITTED)
            ]
        assert ledger.audit("seg-1").entries == ()  # the bare key is no job
        (published,) = ledger.publish("seg-1", handler=transcode)
        assert published.sha256 == refs[0].sha256
        assert ledger.publish("seg-1", handler=name) == [published]
        with pytest.raises(UsageError, match="no committed result"):
            ledger.publish("seg-1")
        with pytest.raises(UsageError, match="not decorated"):
            ledger.audit("seg-1", handler=len)

    def test_the_store_has_one_stable_identity(self, driver: LedgerDriver) -> None:
        from .._keys import validate_store_id
        from .._registry import open_store

        ours = _store_id(driver)
        assert validate_store_id(ours) == ours
        assert _store_id(driver) == ours
        if self.multiprocess:  # the same data opened again is the same store
            again = open_store(driver.url)
            try:
                assert again.store_id() == ours
            finally:
                again.close()

    def test_ping_answers(self, driver: LedgerDriver) -> None:
        from .._store import AsyncPingable, Pingable

        store = driver.shared_store()
        if driver._portal is None:
            assert isinstance(store, Pingable)
            store.ping()  # answers, raising nothing
        else:
            assert isinstance(store, AsyncPingable)
            driver._portal.call(store.ping())

    def test_output_keys_carry_the_store_identity(
        self, driver: LedgerDriver, namespace: str, outputs: MemoryOutputStore
    ) -> None:
        ledger = driver.ledger(namespace, lease=30, outputs=outputs)
        claim = ledger.claim("k", attempt_id="dispatch-1")
        ref = claim.outputs.put("out.mp4", b"bytes")
        digest = ledger.ledger._core.job_id("k")
        assert ref.key == f"{namespace}/{digest}/{_store_id(driver)}/dispatch-1/out.mp4"

    def test_collection_never_deletes_what_this_store_cannot_account_for(
        self, driver: LedgerDriver, namespace: str, outputs: MemoryOutputStore
    ) -> None:
        """Another job store on the same output prefix and namespace, with the same business
        key and the same caller-given attempt ids: its objects are unknown here, never
        deleted, and so are objects written into the prefix by hand."""
        ledger = driver.ledger(namespace, lease=30, outputs=outputs)
        failed = ledger.claim("k", attempt_id="dispatch-1")
        orphan = failed.outputs.put("out.mp4", b"ours, failed")
        failed.fail("boom", retryable=True)
        winner = ledger.claim("k", attempt_id="dispatch-2")
        committed = winner.outputs.put("out.mp4", b"ours, committed")
        winner.commit("ok")
        core, other = ledger.ledger._core, uuid.uuid4().hex
        foreign = [
            f"{namespace}/{core.job_id('k')}/{other}/dispatch-1/out.mp4",
            f"{namespace}/{core.job_id('k')}/{other}/dispatch-2/out.mp4",
            f"{namespace}/{core.job_id('only-there')}/{other}/dispatch-1/out.mp4",
            f"{namespace}/{core.job_id('k')}/dispatch-1/out.mp4",  # no store identity
            f"{namespace}/{core.job_id('k')}/by-hand.bin",
            f"{namespace}/by-hand.bin",
        ]
        for key in foreign:
            outputs.put(key, b"not this store's")
        audit = {e.key: e.state for e in ledger.audit("k").entries}
        assert audit[orphan.key] is ObjectState.ORPHAN
        assert audit[committed.key] is ObjectState.COMMITTED
        assert {audit[key] for key in foreign[:2] + foreign[3:5]} == {ObjectState.UNKNOWN}
        report = ledger.collect_orphans(grace=0)
        assert [e.key for e in report.deleted] == [orphan.key]
        assert sorted(e.key for e in report.unknown) == sorted(foreign)
        assert all(e.state is ObjectState.UNKNOWN for e in report.unknown)
        for key in [committed.key, *foreign]:
            assert outputs.head(key) is not None, key
        assert ledger.collect_orphans(grace=0).deleted == ()

    def test_an_object_registered_again_is_kept_while_a_registration_keeps_it(
        self, driver: LedgerDriver, namespace: str, outputs: MemoryOutputStore
    ) -> None:
        """A caller reusing an attempt id writes the same key twice: the failed attempt's
        registration does not make the committed object an orphan."""
        ledger = driver.ledger(namespace, lease=30, outputs=outputs)
        first = ledger.claim("k", attempt_id="dispatch-1")
        first.outputs.put("out.mp4", b"first")
        first.fail("boom", retryable=True)
        again = ledger.claim("k", attempt_id="dispatch-1")
        ref = again.outputs.put("out.mp4", b"second")
        again.commit("ok")
        assert ledger.collect_orphans(grace=0).deleted == ()
        ledger.verify(ref)
        (entry,) = ledger.audit("k").entries
        assert entry.state is ObjectState.COMMITTED and entry.fence == again.fence

    BAD_OUTPUT_NAMES: tuple[Any, ...] = ("", "../escape", "a/b", ".hidden", "x" * 201, "tab\t", 7)

    def test_bad_output_names_are_refused_and_register_nothing(
        self, driver: LedgerDriver, namespace: str, outputs: MemoryOutputStore
    ) -> None:
        ledger = driver.ledger(namespace, lease=30, outputs=outputs)
        claim = ledger.claim("k")
        before = _stable(ledger.status("k"))
        for name in self.BAD_OUTPUT_NAMES:
            with pytest.raises(InvalidOutputName):
                claim.outputs.put(name, b"x")
        assert _stable(ledger.status("k")) == before
        assert list(outputs.list("")) == []

    # -- many processes ----------------------------------------------------------------------

    @pytest.mark.slow
    def test_multi_process_race_runs_each_key_once(
        self, driver: LedgerDriver, namespace: str, tmp_path: Path
    ) -> None:
        keys = [f"seg-{i}" for i in range(24)]
        log = tmp_path / "side-effects.log"
        processes, threads = (8, 4) if self.multiprocess else (1, 32)
        start_at = time.time() + (3.0 if self.multiprocess else 0.2)
        args = [
            "race",
            driver.url,
            namespace,
            driver.mode,
            str(threads),
            str(start_at),
            str(log),
            *keys,
        ]
        if self.multiprocess:
            children = [
                subprocess.Popen(
                    [sys.executable, "-m", "rill_executor.testing._workers", *args],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for _ in range(processes)
            ]
            outs = [child.communicate(timeout=300)[0] for child in children]
            assert all(child.returncode == 0 for child in children), outs
            reports = [json.loads(out.strip().splitlines()[-1]) for out in outs]
        else:
            reports = [_in_process_race(driver.shared_store(), args)]
        effects = Counter(log.read_text().split())
        assert effects == Counter({key: 1 for key in keys}), "a key ran twice or never"
        errors = [e for r in reports for e in r["errors"]]
        assert errors == []
        answered = sum(r["report"].get("answered", 0) for r in reports)
        in_progress = sum(r["report"].get("in_progress", 0) for r in reports)
        assert answered + in_progress == processes * threads * len(keys) * 2
        for key in keys:
            winners = {
                json.dumps(r["results"][key], sort_keys=True)
                for r in reports
                if key in r["results"]
            }
            assert len(winners) == 1, f"{key} answered with different results: {winners}"
        ledger = driver.ledger(namespace, lease=30)
        for key in keys:
            status = ledger.status(key, handler="race")
            assert status is not None and status.state is JobState.SUCCEEDED
            assert [a.outcome for a in status.attempts] == [AttemptOutcome.SUCCEEDED]

    @pytest.mark.slow
    def test_sigstopped_zombie_is_fenced(self, driver: LedgerDriver, namespace: str) -> None:
        lease = 1.0
        command = [
            sys.executable,
            "-m",
            "rill_executor.testing._workers",
            "zombie",
            driver.url,
            namespace,
            driver.mode,
            "zombie-key",
            str(lease),
        ]
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True}
        with subprocess.Popen(command, **pipes) as child:  # type: ignore[call-overload]
            try:
                a = json.loads(child.stdout.readline())
                os.kill(child.pid, signal.SIGSTOP)
                time.sleep(lease * 1.6)
                ledger = driver.ledger(namespace, lease=30)
                b = ledger.claim(
                    "zombie/zombie-key", fingerprint=fingerprint_of({"k": "zombie-key"})
                )
                assert is_claim(b), b
                assert b.fence == a["fence"] + 1
                b.commit("winner")
                os.kill(child.pid, signal.SIGCONT)
                child.stdin.write("go\n")
                child.stdin.flush()
                report = json.loads(child.stdout.readline())
            finally:
                os.kill(child.pid, signal.SIGCONT)
        assert report == {"lost_seen_by_handler": True, "commit": "StaleAttempt:superseded"}
        status = ledger.status("zombie-key", handler="zombie")
        assert status is not None and status.result == "winner"
        assert [(x.attempt_id, x.outcome) for x in status.attempts] == [
            (a["attempt_id"], AttemptOutcome.EXPIRED),
            (b.attempt_id, AttemptOutcome.SUCCEEDED),
        ]

    # -- a burst of first calls on a fresh store -----------------------------------------------
    def test_a_burst_of_first_calls_on_a_fresh_store_grants_one_owner(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        """A store's very first calls may race to connect (a Cluster client maps its slots)."""
        outcomes = _cold_burst(driver.url, driver.mode, namespace, size=20)
        winners = [o for o in outcomes if is_claim(o)]
        odd = [o for o in outcomes if not is_claim(o) and not isinstance(o, InProgress)]
        assert len(winners) == 1, outcomes
        assert odd == [], odd


def _cold_burst(url: str, mode: str, namespace: str, size: int) -> list[Any]:
    """``size`` concurrent first claims of one key on a store opened for them alone."""
    import asyncio

    from .._claim import AsyncClaim
    from .._ledger import AsyncLedger, Ledger
    from .._registry import open_async_store, open_store
    from ._driver import BlockingClaim, Portal

    if mode == "sync":
        with Ledger(open_store(url), namespace=namespace, lease=30) as ledger:
            return _herd(DrivenLedger(ledger, None), "cold", size)

    async def burst() -> list[Any]:
        async with AsyncLedger(open_async_store(url), namespace=namespace, lease=30) as ledger:
            claims = [ledger.claim("cold") for _ in range(size)]
            outcomes = await asyncio.gather(*claims, return_exceptions=True)
        return [BlockingClaim(portal, o) if isinstance(o, AsyncClaim) else o for o in outcomes]

    portal = Portal()
    try:
        return portal.call(burst())
    finally:
        portal.close()


def _herd(ledger: DrivenLedger, key: str, size: int) -> list[Any]:
    """``size`` threads claim ``key`` at the same instant; their outcomes (or errors)."""
    barrier = threading.Barrier(size)
    outcomes: list[Any] = []

    def claim() -> None:
        barrier.wait()
        try:
            outcomes.append(ledger.claim(key))
        except Exception as exc:  # recorded: the assertion shows it
            outcomes.append(exc)

    pool = [threading.Thread(target=claim) for _ in range(size)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(30)
    return outcomes


def _in_process_race(store: Any, args: list[str]) -> dict[str, Any]:
    """Run the race worker on this process's store (for in-process stores)."""
    import contextlib
    import io

    from . import _workers

    _, _, namespace, mode, threads, start_at, log, *keys = args
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _workers.race(store, namespace, mode, int(threads), float(start_at), log, keys)
    return json.loads(out.getvalue().strip().splitlines()[-1])  # type: ignore[no-any-return]
