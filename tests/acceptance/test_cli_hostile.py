"""The operations CLI on a job whose free-text fields hold hostile strings (NUL, lone
surrogates, terminal escapes): ``status`` shows it and ``resolve`` applies, on SQLite,
PostgreSQL and Redis."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest

from rill_executor import Claim, JobState, Ledger
from rill_executor.store import Watch

from .cli import opts, run

HOSTILE = "disk\x00full \ud800 \x1b[31mred\x1b[0m \U0010fffd000000 end"


@pytest.fixture
def namespace() -> str:
    return f"hostile-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def ledger(store_url: str, namespace: str) -> Iterator[Ledger]:
    with Ledger(store_url, namespace=namespace, lease=timedelta(seconds=30)) as found:
        yield found


@pytest.mark.parametrize("output", ["json", "text"])
def test_resolve_works_on_a_job_whose_fields_hold_hostile_strings(
    store_url: str, namespace: str, ledger: Ledger, output: str
) -> None:
    claim = ledger.claim("seg-1", watch=Watch("ws:dag_c_k6/encode", {"url": "http://e/cb"}))
    assert isinstance(claim, Claim)
    claim.fail(RuntimeError(HOSTILE), retryable=False)
    assert ledger.record_event("seg-1", "note.test", reason=HOSTILE, detail=HOSTILE)
    where = opts(store_url, namespace)

    shown = run("status", "seg-1", *where, "-o", output)
    assert shown.returncode == 0, shown.stderr
    if output == "json":
        status = json.loads(shown.stdout)
        assert status["error"]["message"] == HOSTILE
        assert status["events"][0]["reason"] == HOSTILE
    reason = "poisoned \x1b[1mrecord\x1b[0m \x01"
    done = run(
        "resolve", "seg-1", "--redo", "--reason", reason, "--actor", "op", *where, "-o", output
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    after = ledger.status("seg-1")
    assert after is not None and after.state is JobState.FAILED and after.fence == 2
    assert [e.reason for e in after.events] == [HOSTILE, reason.strip()]
    assert after.attempts[0].error is not None and after.attempts[0].error.message == HOSTILE
    again = ledger.claim("seg-1")
    assert isinstance(again, Claim)
    again.commit({"note": HOSTILE.replace("\ud800", "")})
    assert ledger.status("seg-1").result == {"note": HOSTILE.replace("\ud800", "")}  # type: ignore[union-attr]
