"""Retention, listing a namespace's jobs, and purging records past retention (invariant 8)."""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from ... import ConfigError, Conflict, JobState, Replay, StaleAttempt, UsageError, fingerprint_of
from ...store import Watch
from .._driver import DrivenLedger, LedgerDriver, is_claim
from ._fixtures import KitBase
from ._support import _counting, _stable

__all__ = ["Purge"]


class Purge(KitBase):
    """Part of ``StoreConformance``: the group ``purge``."""

    # -- retention (invariant 8) -----------------------------------------------------------

    def test_after_retention_the_work_runs_again(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        ledger = driver.ledger(namespace, lease=0.2, retention=0.6)
        first = ledger.claim("k", fingerprint=fingerprint_of(1), lease=30)
        first.commit("old")
        assert isinstance(ledger.claim("k", fingerprint=fingerprint_of(1)), Replay)
        time.sleep(0.8)
        again = ledger.claim("k", fingerprint=fingerprint_of(2))
        assert is_claim(again) and again.fence > first.fence

    def test_retention_takeover_adopts_the_new_request(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        ledger = driver.ledger(namespace, lease=0.2, retention=0.5)
        ledger.claim("k", fingerprint=fingerprint_of(1), result_version="v1", lease=30).commit(
            "old"
        )
        time.sleep(0.7)
        again = ledger.claim("k", fingerprint=fingerprint_of(2), result_version="v2", lease=30)
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
        ledger.claim("k", lease=30).commit("kept")
        status = ledger.status("k")
        assert status is not None and status.retain_until and status.finished_at
        assert abs((status.retain_until - status.finished_at) - timedelta(seconds=1.5)) < timedelta(
            milliseconds=1
        )
        time.sleep(1.0)  # two thirds of the retention: still a replay
        replay = ledger.claim("k")
        assert isinstance(replay, Replay) and replay.result() == "kept"

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
        brief.claim("done", lease=30).commit("old")
        brief.claim("broken", lease=30).fail("bad codec", retryable=False)
        brief.claim("flaky", lease=30).fail("disk full", retryable=True)
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
        # A purged key keeps its fence for one retention (a dangling one's: dangling_after),
        # from the purge: seconds here, so that a loaded machine's claim after the purge
        # still finds it.
        ledger = driver.ledger(namespace, lease=2.0, retention=3.0)
        ledger.claim("k").fail("flaky", retryable=True)
        second = ledger.claim("k")
        assert is_claim(second) and second.fence == 2
        second.commit("done")
        self._dead(ledger, "dangling")  # fence 1, its owner dies
        time.sleep(3.2)
        purged = self._purge_all(ledger, dangling_after=2.5)[0]
        self._finished_purged(purged - 1, 1)  # and the dangling one
        assert ledger.status("k") is None and ledger.status("dangling") is None
        third = ledger.claim("k")
        assert is_claim(third) and third.fence == 3, "a purged key's fence started over"
        heir = ledger.claim("dangling", lease=0.2)  # and dies in its turn
        assert is_claim(heir) and heir.fence == 2, "a purged key's fence started over"
        with pytest.raises(StaleAttempt):  # the old owner's fence stays superseded
            second.commit("late")
        third.commit("again")
        time.sleep(3.2)
        assert self._purge_all(ledger, dangling_after=2.5)[0] >= 1  # the heir died too
        fourth = ledger.claim("k")
        assert is_claim(fourth) and fourth.fence == 4
        assert ledger.claim("dangling").fence == 3

    def test_purge_keeps_a_record_whose_notice_is_pending(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        ledger = driver.ledger(namespace, lease=0.2, retention=0.4)
        ledger.claim("waiting", watch=Watch("task", {"n": 1}), lease=30).commit("a")
        ledger.claim("told", watch=Watch("task", {"n": 2}), lease=30).commit("b")
        ledger.claim("plain", lease=30).commit("c")
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
        brief.claim("noticed", watch=Watch("t", "u"), lease=30).commit("n")
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
