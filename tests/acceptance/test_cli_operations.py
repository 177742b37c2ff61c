"""The operations commands, run as the installed ``rill-executor`` in a subprocess against
SQLite, PostgreSQL and Redis: status, attempts, check-retention, deliver, and bad input."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rill_executor import Claim, JobStatus, Ledger
from rill_executor.store import Watch
from tests.clocks import STORE_CLOCK

from .cli import opts, run


@pytest.fixture
def namespace() -> str:
    return f"ops-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def ledger(store_url: str, namespace: str) -> Iterator[Ledger]:
    with Ledger(store_url, namespace=namespace, lease=timedelta(seconds=30)) as found:
        yield found


def claimed(outcome: object) -> Claim:
    assert isinstance(outcome, Claim), outcome
    return outcome


def expire(ledger: Ledger, key: str, **claim: Any) -> Claim:
    """A claim of ``key`` whose lease has run out on the store's clock."""
    owner = claimed(ledger.claim(key, lease=timedelta(milliseconds=200), **claim))
    while (
        (status := ledger.status(key)) and status.owner and status.owner.lease_left > timedelta(0)
    ):
        time.sleep(0.05)
    return owner


def stable(status: JobStatus | None) -> Any:
    """A status without what moves with the clock."""
    assert status is not None
    return status.model_dump(mode="json", exclude={"store_time", "owner"})


# -- status and attempts ---------------------------------------------------------------------


@pytest.mark.real_clock(STORE_CLOCK)
def test_status_shows_the_job_attempts_and_notices(
    ledger: Ledger, store_url: str, namespace: str
) -> None:
    key = "video-A:1:h264-v2"
    dispatch = {"execution_id": "ws:dag_c_1", "name": "seg1", "ts": 1}
    expire(ledger, key, origin=dispatch | {"ts": 0})
    winner = claimed(ledger.claim(key, origin=dispatch, watch=Watch("seg1", {"url": "http://e/"})))
    winner.commit({"uri": "s3://media/A/1.mp4"})

    done = run("status", key, *opts(store_url, namespace), "-o", "json")
    assert done.returncode == 0, done.stderr
    shown = JobStatus.model_validate_json(done.stdout)
    assert stable(shown) == stable(ledger.status(key))
    assert [a.outcome.value for a in shown.attempts] == ["expired", "succeeded"]
    assert shown.attempts[1].origin == dispatch
    assert [(n.watch, n.status) for n in shown.notices] == [("seg1", "pending")]

    text = run("status", key, *opts(store_url, namespace))
    assert text.returncode == 0, text.stderr
    for part in (key, "succeeded", "expired", winner.attempt_id, "s3://media/A/1.mp4", "seg1"):
        assert part in text.stdout
    assert "\x1b[" not in text.stdout  # no colour codes when stdout is not a terminal


@pytest.mark.real_clock(STORE_CLOCK)
def test_attempts_shows_what_each_attempt_answered_and_wrote(
    ledger: Ledger, store_url: str, namespace: str
) -> None:
    first = expire(ledger, "k", origin={"execution_id": "e", "name": "t", "ts": 1})
    second = claimed(ledger.claim("k", origin={"execution_id": "e", "name": "t", "ts": 2}))
    second.fail(ValueError("codec missing"), retryable=True)

    done = run("attempts", "k", *opts(store_url, namespace), "-o", "json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["state"] == "failed" and shown["fence"] == 2
    assert [(a["attempt_id"], a["fence"], a["outcome"]) for a in shown["attempts"]] == [
        (first.attempt_id, 1, "expired"),
        (second.attempt_id, 2, "failed"),
    ]
    assert [a["origin"]["ts"] for a in shown["attempts"]] == [1, 2]
    assert shown["attempts"][1]["error"]["message"] == "codec missing"

    text = run("attempts", "k", *opts(store_url, namespace))
    assert text.returncode == 0, text.stderr
    assert '"ts":2' in text.stdout and "ValueError: codec missing" in text.stdout


def test_attempts_shows_the_span_each_attempt_ran_in(
    ledger: Ledger, store_url: str, namespace: str
) -> None:
    span = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    claimed(ledger.claim("k", trace=span)).commit("done")
    done = run("attempts", "k", *opts(store_url, namespace), "-o", "json")
    assert done.returncode == 0, done.stderr
    assert [a["trace"] for a in json.loads(done.stdout)["attempts"]] == [span]
    text = run("attempts", "k", *opts(store_url, namespace))
    assert text.returncode == 0, text.stderr
    assert f"trace   {span}" in text.stdout


@pytest.mark.real_clock(STORE_CLOCK)
def test_a_processing_job_whose_lease_ran_out_is_shown_dangling(
    ledger: Ledger, store_url: str, namespace: str
) -> None:
    expire(ledger, "stuck")
    text = run("status", "stuck", *opts(store_url, namespace))
    assert text.returncode == 0, text.stderr
    assert "dangling" in text.stdout
    shown = json.loads(run("status", "stuck", *opts(store_url, namespace), "-o", "json").stdout)
    assert shown["state"] == "processing" and shown["owner"]["lease_left"].startswith("-")


def test_a_handlers_job_is_found_with_handler(
    ledger: Ledger, store_url: str, namespace: str
) -> None:
    @ledger.idempotent(key=lambda video: video, name="probe")
    def probe(video: str) -> str:
        return f"probed {video}"

    probe("video-A")
    plain = run("status", "video-A", *opts(store_url, namespace))
    assert plain.returncode == 3
    assert "pass --handler NAME" in plain.stderr
    scoped = run(
        "status", "video-A", "--handler", "probe", *opts(store_url, namespace), "-o", "json"
    )
    assert scoped.returncode == 0, scoped.stderr
    assert json.loads(scoped.stdout)["result"] == "probed video-A"


def test_the_store_and_namespace_come_from_the_environment(
    ledger: Ledger, store_url: str, namespace: str
) -> None:
    claimed(ledger.claim("k")).commit(1)
    done = run(
        "status", "k", "-o", "json", env={"RILL_STORE": store_url, "RILL_NAMESPACE": namespace}
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == 1


@pytest.mark.real_clock(STORE_CLOCK)
def test_jobs_lists_by_state_and_pages_with_the_cursor(
    ledger: Ledger, store_url: str, namespace: str
) -> None:
    for n in (1, 2, 3):
        claimed(ledger.claim(f"done-{n}", result_version="v1")).commit(n)
    claimed(ledger.claim("failed", result_version="v2")).fail("disk full", retryable=True)
    expire(ledger, "stuck")

    keys: list[str] = []
    cursor: list[str] = []
    for _ in range(10):
        done = run("jobs", *opts(store_url, namespace), "--limit", "2", "-o", "json", *cursor)
        assert done.returncode == 0, done.stderr
        page = json.loads(done.stdout)
        keys += [job["key"] for job in page["jobs"]]
        if page["cursor"] is None:
            break
        cursor = ["--cursor", page["cursor"]]
    assert set(keys) == {"done-1", "done-2", "done-3", "failed", "stuck"}

    def listed(*filters: str) -> set[str]:
        done = run("jobs", *opts(store_url, namespace), "--all", "--limit", "1", "-o", "json",
                   *filters)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return {job["key"] for job in json.loads(done.stdout)["jobs"]}

    assert listed("--dangling") == {"stuck"}
    assert listed("--failed") == {"failed"}
    assert listed("--state", "succeeded", "--state", "failed", "--result-version", "v2") == {
        "failed"
    }
    assert listed("--older-than", "1h") == set()
    text = run("jobs", *opts(store_url, namespace), "--dangling")
    assert text.returncode == 0 and "stuck" in text.stdout and "dangling" in text.stdout


# -- bad input: a clear message, a non-zero exit, nothing changed ----------------------------


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("status", "no-such-key"), 3, "no job 'no-such-key' in namespace"),
        (("attempts", "no-such-key"), 3, "no job 'no-such-key' in namespace"),
        (("status", "k", "--namespace", "no-such-namespace"), 3, "namespace 'no-such-namespace'"),
        (("status", "k", "--namespace", "bad namespace"), 2, "namespace 'bad namespace' is not"),
        (("jobs", "--namespace", "no-such-namespace"), 3, "namespace 'no-such-namespace' has no"),
        (("jobs", "--state", "stuck"), 2, "'stuck' is not one of"),
        (("jobs", "--older-than", "soon"), 2, "is not a duration"),
        (("status", "k", "--store", "nowhere.db"), 2, "has no scheme"),
        (("status", "k", "--store", "cassandra://h/x"), 2, "no store adapter for scheme"),
        (("deliver", "--store", "nowhere.db"), 2, "has no scheme"),
        (
            ("status", "k", "--store", "postgresql+psycopg://postgres@127.0.0.1:1/test"),
            4,
            "is unavailable",
        ),
        (("status", "k", "--store", "redis://127.0.0.1:1/0"), 4, "is not reachable"),
        (("deliver", "--store", "redis://127.0.0.1:1/0"), 4, "is not reachable"),
        (("status", "\x01"), 2, "control character"),
    ],
)
def test_bad_input_exits_non_zero_and_changes_nothing(
    ledger: Ledger, store_url: str, namespace: str, args: tuple[str, ...], code: int, message: str
) -> None:
    claimed(ledger.claim("k", watch=Watch("t", {"url": "http://127.0.0.1:1/cb"}))).commit("kept")
    before = stable(ledger.status("k"))
    store = () if "--store" in args else ("--store", store_url)
    space = () if "--namespace" in args else ("--namespace", namespace)
    done = run(*args, *store, *space)
    assert done.returncode == code, done
    assert done.stderr.startswith("error: ") and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert stable(ledger.status("k")) == before


def test_errors_are_json_with_o_json(store_url: str, namespace: str) -> None:
    done = run("status", "nothing", *opts(store_url, namespace), "-o", "json")
    assert done.returncode == 3 and done.stdout == ""
    error = json.loads(done.stderr)["error"]
    assert error["exit_code"] == 3 and "no job 'nothing'" in error["message"]


def test_a_missing_sqlite_file_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    for args in (("status", "k"), ("deliver",)):
        done = run(*args, "--store", f"sqlite:///{path}", "--namespace", "n")
        assert done.returncode == 3 and "no SQLite database at" in done.stderr
    assert not path.exists()


def test_missing_options_are_usage_errors() -> None:
    done = run("status", "k")
    assert done.returncode == 2 and "--store" in done.stderr


# -- check-retention -------------------------------------------------------------------------

POLICY = ("--max-retry-times", "3", "--interval-in-seconds", "10", "--multiplier", "2")


def test_check_retention_computes_the_window_and_passes_when_covered() -> None:
    # 4 attempts x 600 s + delays int(10 * 2**k) for k = 1..3 (20 + 40 + 80) + 300 s grace
    done = run("check-retention", *POLICY, "--task-timeout", "10m", "--grace", "5m",
               "--retention", "2840", "-o", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["retry_delays_seconds"] == [20, 40, 80]
    assert shown["window_seconds"] == 2840 and shown["covered"] is True
    text = run("check-retention", *POLICY, "--task-timeout", "10m", "--grace", "5m")
    assert text.returncode == 0 and "covered" in text.stdout and "2840s" in text.stdout


def test_check_retention_fails_and_says_what_to_set_when_short() -> None:
    done = run("check-retention", *POLICY, "--task-timeout", "10m", "--grace", "5m",
               "--retention", "2839s")  # fmt: skip
    assert done.returncode == 1
    assert "NOT covered" in done.stdout and "at least 2840s" in done.stdout


def test_check_retention_reads_the_retention_the_jobs_recorded(
    store_url: str, namespace: str
) -> None:
    with Ledger(store_url, namespace=namespace, retention=timedelta(hours=1)) as ledger:
        for n in range(3):
            claimed(ledger.claim(f"k{n}")).commit(n)
        claimed(ledger.claim("running"))
    where = opts(store_url, namespace)
    done = run("check-retention", *POLICY, "--task-timeout", "10m", *where, "-o", "json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["retention_seconds"] == 3600 and "3 finished jobs" in shown["retention_from"]
    short = run("check-retention", *POLICY, "--task-timeout", "20m", *where)  # 4 x 1200 s
    assert short.returncode == 1 and "at least 4940s" in short.stdout
    empty = run("check-retention", "--task-timeout", "1m", *opts(store_url, namespace + "x"))
    assert empty.returncode == 3 and "no finished job" in empty.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--task-timeout", "ten minutes"), "is not a duration"),
        (("--task-timeout", "10m", "--multiplier", "0"), "--multiplier"),
        (("--task-timeout", "10m", "--max-retry-times", "-1"), "--max-retry-times"),
        ((), "Missing option '--task-timeout'"),
        (
            (
                "--max-retry-times",
                "30",
                *POLICY[2:4],
                "--multiplier",
                "1e9",
                "--task-timeout",
                "1d",
            ),
            "no record can be kept",
        ),
    ],
)
def test_check_retention_refuses_bad_input(args: tuple[str, ...], message: str) -> None:
    done = run("check-retention", *args)
    assert done.returncode == 2 and message in done.stderr, done
    assert "Traceback" not in done.stderr


# -- deliver ---------------------------------------------------------------------------------


class Engine:
    """A callback receiver answering like the engine: ``status`` and ``body`` as set."""

    def __init__(self) -> None:
        self.received: list[tuple[str, Any]] = []
        self.status = 200
        self.body: dict[str, Any] = {"result": "ok"}
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                engine.received.append((self.path, json.loads(self.rfile.read(length))))
                answer = json.dumps(engine.body).encode()
                self.send_response(engine.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/flow/trigger.json"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def engine() -> Iterator[Engine]:
    found = Engine()
    yield found
    found.close()


def test_deliver_sends_due_notices_once_and_records_the_answer(
    ledger: Ledger, store_url: str, namespace: str, engine: Engine
) -> None:
    target = {"url": f"{engine.url}?execution_id=e1&task_name=seg1"}
    claimed(ledger.claim("k", watch=Watch("seg1", target))).commit({"uri": "s3://m/1.mp4"})

    done = run("deliver", *opts(store_url, namespace), "-o", "json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["delivered"] == 1 and shown["pending"] == 0
    assert [(d["key"], d["answer"]) for d in shown["deliveries"]] == [("k", "ok")]
    assert engine.received == [
        ("/flow/trigger.json?execution_id=e1&task_name=seg1", {"uri": "s3://m/1.mp4"})
    ]
    (notice,) = stable(ledger.status("k"))["notices"]
    assert notice["status"] == "delivered" and notice["outcome"] == "ok"

    again = run("deliver", *opts(store_url, namespace))
    assert again.returncode == 0 and "no notice is due" in again.stdout
    assert len(engine.received) == 1


def test_deliver_exits_1_while_the_engine_asks_to_retry_later(
    ledger: Ledger, store_url: str, namespace: str, engine: Engine
) -> None:
    engine.status, engine.body = 500, {"error_code": 30101, "error": "lock not obtained"}
    claimed(ledger.claim("k", watch=Watch("t", {"url": engine.url}))).commit("done")
    done = run("deliver", *opts(store_url, namespace))
    assert done.returncode == 1, done.stderr
    assert "retry_later" in done.stdout and "1 still pending" in done.stdout
    (notice,) = stable(ledger.status("k"))["notices"]
    assert notice["status"] == "pending" and notice["attempts"] == 1
