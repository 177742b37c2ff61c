"""The timeline renderer: a JobStatus in, SVG text out, read back with ElementTree.

Each test builds the status it needs by hand (times in seconds after T0) and checks the
picture's structure: bars by their data attributes, markers by their ``data-kind``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from rill_executor import AttemptOutcome, JobState, JobStatus
from rill_executor.cli._svg import text_width
from rill_executor.cli._timeline import WIDTH, timeline_svg
from rill_executor.reports import (
    AttemptInfo,
    ErrorInfo,
    EventInfo,
    NoticeInfo,
    OutputInfo,
    OwnerInfo,
)

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
NS = "{http://www.w3.org/2000/svg}"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def attempt(fence: int, start: float, end: float | None, outcome: str, **more: Any) -> AttemptInfo:
    return AttemptInfo(
        attempt_id=f"attempt-{fence}",
        fence=fence,
        started_at=at(start),
        ended_at=None if end is None else at(end),
        outcome=AttemptOutcome(outcome),
        error=more.pop("error", None),
        **more,
    )


def job(*attempts: AttemptInfo, now: float = 60, **more: Any) -> JobStatus:
    last = attempts[-1] if attempts else None
    state = more.pop("state", None) or (
        JobState.PROCESSING
        if last and last.outcome is AttemptOutcome.RUNNING
        else JobState.SUCCEEDED
        if last and last.outcome is AttemptOutcome.SUCCEEDED
        else JobState.FAILED
    )
    fields: dict[str, Any] = {
        "namespace": "transcode",
        "key": "video-A:1:h264-v2",
        "state": state,
        "fence": max([a.fence for a in attempts] or [1]),
        "result_version": "h264-v2",
        "fingerprint": "f" * 64,
        "owner": None,
        "result": None,
        "error": None,
        "created_at": at(0),
        "updated_at": at(
            max([a.ended_at or a.started_at for a in attempts] or [T0]).timestamp() - T0.timestamp()
        ),
        "finished_at": None,
        "retain_until": None,
        "store_time": at(now),
        "attempts": attempts,
    }
    return JobStatus(**(fields | more))


def owner(a: AttemptInfo, lease_end: float, now: float) -> OwnerInfo:
    return OwnerInfo(
        attempt_id=a.attempt_id,
        fence=a.fence,
        since=a.started_at,
        lease_expires_at=at(lease_end),
        lease_left=at(lease_end) - at(now),
    )


def resolved(when: float, action: str, fence: int, *, actor: str, reason: str) -> EventInfo:
    before = {"state": "processing", "fence": fence - 1, "owner_attempt": None, "lease_live": True}
    return EventInfo(
        at=at(when),
        kind="resolved",
        fence=fence,
        reason=reason,
        detail=action,
        actor=actor,
        data={"force": True, "before": before},
    )


def refused(when: float, a: AttemptInfo | None, reason: str = "superseded") -> EventInfo:
    return EventInfo(
        at=at(when),
        kind="token_refused",
        attempt_id=None if a is None else a.attempt_id,
        fence=None if a is None else a.fence,
        reason=reason,
        detail="complete",
    )


def notice(watch: str, created: float, settled: float | None, status: str) -> NoticeInfo:
    return NoticeInfo(
        id=f"n-{watch}",
        watch=watch,
        target={"url": "http://engine/callback"},
        fence=3,
        state=JobState.SUCCEEDED,
        error=None,
        status=status,
        attempts=0 if status == "pending" else 1,
        due=at(created),
        outcome=None if settled is None else "ok",
        detail=None,
        created_at=at(created),
        settled_at=None if settled is None else at(settled),
    )


def picture(status: JobStatus) -> ET.Element:
    return ET.fromstring(timeline_svg(status))


def bars(root: ET.Element) -> list[dict[str, str]]:
    return [dict(g.attrib) for g in root.iter(f"{NS}g") if g.get("class") == "attempt"]


def markers(root: ET.Element, kind: str) -> list[ET.Element]:
    return [g for g in root.iter(f"{NS}g") if g.get("data-kind") == kind]


def title(element: ET.Element) -> str:
    found = element.find(f"{NS}title")
    assert found is not None and found.text is not None
    return found.text


def texts(element: ET.Element) -> list[str]:
    return [t.text or "" for t in element.iter(f"{NS}text")]


# -- bars ------------------------------------------------------------------------------------

EVERY_OUTCOME = [
    attempt(1, 0, 10, "expired"),
    attempt(2, 10, 15, "failed", error=ErrorInfo(type="ValueError", message="no", retryable=True)),
    attempt(3, 16, 20, "fenced"),
    attempt(4, 21, 22, "abandoned"),
    attempt(5, 25, 30, "succeeded"),
]


def test_one_bar_per_attempt_in_fence_order_with_its_outcome() -> None:
    root = picture(job(*EVERY_OUTCOME))
    assert [(b["data-fence"], b["data-outcome"], b["data-attempt"]) for b in bars(root)] == [
        (str(a.fence), a.outcome.value, a.attempt_id) for a in EVERY_OUTCOME
    ]
    rects = [g.find(f"{NS}rect") for g in root.iter(f"{NS}g") if g.get("class") == "attempt"]
    assert [r.get("class") for r in rects if r is not None] == [
        f"bar {a.outcome.value}" for a in EVERY_OUTCOME
    ]
    assert root.get("width") == str(WIDTH) and root.get("data-state") == "succeeded"


def test_bars_sit_on_the_time_axis_start_to_end() -> None:
    root = picture(job(attempt(1, 0, 10, "expired"), attempt(2, 10, 40, "succeeded")))
    first, second = (
        g.find(f"{NS}rect") for g in root.iter(f"{NS}g") if g.get("class") == "attempt"
    )
    assert first is not None and second is not None
    x1, w1 = float(first.get("x", 0)), float(first.get("width", 0))
    x2, w2 = float(second.get("x", 0)), float(second.get("width", 0))
    assert x1 < x2 and x1 + w1 == pytest.approx(x2, abs=0.2)  # the takeover instant
    assert w2 == pytest.approx(3 * w1, abs=0.3)  # 30 s against 10 s


def test_a_bar_counts_the_outputs_its_attempt_registered() -> None:
    outputs = (
        OutputInfo(name="a.mp4", key="k/a", uri="s3://m/a", committed=True),
        OutputInfo(name="b.jpg", key="k/b", uri="s3://m/b", committed=False),
    )
    root = picture(job(attempt(1, 0, 5, "succeeded", outputs=outputs)))
    assert bars(root)[0]["data-outputs"] == "2"
    assert any("2 outputs (1 committed)" in t for t in texts(root))
    assert "output b.jpg (uncommitted) s3://m/b" in title(
        next(g for g in root.iter(f"{NS}g") if g.get("class") == "attempt")
    )


def test_a_running_attempt_runs_to_its_lease_end_drawn_apart_once_it_ran_out() -> None:
    running = attempt(1, 0, None, "running")
    live = picture(job(running, now=20, owner=owner(running, lease_end=30, now=20)))
    dead = picture(job(running, now=40, owner=owner(running, lease_end=30, now=40)))
    assert [b["data-lease"] for b in bars(live)] == ["live"]
    assert [b["data-lease"] for b in bars(dead)] == ["ran-out"]
    for root in (live, dead):
        assert len(markers(root, "lease-end")) == 1
        assert len(markers(root, "now")) == 1  # the store's clock, on the axis
    (bar,) = (g.find(f"{NS}rect") for g in dead.iter(f"{NS}g") if g.get("class") == "attempt")
    assert bar is not None and bar.get("fill") == "url(#lapsed)"
    assert any("lease ran out 10.0s ago: dangling" in t for t in texts(dead))
    assert any("running · lease 10.0s left" in t for t in texts(live))
    elapsed = [r for r in live.iter(f"{NS}rect") if r.get("class") == "elapsed"]
    (whole,) = [r for r in live.iter(f"{NS}rect") if r.get("class") == "bar running"]
    assert len(elapsed) == 1  # 20 s run of a lease to 30 s: two thirds of the bar
    ran, lease = float(elapsed[0].get("width", 0)), float(whole.get("width", 0))
    assert ran == pytest.approx(lease * 2 / 3, abs=0.3)
    ended = picture(job(attempt(1, 0, 5, "succeeded")))
    assert "data-lease" not in bars(ended)[0] and markers(ended, "lease-end") == []


# -- markers, present exactly when the status has them ----------------------------------------


def test_a_takeover_marks_each_expired_attempt_followed_by_another() -> None:
    root = picture(job(*EVERY_OUTCOME))
    (takeover,) = markers(root, "takeover")
    assert "attempt-2 (fence 2)" in title(takeover) and "attempt-1" in title(takeover)
    assert (
        markers(picture(job(attempt(1, 0, 5, "failed"), attempt(2, 6, 9, "succeeded"))), "takeover")
        == []
    )
    trailing = job(attempt(1, 0, 5, "failed"), attempt(2, 6, 9, "expired"))
    assert markers(picture(trailing), "takeover") == []
    twice = job(
        attempt(1, 0, 5, "expired"), attempt(2, 5, 9, "expired"), attempt(3, 9, 12, "succeeded")
    )
    assert len(markers(picture(twice), "takeover")) == 2


def test_fenced_attempts_and_refused_tokens_are_marked() -> None:
    first, second = attempt(1, 0, 10, "expired"), attempt(2, 10, 20, "fenced")
    events = (refused(12, first), refused(14, None, reason="forged"))
    root = picture(job(first, second, attempt(3, 21, 25, "succeeded"), events=events))
    assert len(markers(root, "fenced")) == 1
    shown = markers(root, "refused")
    assert len(shown) == 2
    assert "reason superseded" in title(shown[0]) and "attempt attempt-1" in title(shown[0])
    assert "reason forged" in title(shown[1])
    assert any(t == "job events" for t in texts(root))  # the refusal naming no attempt
    plain = picture(job(attempt(1, 0, 5, "failed"), attempt(2, 6, 9, "succeeded")))
    assert markers(plain, "fenced") == markers(plain, "refused") == []
    assert "job events" not in texts(plain)


def test_the_commit_is_marked_at_the_succeeded_attempts_end() -> None:
    root = picture(job(attempt(1, 0, 5, "failed"), attempt(2, 6, 9, "succeeded")))
    (commit,) = markers(root, "commit")
    assert "2026-03-01 12:00:09.000" in title(commit)
    assert markers(picture(job(attempt(1, 0, 5, "failed"))), "commit") == []


def test_a_resolution_shows_its_action_actor_and_reason() -> None:
    event = resolved(12, "redo", 3, actor="alice@ops", reason="poisoned: corrupt output")
    root = picture(
        job(
            attempt(1, 0, 10, "expired"),
            attempt(2, 10, 12, "fenced"),
            attempt(4, 14, 20, "succeeded"),
            events=(event,),
        )
    )
    (shown,) = markers(root, "resolution")
    assert shown.get("data-action") == "redo"
    for part in ("redo", "alice@ops", "poisoned: corrupt output", "fence set to 3", "forced"):
        assert part in title(shown)
    assert "redo by alice@ops" in texts(shown)
    assert markers(picture(job(attempt(1, 0, 5, "succeeded"))), "resolution") == []


def test_notices_show_when_they_were_queued_and_settled() -> None:
    notices = (notice("seg1", 20, 21.5, "delivered"), notice("seg2", 20, None, "pending"))
    root = picture(job(attempt(1, 0, 20, "succeeded"), notices=notices))
    shown = markers(root, "notice")
    assert [(n.get("data-notice"), n.get("data-status")) for n in shown] == [
        ("n-seg1", "delivered"),
        ("n-seg2", "pending"),
    ]
    assert "queued 2026-03-01 12:00:20.000; delivered 2026-03-01 12:00:21.500" in title(shown[0])
    assert len(shown[0].findall(f"{NS}circle")) == 2  # queued and settled
    assert len(shown[1].findall(f"{NS}circle")) == 1  # queued, not settled
    assert "delivered after 1.5s · 1 try · ok" in texts(shown[0])
    assert markers(picture(job(attempt(1, 0, 20, "succeeded"))), "notice") == []


# -- the axis, the layout, the text ------------------------------------------------------------


def test_the_axis_has_ticks_and_the_clock_only_when_it_is_near() -> None:
    near = picture(job(attempt(1, 0, 20, "succeeded"), now=22))
    ticks = [t.text or "" for t in near.iter(f"{NS}text") if t.get("class") == "tick"]
    assert 2 <= len(ticks) <= 9 and ticks == sorted(ticks)
    assert "12:00:10" in ticks
    assert len(markers(near, "now")) == 1
    later = picture(job(attempt(1, 0, 20, "succeeded"), now=3 * 3600))
    assert markers(later, "now") == []
    assert any("2h 59m after the last recorded time (off the axis)" in t for t in texts(later))


def test_every_label_stays_inside_the_picture() -> None:
    first, second = attempt(1, 0, 10, "expired"), attempt(2, 10, 20, "fenced")
    events = (
        refused(21, first),
        resolved(20, "redo", 3, actor="a-very-long-operator-name@ops.example", reason="r"),
        resolved(20.2, "terminate", 4, actor="bob", reason="source deleted"),
    )
    late = attempt(
        5,
        58,
        59.9,
        "succeeded",
        outputs=tuple(
            OutputInfo(name=f"o{n}", key=f"k{n}", uri=f"s3://m/{n}", committed=True)
            for n in range(12)
        ),
    )
    root = picture(
        job(
            first,
            second,
            late,
            events=events,
            now=60,
            notices=(notice("a-watch-with-a-long-name", 59.9, 60, "delivered"),),
            key="video-" + "A" * 300,
            result_version="v" * 200,
        )
    )
    assert "video-" + "A" * 300 in title(root)  # cut to fit on the picture, whole on hover
    width = float(root.get("width", 0))
    for text in root.iter(f"{NS}text"):
        x, size = float(text.get("x", 0)), float(text.get("font-size", 12))
        span = text_width(text.text or "", size)
        left, right = {"end": (x - span, x), "middle": (x - span / 2, x + span / 2)}.get(
            text.get("text-anchor", ""), (x, x + span)
        )
        assert left >= 0 and right <= width, (text.text, left, right)
    lanes = {t.get("y") for g in markers(root, "resolution") for t in g.iter(f"{NS}text")}
    assert len(lanes) == 2  # two resolutions 0.2 s apart: their labels on two lines


def test_the_same_status_gives_the_same_picture() -> None:
    status = job(*EVERY_OUTCOME, events=(refused(11, EVERY_OUTCOME[0]),))
    assert timeline_svg(status) == timeline_svg(
        JobStatus.model_validate_json(status.model_dump_json())
    )


def test_control_characters_in_recorded_text_keep_the_svg_valid() -> None:
    event = resolved(5, "redo", 2, actor="ops", reason="bad\x01byte\x1b[0m")
    root = picture(job(attempt(1, 0, 4, "failed"), events=(event,)))
    assert "bad\ufffdbyte\ufffd[0m" in title(markers(root, "resolution")[0])


def test_a_job_without_attempts_is_still_drawn() -> None:
    root = picture(job(state=JobState.SUCCEEDED))
    assert bars(root) == [] and "no attempts on record" in texts(root)
