"""The drill's output checks on the moto S3 server: every orphan collected by gc, and
exactly the expected number of committed outputs per key."""

from __future__ import annotations

import time
import uuid

from rill_executor import Claim, Ledger
from rill_executor.testing.drill import FaultKind, Injected, check

from ...drill.records import RESULT, record
from .conftest import PREFIX, REGION, MotoServer


def test_the_drill_collects_orphans_and_counts_committed_outputs(
    sqlite_url: str, moto: MotoServer, bucket: str
) -> None:
    outputs = f"s3://{bucket}/{PREFIX}?endpoint_url={moto.endpoint}&region={REGION}"
    namespace = f"d{uuid.uuid4().hex[:12]}"
    with Ledger(sqlite_url, namespace=namespace, outputs=outputs) as ledger:
        crashed = ledger.claim("one")
        assert isinstance(crashed, Claim)
        crashed.outputs.put("seg.mp4", b"x" * 100)  # written, then the attempt fails
        crashed.fail("encoder crashed", retryable=True)
        again = ledger.claim("one")
        assert isinstance(again, Claim)
        again.outputs.put("seg.mp4", b"y" * 100)
        again.commit(RESULT)
        twice = ledger.claim("two")
        assert isinstance(twice, Claim)
        twice.outputs.put("seg.mp4", b"y" * 100)
        twice.outputs.put("seg-copy.mp4", b"y" * 100)
        twice.commit(RESULT)
        assert ledger.drill().orphan_outputs == 1
    now = time.time()
    kill = Injected(at=now - 60, offset=0.0, kind=FaultKind.KILL, target="executor 0", until=now)
    drilled = record(sqlite_url, {"one": RESULT, "two": RESULT}, [kill])
    checks = {
        c.name: c for c in check(drilled, namespace=namespace, outputs=outputs, outputs_per_key=1)
    }
    assert checks["orphans_collected"].ok and checks["orphans_collected"].skipped is None
    assert not checks["one_output_per_key"].ok
    assert checks["one_output_per_key"].problems == ("two: 2 committed outputs, expected 1",)
    with Ledger(sqlite_url, namespace=namespace, outputs=outputs) as ledger:
        assert ledger.drill().orphan_outputs == 0
