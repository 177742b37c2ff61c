"""``rill-executor gc``, run as the installed command in a subprocess against SQLite,
PostgreSQL and Redis: 10,000 records past retention go in batches, live ones stay, a dry
run deletes nothing, and bad input changes nothing."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from rill_executor import Ledger, open_store
from rill_executor._keys import job_id
from rill_executor.store import ClaimRequest, Watch, claimed_row
from rill_executor_sql import SqlStore
from rill_executor_sql._flows import _bound, _columns
from rill_executor_sql._schema import jobs
from tests.clocks import STORE_CLOCK

from .cli import opts, run

MANY = 10_000


@pytest.fixture
def namespace() -> str:
    return f"gc-{uuid.uuid4().hex[:10]}"


def _dangling(url: str, namespace: str, count: int) -> list[str]:
    """``count`` jobs whose owners died at once: claimed with a 1 µs lease, never ended.
    Redis: one claim each through the port. SQL: the rows those claims write
    (``claimed_row``), inserted in one transaction: 10,000 fsynced SQLite commits would
    take the test's whole budget."""
    keys = [f"dead-{n:05d}" for n in range(count)]
    requests = [
        ClaimRequest(
            job_id=job_id(namespace, key),
            namespace=namespace,
            key=key,
            fingerprint="0" * 64,
            result_version=None,
            attempt_id=f"a-{key}",
            lease_us=1,
        )
        for key in keys
    ]
    store = open_store(url)
    try:
        if isinstance(store, SqlStore):
            _insert_claimed(store, requests)
        else:
            with ThreadPoolExecutor(4) as pool:
                assert all(answer.ok for answer in pool.map(store.claim, requests))
    finally:
        store.close()
    return keys


def _insert_claimed(store: SqlStore, requests: list[ClaimRequest]) -> None:
    with store.engine.begin() as conn:
        now = int(conn.execute(select(store.dialect.now)).scalar_one())
        rows = [_columns(claimed_row(None, r, now), "[]") for r in requests]
        conn.execute(jobs.insert(), [_bound(store.dialect, row) for row in rows])


@pytest.fixture
def seeded(store_url: str, namespace: str) -> Iterator[dict[str, Any]]:
    """10,000 dangling jobs, 3 finished past retention, 1 of them with a pending notice;
    and what must stay: a live job, a job within its retention, a dangling job next door."""
    dead = _dangling(store_url, namespace, MANY)
    # Kept 0.2 s once finished, each claimed with a long lease of its own: however loaded
    # the machine, it commits in its lease, and 0.3 s later it is past retention.
    brief = Ledger(store_url, namespace=namespace, lease=0.1, retention=0.2)
    kept = Ledger(store_url, namespace=namespace, lease=30, retention=3600)
    next_door = Ledger(store_url, namespace=namespace + "-x", lease=30, retention=3600)
    _dangling(store_url, next_door.namespace, 1)  # past it too, but not this namespace's
    for key in ("old-1", "old-2"):
        brief.claim(key, lease=30).commit(key)  # type: ignore[union-attr]
    noticed = brief.claim("noticed", lease=30, watch=Watch("task", {"url": "u"}))
    noticed.commit("n")  # type: ignore[union-attr]
    kept.claim("live")
    kept.claim("recent").commit("r")  # type: ignore[union-attr]
    time.sleep(0.3)  # the brief ones are past retention on the store's clock
    yield {"dead": dead, "ledger": kept, "next_door": next_door}
    for ledger in (brief, kept, next_door):
        ledger.close()


def _json(result: Any) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


@pytest.mark.real_clock(STORE_CLOCK)
def test_gc_deletes_what_is_past_retention_in_batches_and_keeps_the_rest(
    store_url: str, namespace: str, seeded: dict[str, Any]
) -> None:
    ledger: Ledger = seeded["ledger"]
    sample = seeded["dead"][:: MANY // 20]
    gc = ("gc", *opts(store_url, namespace), "--dangling-after", "0")

    # Redis expires a finished record at its retain_until by itself: "old-*" may be gone
    # before gc looks; a dangling job has no expiry, gc deletes it.
    expiring = store_url.startswith("redis")
    expected = range(MANY, MANY + 3) if expiring else [MANY + 2]
    dry = _json(run(*gc, "--dry-run", "-o", "json"))
    assert dry["purged"] in expected and (dry["kept_notices"], dry["dry_run"]) == (1, True)
    left = sample if expiring else [*sample, "old-1", "old-2"]
    assert all(ledger.status(key) is not None for key in left), "a dry run deleted"

    done = _json(run(*gc, "--batch", "1000", "--pause", "0.001", "-o", "json"))
    assert done["purged"] in expected and (done["kept_notices"], done["dry_run"]) == (1, False)
    assert done["batches"] >= -(-done["purged"] // 1000)  # never more than --batch per call
    assert all(ledger.status(key) is None for key in [*sample, "old-1", "old-2"])
    for key in ("live", "recent", "noticed"):
        assert ledger.status(key) is not None, f"gc deleted {key}"
    assert seeded["next_door"].status("dead-00000") is not None  # another namespace: untouched

    again = run(*gc)  # text, not a terminal: totals, no progress bar
    assert again.returncode == 0, again.stderr
    assert re.search(f"{namespace}: deleted 0 records past retention in \\d+ batch", again.stdout)
    assert "kept 1 past retention: a completion notice is still to deliver" in again.stdout


def test_gc_keeps_a_dangling_job_until_dangling_after(store_url: str, namespace: str) -> None:
    dead = _dangling(store_url, namespace, 3)
    found = _json(run("gc", *opts(store_url, namespace), "-o", "json"))  # default: 7 days
    assert found["purged"] == 0 and found["batches"] >= 1
    found = _json(run("gc", *opts(store_url, namespace), "--dangling-after", "1h", "-o", "json"))
    assert found["purged"] == 0
    with Ledger(store_url, namespace=namespace) as ledger:
        assert all(ledger.status(key) is not None for key in dead)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("--batch", "0"), 2, "'--batch': 0 is not in the range 1<=x<=10000"),
        (("--batch", "10001"), 2, "'--batch'"),
        (("--batch", "many"), 2, "'--batch': 'many' is not a valid integer"),
        (("--dangling-after", "soon"), 2, "'soon' is not a duration"),
        (("--dangling-after", "-1"), 2, "is not a duration"),
        (("--pause", "a while"), 2, "'a while' is not a duration"),
    ],
)
def test_gc_refuses_bad_options_and_deletes_nothing(
    sqlite_url: str, namespace: str, args: tuple[str, ...], code: int, message: str
) -> None:
    dead = _dangling(sqlite_url, namespace, 2)
    result = run("gc", *opts(sqlite_url, namespace), *args)
    assert result.returncode == code and message in result.stderr, result.stderr
    with Ledger(sqlite_url, namespace=namespace) as ledger:
        assert all(ledger.status(key) is not None for key in dead)


def test_gc_says_what_is_wrong_with_the_store(tmp_path: Path) -> None:
    malformed = run("gc", "--store", "nope:::", "-n", "ns")
    assert malformed.returncode == 2 and "has no scheme" in malformed.stderr
    missing = run("gc", "--store", f"sqlite:///{tmp_path}/absent.db", "-n", "ns")
    assert missing.returncode == 3 and "nothing was created" in missing.stderr
    assert not (tmp_path / "absent.db").exists()
    down = run("gc", "--store", "postgresql+psycopg://postgres@127.0.0.1:1/x", "-n", "ns")
    assert down.returncode == 4 and "unavailable" in down.stderr
    as_json = run("gc", "--store", "redis://127.0.0.1:1/0", "-n", "ns", "-o", "json")
    assert as_json.returncode == 4
    assert json.loads(as_json.stderr)["error"]["exit_code"] == 4
