"""``rill-executor gc --outputs-url``, the installed command on a SQLite job store and the
moto S3 server: orphan outputs are collected before the records that prove them go."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from rill_executor import Claim, Ledger
from tests.acceptance.cli import opts, run
from tests.clocks import STORE_CLOCK

from .conftest import PREFIX, REGION, MotoServer


@pytest.mark.real_clock(STORE_CLOCK)
def test_gc_collects_orphan_outputs_then_deletes_the_records(
    sqlite_url: str, moto: MotoServer, bucket: str
) -> None:
    outputs = f"s3://{bucket}/{PREFIX}?endpoint_url={moto.endpoint}&region={REGION}"
    namespace = f"gco{uuid.uuid4().hex[:10]}"
    brief = Ledger(sqlite_url, namespace=namespace, lease=0.2, retention=0.4, outputs=outputs)
    kept = Ledger(sqlite_url, namespace=namespace, lease=30, retention=3600, outputs=outputs)
    failed = brief.claim("failed")
    assert isinstance(failed, Claim)
    failed.outputs.put("part.mp4", b"written, never committed")
    failed.fail("encoder crashed", retryable=True)  # its object is an orphan
    done = kept.claim("done")
    assert isinstance(done, Claim)
    ref = done.outputs.put("video.mp4", b"the committed result")
    done.commit({"uri": ref.uri})
    time.sleep(0.6)

    dry = run("gc", *opts(sqlite_url, namespace), "--outputs-url", outputs, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "not collected in a dry run" in dry.stdout
    assert [e.exists for e in kept.audit("failed").entries] == [True]

    result = run(
        "gc", *opts(sqlite_url, namespace), "--outputs-url", outputs, "--outputs-grace", "0",
        "-o", "json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["outputs"] == {"deleted": 1, "kept_young": 0, "unknown": 0, "jobs": 2}
    assert summary["purged"] == 1 and kept.status("failed") is None
    kept.verify(ref)  # the committed object is still there, byte for byte
    for ledger in (brief, kept):
        assert ledger.outputs is not None
        ledger.outputs.close()
        ledger.close()
