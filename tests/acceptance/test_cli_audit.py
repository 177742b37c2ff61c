"""``rill-executor audit``, the installed command in a subprocess, on SQLite, PostgreSQL and
Redis: clean on a healthy namespace; each invariant reported when a record is edited
behind the library's back, as a bug or a hand edit in the database would."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from collections.abc import Iterator
from typing import Any, ClassVar, Protocol
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from sqlalchemy import create_engine, text

from rill_executor import Ledger
from rill_executor._keys import job_id
from rill_executor.store import Watch

from .cli import EXE, opts, run
from .test_cli_operations import claimed, expire, ledger, namespace

__all__ = ["ledger", "namespace"]  # fixtures, shared


class Raw(Protocol):
    """One job's record, read and written without the library."""

    def attempts(self, job: str) -> list[dict[str, Any]]: ...
    def set_attempt(self, job: str, fence: int, **fields: Any) -> None: ...
    def add_attempt(self, job: str, entry: dict[str, Any]) -> None: ...
    def set_fence(self, job: str, fence: int) -> None: ...
    def notices(self, job: str) -> list[dict[str, Any]]: ...
    def set_notices(self, job: str, notices: list[dict[str, Any]]) -> None: ...


def _loaded(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


class SqlRaw:
    def __init__(self, url: str) -> None:
        self.engine = create_engine(url)
        self.json = "CAST(:v AS jsonb)" if url.startswith("postgresql") else ":v"

    def _get(self, job: str, column: str) -> Any:
        with self.engine.connect() as conn:
            row = conn.execute(
                text(f"SELECT {column} FROM rill_jobs WHERE job_id = :id"), {"id": job}
            ).one()
        return _loaded(row[0])

    def _set(self, job: str, column: str, value: Any, as_json: bool = True) -> None:
        param = self.json if as_json else ":v"
        with self.engine.begin() as conn:
            conn.execute(
                text(f"UPDATE rill_jobs SET {column} = {param} WHERE job_id = :id"),
                {"id": job, "v": json.dumps(value) if as_json else value},
            )

    def attempts(self, job: str) -> list[dict[str, Any]]:
        return list(self._get(job, "attempts"))

    def set_attempt(self, job: str, fence: int, **fields: Any) -> None:
        entries = [e | fields if e["fence"] == fence else e for e in self.attempts(job)]
        self._set(job, "attempts", entries)

    def add_attempt(self, job: str, entry: dict[str, Any]) -> None:
        self._set(job, "attempts", [*self.attempts(job), entry])

    def set_fence(self, job: str, fence: int) -> None:
        self._set(job, "fence", fence, as_json=False)

    def notices(self, job: str) -> list[dict[str, Any]]:
        return list(self._get(job, "notices"))

    def set_notices(self, job: str, notices: list[dict[str, Any]]) -> None:
        self._set(job, "notices", notices)


class RedisRaw:
    """The job hash and its history hash (``<fence>:<part>`` fields), see the adapter's
    ``_keys``."""

    _PARTS: ClassVar[dict[str, str]] = {
        "attempt_id": "id",
        "started_at": "start",
        "ended_at": "end",
        "outcome": "outcome",
    }

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        url = urlunsplit(parts._replace(query=""))
        self.client = redis.Redis.from_url(url, decode_responses=True)

    def attempts(self, job: str) -> list[dict[str, Any]]:
        fields: dict[str, str] = self.client.hgetall(f"rill:{{{job}}}:attempts")  # type: ignore[assignment]
        fences = sorted({int(k.split(":")[0]) for k in fields if ":" in k})
        return [{"fence": f, "outcome": fields[f"{f}:outcome"]} for f in fences]

    def set_attempt(self, job: str, fence: int, **fields: Any) -> None:
        for name, value in fields.items():
            self.client.hset(f"rill:{{{job}}}:attempts", f"{fence}:{self._PARTS[name]}", str(value))

    def add_attempt(self, job: str, entry: dict[str, Any]) -> None:
        rest = {k: v for k, v in entry.items() if k in self._PARTS}
        self.set_attempt(job, entry["fence"], **rest)

    def set_fence(self, job: str, fence: int) -> None:
        self.client.hset(f"rill:{{{job}}}:job", "fence", str(fence))

    def notices(self, job: str) -> list[dict[str, Any]]:
        return list(json.loads(self.client.hget(f"rill:{{{job}}}:job", "notices") or "[]"))

    def set_notices(self, job: str, notices: list[dict[str, Any]]) -> None:
        self.client.hset(f"rill:{{{job}}}:job", "notices", json.dumps(notices))


@pytest.fixture
def raw(store_url: str) -> Iterator[Raw]:
    if store_url.startswith("redis"):
        found = RedisRaw(store_url)
        yield found
        found.client.close()
    else:
        sql = SqlRaw(store_url)
        yield sql
        sql.engine.dispose()


def audit(store_url: str, namespace: str, *extra: str) -> tuple[int, dict[str, Any]]:
    done = run("audit", *opts(store_url, namespace), "-o", "json", *extra)
    return done.returncode, json.loads(done.stdout)


def healthy(ledger: Ledger) -> None:
    """A namespace after a drill: a takeover, a redo by hand, a dangling job, notices."""
    claimed(ledger.claim("done")).commit("r")
    ledger.resolve("done", "redo", reason="re-encode", actor="ops")
    claimed(ledger.claim("done")).commit("r2")
    expire(ledger, "taken")
    claimed(ledger.claim("taken")).commit("r")
    expire(ledger, "dangling")
    claimed(ledger.claim("watched", watch=Watch("task", {"url": "http://e/"}))).commit("x")


def test_a_healthy_namespace_audits_clean_and_counts_the_recovery(
    store_url: str, namespace: str, ledger: Ledger
) -> None:
    healthy(ledger)
    code, report = audit(store_url, namespace)
    assert (code, report["ok"], report["broken"]) == (0, True, [])
    assert report["jobs"] == 4 and report["states"] == {"processing": 1, "succeeded": 3}
    assert (report["dangling"], report["takeovers"], report["resolutions"]) == (["dangling"], 1, 1)
    assert (report["attempts"], report["max_attempts"], report["notices_pending"]) == (6, 2, 1)
    text_run = run("audit", *opts(store_url, namespace))
    assert text_run.returncode == 0 and "every invariant holds" in text_run.stdout


def test_each_broken_invariant_is_reported_and_exits_1(
    store_url: str, namespace: str, ledger: Ledger, raw: Raw
) -> None:
    healthy(ledger)
    for key in ("replaced", "fence", "owner"):
        claimed(ledger.claim(key)).commit("r")
    for key in ("notice", "twice"):
        claimed(ledger.claim(key, watch=Watch("task", {"url": "http://e/"}))).commit("r")
    assert audit(store_url, namespace)[0] == 0
    jid = {key: job_id(namespace, key) for key in ("replaced", "fence", "owner", "notice", "twice")}
    now = int(time.time() * 1_000_000)
    # A second result committed under a new fence while the first was retained.
    raw.set_fence(jid["replaced"], 2)
    second = {"attempt_id": "forged", "started_at": now, "ended_at": now, "outcome": "succeeded"}
    raw.add_attempt(jid["replaced"], {"fence": 2, "error": None, **second})
    # The job's fence went backwards below an attempt's.
    raw.set_fence(jid["fence"], 0)
    # An attempt still running on a finished job.
    raw.set_attempt(jid["owner"], 1, outcome="running")
    # A notice reporting an outcome that did not win its fence.
    raw.set_notices(jid["notice"], [n | {"state": "failed"} for n in raw.notices(jid["notice"])])
    # One outcome delivered twice to the same watch.
    [sent] = [n | {"status": "delivered"} for n in raw.notices(jid["twice"])]
    raw.set_notices(jid["twice"], [sent, sent | {"id": sent["id"] + "-again"}])

    code, report = audit(store_url, namespace)
    found = {(f["key"], f["invariant"]) for f in report["broken"]}
    assert (code, report["ok"]) == (1, False)
    assert found == {
        ("replaced", "one_committed_result"),
        ("fence", "fences_increase"),
        ("owner", "one_owner"),
        ("notice", "notices_match"),
        ("twice", "delivered_once"),
    }
    text_run = run("audit", *opts(store_url, namespace))
    assert text_run.returncode == 1
    assert "broken invariant" in text_run.stderr and "delivered_once" in text_run.stdout


def _on_a_terminal(*args: str) -> tuple[int, str, str]:
    """The command with its stderr on a terminal (a pseudo-terminal), stdout on a pipe:
    (exit code, stdout, what the terminal was shown)."""
    primary, secondary = os.openpty()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RILL_")}
    done = subprocess.run(
        [EXE, *args],
        check=False,
        stdout=subprocess.PIPE,
        stderr=secondary,
        text=True,
        timeout=120,
        env=clean | {"TERM": "xterm", "COLUMNS": "100"},
    )
    os.close(secondary)
    shown = b""
    while select.select([primary], [], [], 0.1)[0]:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the terminal closed: everything was read
            break
        if not chunk:
            break
        shown += chunk
    os.close(primary)
    return done.returncode, done.stdout, shown.decode(errors="replace")


def test_a_terminal_is_shown_the_jobs_audited_and_json_is_left_alone(
    store_url: str, namespace: str, ledger: Ledger
) -> None:
    healthy(ledger)
    code, out, shown = _on_a_terminal("audit", *opts(store_url, namespace), "--page", "2")
    assert code == 0 and "every invariant holds" in out
    assert "4 jobs audited" in shown and "jobs audited" not in out
    code, out, shown = _on_a_terminal("audit", *opts(store_url, namespace), "-o", "json")
    assert code == 0 and json.loads(out)["jobs"] == 4 and shown == ""
    piped = run("audit", *opts(store_url, namespace))
    assert "jobs audited" not in piped.stdout + piped.stderr  # not a terminal: no progress


def test_audit_of_an_unknown_store_or_namespace_says_so(store_url: str, namespace: str) -> None:
    empty = run("audit", "--store", store_url, "--namespace", namespace)
    assert empty.returncode == 3 and "has no jobs" in empty.stderr  # a typo is not healthy
    missing = run("audit", "--store", "sqlite:///nowhere/jobs.db", "--namespace", namespace)
    assert missing.returncode == 3 and "no SQLite database" in missing.stderr
    bad = run("audit", "--store", "nosuch://x", "--namespace", namespace)
    assert bad.returncode == 2 and "nosuch" in bad.stderr


def test_a_notice_no_deliverer_may_send_is_shown_with_why(
    store_url: str, namespace: str, ledger: Ledger
) -> None:
    """Invariant 20: a notice every deliverer gave back unsent is counted and listed by
    audit, flagged by jobs, and its reason shown by status."""
    target = {"url": "http://rill-flow-a:8080/flow/trigger.json?ts=1"}
    claimed(ledger.claim("k", watch=Watch("E#t", target))).commit("done")
    (notice,) = ledger.lease_notices(owner="b-1", lease=30)
    why = "not sent by b-1: not its engine"
    assert ledger.settle_notice(
        notice, "pending", "passed_over", detail=why, retry_in=60, tried=False
    )
    code, report = audit(store_url, namespace)
    assert (code, report["notices_pending"], report["notices_unsent"]) == (0, 1, 1)
    assert report["unsent"] == [f"k: {why}"]
    shown = run("audit", *opts(store_url, namespace))
    assert "notices no deliverer may send" in shown.stdout and f"k: {why}" in shown.stdout
    listed = run("jobs", *opts(store_url, namespace), "-o", "json")
    assert [j["unsent_notices"] for j in json.loads(listed.stdout)["jobs"]] == [1]
    status = run("status", "k", *opts(store_url, namespace), "-o", "json")
    (noticed,) = json.loads(status.stdout)["notices"]
    assert (noticed["attempts"], noticed["outcome"], noticed["detail"]) == (0, "passed_over", why)
