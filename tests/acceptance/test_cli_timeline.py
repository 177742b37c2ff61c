"""``rill-executor timeline``, run as the installed command in a subprocess against SQLite,
PostgreSQL and Redis: a job with a takeover, a refused late commit, a forced resolution, a
commit with outputs and its completion notices, drawn to a file and read back."""

from __future__ import annotations

import json
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from rill_executor import Claim, Ledger, StaleAttempt
from rill_executor.outputs import MemoryOutputStore
from rill_executor.store import Watch
from tests.clocks import STORE_CLOCK

from .cli import run

NS = "{http://www.w3.org/2000/svg}"
KEY = "video-A:segment-1:h264-v2"


@pytest.fixture
def namespace() -> str:
    return f"timeline-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def ledger(store_url: str, namespace: str) -> Iterator[Ledger]:
    outputs = MemoryOutputStore()
    with Ledger(
        store_url, namespace=namespace, lease=timedelta(seconds=30), outputs=outputs
    ) as found:
        yield found


def claimed(outcome: object) -> Claim:
    assert isinstance(outcome, Claim), outcome
    return outcome


def lapse(ledger: Ledger, key: str) -> None:
    """Wait until the owner's lease of ``key`` has run out on the store's clock."""
    while (
        (status := ledger.status(key)) and status.owner and status.owner.lease_left > timedelta(0)
    ):
        time.sleep(0.05)


def incident(ledger: Ledger) -> tuple[Claim, Claim, Claim]:
    """Fence 1 dies and is taken over; its late commit is refused and its completion token
    recorded as refused; an operator forces a redo on fence 2's live lease; fence 4 commits
    two outputs; the engine is told, one notice delivered."""
    watch = Watch("seg1", {"url": "http://engine/cb"})
    first = claimed(ledger.claim(KEY, lease=timedelta(milliseconds=300), watch=watch))
    first.outputs.put("part-0.mp4", b"partial")
    lapse(ledger, KEY)
    second = claimed(ledger.claim(KEY))
    with pytest.raises(StaleAttempt):
        first.commit({"uri": "s3://media/late.mp4"})
    ledger.record_event(
        KEY,
        "token_refused",
        attempt_id=first.attempt_id,
        fence=first.fence,
        reason="superseded",
        detail="complete",
    )
    ledger.resolve(KEY, "redo", reason="poisoned record", actor="alice@ops", force=True)
    third = claimed(ledger.claim(KEY, watch=Watch("seg1-retry", {"url": "http://engine/cb"})))
    third.outputs.put("segment.mp4", b"frames")
    third.outputs.put("thumb.jpg", b"jpeg")
    third.commit({"uri": "s3://media/A/1.mp4"})
    due = ledger.lease_notices(owner="test")
    assert due
    ledger.settle_notice(due[0], "delivered", "ok")
    return first, second, third


def kinds(root: ET.Element) -> dict[str, int]:
    found: dict[str, int] = {}
    for g in root.iter(f"{NS}g"):
        if g.get("class") == "marker":
            kind = g.get("data-kind", "")
            found[kind] = found.get(kind, 0) + 1
    return found


@pytest.mark.real_clock(STORE_CLOCK)
def test_timeline_draws_the_incident_to_a_file(
    ledger: Ledger, store_url: str, namespace: str, tmp_path: Path
) -> None:
    first, second, third = incident(ledger)
    out = tmp_path / "job.svg"
    done = run("timeline", KEY, "--store", store_url, "--namespace", namespace, "--svg", str(out))
    assert done.returncode == 0, done.stderr
    assert f"wrote {out}" in done.stdout and "3 attempts" in done.stdout

    root = ET.parse(out).getroot()
    assert root.tag == f"{NS}svg" and root.get("data-key") == KEY
    bars = [g.attrib for g in root.iter(f"{NS}g") if g.get("class") == "attempt"]
    assert [(b["data-attempt"], b["data-fence"], b["data-outcome"]) for b in bars] == [
        (first.attempt_id, "1", "expired"),
        (second.attempt_id, "2", "fenced"),
        (third.attempt_id, "4", "succeeded"),
    ]
    assert [b["data-outputs"] for b in bars] == ["1", "0", "2"]
    drawn = kinds(root)
    drawn.pop("now", None)  # the store's clock: on the axis only if near the last change
    assert any((t.text or "").startswith("store clock ") for t in root.iter(f"{NS}text"))
    assert drawn == {
        "takeover": 1,
        "refused": 1,
        "fenced": 1,
        "commit": 1,
        "resolution": 1,
        "notice": 2,
    }
    (resolution,) = (g for g in root.iter(f"{NS}g") if g.get("data-kind") == "resolution")
    tip = resolution.findtext(f"{NS}title") or ""
    assert "alice@ops" in tip and "poisoned record" in tip
    statuses = sorted(
        g.get("data-status", "") for g in root.iter(f"{NS}g") if g.get("data-kind") == "notice"
    )
    assert statuses == ["delivered", "pending"]


@pytest.mark.real_clock(STORE_CLOCK)
def test_timeline_writes_to_stdout_by_default_and_is_the_same_picture(
    ledger: Ledger, store_url: str, namespace: str, tmp_path: Path
) -> None:
    incident(ledger)
    where = ("--store", store_url, "--namespace", namespace)
    done = run("timeline", KEY, *where)
    assert done.returncode == 0, done.stderr
    root = ET.fromstring(done.stdout)
    assert len([g for g in root.iter(f"{NS}g") if g.get("class") == "attempt"]) == 3
    out = tmp_path / "job.svg"
    as_json = run("timeline", KEY, *where, "--svg", str(out), "-o", "json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == {
        "file": str(out),
        "namespace": namespace,
        "key": KEY,
        "attempts": 3,
        "notices": 2,
        "events": 2,
    }
    assert ET.parse(out).getroot().get("data-state") == "succeeded"


def test_timeline_finds_a_handlers_job_with_handler(
    ledger: Ledger, store_url: str, namespace: str
) -> None:
    @ledger.idempotent(key=lambda video: video, name="probe")
    def probe(video: str) -> str:
        return f"probed {video}"

    probe("video-A")
    where = ("--store", store_url, "--namespace", namespace)
    plain = run("timeline", "video-A", *where)
    assert plain.returncode == 3 and "pass --handler NAME" in plain.stderr and plain.stdout == ""
    scoped = run("timeline", "video-A", "--handler", "probe", *where)
    assert scoped.returncode == 0, scoped.stderr
    bars = [g for g in ET.fromstring(scoped.stdout).iter(f"{NS}g") if g.get("class") == "attempt"]
    assert [b.get("data-outcome") for b in bars] == ["succeeded"]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("no-such-key",), 3, "no job 'no-such-key' in namespace"),
        ((KEY, "--svg", "/no/such/folder/job.svg"), 2, "no folder '/no/such/folder'"),
        ((KEY, "--store", "redis://127.0.0.1:1/0"), 4, "is not reachable"),
        ((KEY, "--namespace", "bad namespace"), 2, "namespace 'bad namespace' is not"),
    ],
)
def test_timeline_bad_input_exits_non_zero_and_writes_nothing(
    ledger: Ledger,
    store_url: str,
    namespace: str,
    tmp_path: Path,
    args: tuple[str, ...],
    code: int,
    message: str,
) -> None:
    claimed(ledger.claim(KEY)).commit("kept")
    store = () if "--store" in args else ("--store", store_url)
    space = () if "--namespace" in args else ("--namespace", namespace)
    svg = () if "--svg" in args else ("--svg", str(tmp_path / "job.svg"))
    done = run("timeline", *args, *store, *space, *svg)
    assert done.returncode == code, done
    assert done.stderr.startswith("error: ") and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert list(tmp_path.iterdir()) == []
