"""Two job stores on one bucket, prefix and namespace: each collects only its own orphans.

Staging and production, or an old and a new store during a migration, may write to the
same output prefix with the same namespace, business keys and even caller-given attempt
ids. Each store's collection must delete only the orphans it provably wrote, and leave the
other store's objects — committed or not — and objects written by hand in place.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import make_url

from rill_executor import Claim, Ledger
from rill_executor.outputs import OutputRef
from rill_executor.reports import ObjectState
from tests.conftest import _fresh_database, ensure_database

from .conftest import PREFIX, REGION, MotoServer

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def _peer_database(url: str, family: str) -> str:
    """A second database on the same server, next to the test database, with the schema."""
    peer = ensure_database(url, f"{make_url(url).database}_peer")
    return _fresh_database(peer, family)


def _peer_redis(url: str) -> str:
    """Another database number of the same Redis server."""
    base, _, query = url.partition("?")
    head, _, number = base.rpartition("/")
    return f"{head}/{(int(number or 0) + 8) % 16}" + (f"?{query}" if query else "")


@pytest.fixture(params=["memory", "sqlite", "postgres", "mariadb", "redis"])
def two_stores(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    kind = request.param
    if kind == "memory":
        return "memory://", "memory://"
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/a.db", f"sqlite:///{tmp_path}/b.db"
    if kind == "redis":
        url = str(request.getfixturevalue("redis_url"))
        return url, _peer_redis(url)
    url = str(request.getfixturevalue(f"{kind}_url"))
    return url, _peer_database(url, "postgresql" if kind == "postgres" else "mysql")


@pytest.fixture
def outputs_url(moto: MotoServer, bucket: str) -> str:
    return f"s3://{bucket}/{PREFIX}?endpoint_url={moto.endpoint}&region={REGION}"


@pytest.fixture
def ledgers(two_stores: tuple[str, str], outputs_url: str) -> Iterator[tuple[Ledger, Ledger]]:
    namespace = f"o{uuid.uuid4().hex[:12]}"
    a, b = (Ledger(url, namespace=namespace, lease=30, outputs=outputs_url) for url in two_stores)
    yield a, b
    for ledger in (a, b):
        assert ledger.outputs is not None
        ledger.outputs.close()
        ledger.close()


def _claim(ledger: Ledger, key: str, attempt_id: str) -> Claim:
    claim = ledger.claim(key, attempt_id=attempt_id)
    assert isinstance(claim, Claim), claim
    return claim


def _history(ledger: Ledger, who: str) -> tuple[OutputRef, OutputRef, OutputRef]:
    """An orphan and a committed output of one key, the same attempt ids in both stores,
    and a committed output of a key only this store has."""
    failed = _claim(ledger, "video-A:1", "dispatch-1")
    orphan = failed.outputs.put("segment.mp4", f"{who}: failed attempt".encode())
    failed.fail("transcoder crashed", retryable=True)
    winner = _claim(ledger, "video-A:1", "dispatch-2")
    committed = winner.outputs.put("segment.mp4", f"{who}: committed".encode())
    winner.commit({"video": committed.uri})
    alone = _claim(ledger, f"only-{who}", "dispatch-1")
    only = alone.outputs.put("segment.mp4", f"{who}: only here".encode())
    alone.commit({"video": only.uri})
    return orphan, committed, only


def test_each_store_collects_only_its_own_orphans(
    ledgers: tuple[Ledger, Ledger], admin: S3Client, bucket: str
) -> None:
    a, b = ledgers
    orphan_a, committed_a, only_a = _history(a, "A")
    orphan_b, committed_b, only_b = _history(b, "B")
    job = b.audit("video-A:1").job_id
    by_hand = [f"{a.namespace}/by-hand.bin", f"{a.namespace}/{job}/by-hand/segment.mp4"]
    for key in by_hand:
        admin.put_object(Bucket=bucket, Key=f"{PREFIX}/{key}", Body=b"nobody's")

    report = a.collect_orphans(grace=0)
    assert [e.key for e in report.deleted] == [orphan_a.key]
    unknown = {e.key: e.state for e in report.unknown}
    others = [orphan_b.key, committed_b.key, only_b.key, *by_hand]
    assert unknown == dict.fromkeys(others, ObjectState.UNKNOWN)
    for ref in (committed_b, only_b, committed_a, only_a):
        (b if ref in (committed_b, only_b) else a).verify(ref)  # byte for byte
    audit_b = {e.key: e.state for e in b.audit("video-A:1").entries if e.exists}
    assert audit_b[orphan_b.key] is ObjectState.ORPHAN  # still there, for B to collect

    report = b.collect_orphans(grace=0)
    assert [e.key for e in report.deleted] == [orphan_b.key]
    assert {e.key for e in report.unknown} == {committed_a.key, only_a.key, *by_hand}
    for ledger, ref in ((a, committed_a), (a, only_a), (b, committed_b), (b, only_b)):
        ledger.verify(ref)
    listed = admin.list_objects_v2(Bucket=bucket, Prefix=f"{PREFIX}/{a.namespace}/")
    left = {item["Key"].removeprefix(f"{PREFIX}/") for item in listed.get("Contents", [])}
    assert left == {committed_a.key, only_a.key, committed_b.key, only_b.key, *by_hand}
    assert a.collect_orphans(grace=0).deleted == b.collect_orphans(grace=0).deleted == ()
    assert a.store.store_id() != b.store.store_id()
