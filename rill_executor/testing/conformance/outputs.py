"""Outputs: fenced registration, audit, collection, publishing (invariants 7 and 14)."""

from __future__ import annotations

import hashlib
import time
import uuid
from typing import Any

import pytest

from ... import ChecksumMismatch, InvalidOutputName, OutputExists, StaleAttempt, UsageError
from ...outputs import MemoryOutputStore
from ...reports import ObjectState
from .._driver import LedgerDriver
from ._fixtures import KitBase
from ._support import _put_output, _stable, _store_id

__all__ = ["Outputs"]


class Outputs(KitBase):
    """Part of ``StoreConformance``: the group ``outputs``."""

    # -- outputs: registered by their attempt, committed with its result -------------------

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
        a = ledger.claim("k", lease=1.0)  # long enough to register an output on a loaded machine
        lost = a.outputs.put("out.mp4", b"from A")
        time.sleep(max(0.0, a.lease_left()) + 0.1)  # A's lease is over: B takes the job over
        b = ledger.claim("k")
        kept = b.outputs.put("out.mp4", b"from B")
        failed = ledger.claim("other")
        abandoned = failed.outputs.put("out.mp4", b"failed attempt")
        failed.fail("boom", retryable=True)
        stray = f"{namespace}/{ledger.ledger.job_id('k')}/nobody/stray.bin"
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

        @ledger.idempotent(name="transcode", key=lambda seg: seg, result_version="h264-v2")
        def transcode(seg: str) -> str:
            refs.append(_put_output(driver, "segment.mp4", f"{seg} encoded".encode()))
            return seg

        assert transcode("seg-1") == "seg-1"
        name = transcode.__rill_handler__  # type: ignore[attr-defined]
        for handler in (transcode, name):
            audit = ledger.audit("seg-1", handler=handler)
            assert audit.job_id == ledger.ledger.job_id(f"{name}/seg-1")
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
        from ... import open_store
        from ...store import validate_store_id

        ours = _store_id(driver)
        assert validate_store_id(ours) == ours
        assert _store_id(driver) == ours
        if self.multiprocess:  # the same data opened again is the same store
            again = open_store(driver.url)
            try:
                assert again.store_id() == ours
            finally:
                again.close()

    def test_output_keys_carry_the_store_identity(
        self, driver: LedgerDriver, namespace: str, outputs: MemoryOutputStore
    ) -> None:
        ledger = driver.ledger(namespace, lease=30, outputs=outputs)
        claim = ledger.claim("k", attempt_id="dispatch-1")
        ref = claim.outputs.put("out.mp4", b"bytes")
        digest = ledger.ledger.job_id("k")
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
        core, other = ledger.ledger, uuid.uuid4().hex
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
