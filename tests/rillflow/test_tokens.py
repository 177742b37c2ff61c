"""Completion tokens: a handler hands its work to an external worker, which completes it
through ``POST /rill/complete`` (in-process servers, the engine simulator, a memory store).

The test plays the external worker: the handler leaves its token where the test finds it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel

from rill_executor import (
    AsyncLedger,
    ConfigError,
    HandedOff,
    JobState,
    JobStatus,
    current_async_claim,
)
from rill_executor.rillflow import CompletionTokens, InvalidToken, RillFlowExecutor, status_router
from rill_executor.store import AsyncMemoryStore, MemoryStore
from rill_executor.testing import VirtualClock
from rill_executor.testing.rillflow import (
    EngineSimulator,
    Pattern,
    Retry,
    Task,
    TaskStatus,
    serve_app,
)

SECRET = "render-farm-secret-0123456789abcdef"
OPERATOR = "operator-token-0123456789"


class Frame(BaseModel):
    scene: str
    frame: int
    ttl: float = 3600.0  # the token's life
    lease: float | None = None  # the lease hand_off asks for (default: the ttl)
    then: str = "hand_off"  # what a run after the first does: "hand_off" or "render"
    queue_down: bool = False  # the async handler fails after hand_off (the token is not queued)
    busy: float = 0.0  # seconds the def handler works on after hand_off (on the test's clock)


class Rendered(BaseModel):
    uri: str


class Service:
    def __init__(self, clock: VirtualClock | None = None) -> None:
        self.runs: Counter[str] = Counter()
        self.tokens: dict[str, str] = {}  # key -> the last token handed off
        self.leases: dict[str, datetime] = {}  # key -> the lease a def handler saw after it
        self.clock = clock
        if clock is None:
            self.ledger = AsyncLedger("memory://", namespace="render", lease=5)
        else:  # the ledger and its store on the test's clock
            store = AsyncMemoryStore(MemoryStore(clock=clock))
            self.ledger = AsyncLedger(store, namespace="render", lease=5, clock=clock)
        self.executor = RillFlowExecutor(self.ledger, token_secret=SECRET, engines=["127.0.0.1"])
        self.app = FastAPI(lifespan=self.executor.lifespan)

        def render(job: Frame) -> Rendered:
            key = f"{job.scene}:{job.frame}"
            self.runs[key] += 1
            if self.runs[key] > 1 and job.then == "render":
                return Rendered(uri=f"s3://frames/{key}/here")
            lease = None if job.lease is None else timedelta(seconds=job.lease)
            token = self.executor.hand_off(timedelta(seconds=job.ttl), lease=lease)
            self.leases[key] = current_async_claim().lease_expires_at
            self.tokens[key] = token
            if job.busy:
                assert self.clock is not None
                self.clock.advance(job.busy)
            raise HandedOff()

        async def render_async(job: Frame) -> Rendered:
            key = f"{job.scene}:{job.frame}"
            self.runs[key] += 1
            self.tokens[key] = self.executor.hand_off(timedelta(seconds=job.ttl))
            if job.queue_down:
                raise RuntimeError("the render farm's queue is down: the token was not queued")
            raise HandedOff()

        key = lambda job: f"{job.scene}:{job.frame}"  # noqa: E731
        self.executor.task("/render", key=key, name="render")(render)
        self.executor.task("/render-async", key=key, name="render_async")(render_async)
        self.app.include_router(self.executor.router)
        self.app.include_router(status_router([self.ledger], tokens={OPERATOR: ["render"]}))


@pytest.fixture
def service() -> Service:
    return Service()


@pytest.fixture
def running(service: Service) -> Iterator[str]:
    with serve_app(service.app, lifespan="on") as url:
        yield url


@pytest.fixture
def engine() -> Iterator[EngineSimulator]:
    with EngineSimulator() as engine:
        yield engine


def _submit(
    engine: EngineSimulator,
    url: str,
    *,
    path: str = "/render",
    retry: Retry | None = None,
    timeout: float | None = None,
    **job: Any,
) -> str:
    return engine.submit(
        Task(
            "render",
            f"{url}{path}",
            pattern=Pattern.TASK_ASYNC,
            input={"scene": "S", "frame": 1, **job},
            retry=retry or Retry(),
            timeout_in_seconds=timeout,
        )
    )


def _token(service: Service, engine: EngineSimulator, key: str = "S:1") -> str:
    engine.wait_until(lambda: key in service.tokens)
    return service.tokens[key]


def _complete(url: str, token: str, body: dict[str, Any], path: str = "complete") -> httpx.Response:
    return httpx.post(
        f"{url}/rill/{path}", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=5
    )


def _status(url: str, handler: str = "render") -> JobStatus:
    answer = httpx.get(
        f"{url}/rill/jobs/render/S:1?handler={handler}",
        headers={"Authorization": f"Bearer {OPERATOR}"},
        timeout=5,
    )
    assert answer.status_code == 200, answer.text
    return JobStatus.model_validate(answer.json())


@pytest.mark.parametrize("path", ["/render", "/render-async"])
def test_an_external_worker_completes_with_its_token(
    service: Service, running: str, engine: EngineSimulator, path: str
) -> None:
    execution = _submit(engine, running, path=path)
    token = _token(service, engine)
    engine.wait_until(lambda: _status(running, path.strip("/").replace("-", "_")).owner is not None)
    assert engine.task(execution, "render").status is TaskStatus.RUNNING  # no callback yet
    done = {"result": {"uri": "s3://frames/S:1/farm"}}
    answer = _complete(running, token, done)
    assert answer.status_code == 200 and answer.json()["state"] == "committed", answer.text
    view = engine.wait_for(execution, "render")
    assert view.status is TaskStatus.SUCCEED and view.output == done["result"]
    assert _complete(running, token, done).status_code == 200  # the same completion again
    status = _status(running, path.strip("/").replace("-", "_"))
    assert status.state is JobState.SUCCEEDED and len(status.notices) == 1
    (callback,) = engine.callbacks(execution, "render")
    assert callback.status_code == 200
    assert service.runs == Counter({"S:1": 1})
    if path == "/render":  # a def handler: the lease was extended before hand_off returned
        expires = CompletionTokens(SECRET).verify(token).expires_at
        assert service.leases["S:1"] > expires - timedelta(minutes=1)


def test_a_handler_that_fails_after_hand_off_leaves_nothing_behind(
    service: Service, running: str, engine: EngineSimulator
) -> None:
    """The lease a hand-off asked for is kept until the handler raises ``HandedOff``; one
    that fails instead must not leave it kept for the life of the process (one entry per
    attempt, growing for good)."""
    handoffs = service.executor._handoffs
    for frame in range(3):
        execution = _submit(engine, running, path="/render-async", frame=frame, queue_down=True)
        assert engine.wait_for(execution, "render").status is TaskStatus.FAILED
    engine.wait_until(lambda: not service.executor._running)  # every handler's run is over
    assert handoffs._asked == {}


def _forged(token: str) -> str:
    """The token with one byte of its payload changed (the fence), signature kept."""
    head, _, tail = token.partition(".")
    payload = base64.urlsafe_b64decode(head + "=" * (-len(head) % 4))
    changed = payload.replace(b'"f":1', b'"f":2')
    assert changed != payload and len(changed) == len(payload)
    return base64.urlsafe_b64encode(changed).rstrip(b"=").decode() + "." + tail


def _other_secret(token: str) -> str:
    head, _, _ = token.partition(".")
    payload = base64.urlsafe_b64decode(head + "=" * (-len(head) % 4))
    signature = hmac.digest(b"another-secret-0123456789abcdefghij", payload, hashlib.sha256)
    return head + "." + base64.urlsafe_b64encode(signature).rstrip(b"=").decode()


def _refusals(status: JobStatus) -> list[tuple[str | None, int | None, str | None, str]]:
    """The refused tokens on the job's record: (attempt, fence, reason, what was tried)."""
    return [
        (e.attempt_id, e.fence, e.reason, (e.detail or "").split(":")[0])
        for e in status.events
        if e.kind == "token_refused"
    ]


@pytest.mark.parametrize(
    ("spoil", "reason"),
    [
        (_forged, "forged"),
        (_other_secret, "forged"),
        (lambda t: t[:20], "malformed"),
    ],
)
def test_a_tampered_or_foreign_token_is_refused_and_commits_nothing(
    service: Service,
    running: str,
    engine: EngineSimulator,
    spoil: Any,
    reason: str,
) -> None:
    """An unverified token writes nothing, not even its refusal: what it claims could be
    anything (it is counted and logged instead)."""
    execution = _submit(engine, running)
    token = spoil(_token(service, engine))
    answer = _complete(running, token, {"result": {"uri": "s3://frames/evil"}})
    assert answer.status_code == 401 and answer.json()["reason"] == reason, answer.text
    heartbeat = _complete(running, token, {"lease": 60}, path="heartbeat")
    assert heartbeat.status_code == 401, heartbeat.text
    status = _status(running)
    assert status.state is JobState.PROCESSING
    assert engine.task(execution, "render").status is TaskStatus.RUNNING
    assert engine.callbacks(execution, "render") == []
    assert _refusals(status) == []
    assert service.executor._handoffs.forged == (2 if reason == "forged" else 0)


def test_an_expired_token_is_refused_and_commits_nothing(engine: EngineSimulator) -> None:
    # The token's expiry, the ledger and its store on one virtual clock: the token expires
    # when the test moves the clock past its minute, while the hand-off's hour-long lease
    # holds, without a wait.
    clock = VirtualClock()
    service = Service(clock)
    with serve_app(service.app, lifespan="on") as running:
        _expired_token_refused(service, running, engine, clock)


def _expired_token_refused(
    service: Service, running: str, engine: EngineSimulator, clock: VirtualClock
) -> None:
    _submit(engine, running, ttl=60, lease=3600)
    token = _token(service, engine)
    engine.wait_until(lambda: _status(running).owner is not None)
    clock.advance(59)
    beat = _complete(running, token, {"lease": 3600}, path="heartbeat")
    assert beat.status_code == 200, beat.text  # a second left: still good
    clock.advance(1)
    answer = _complete(running, token, {"result": {"uri": "s3://frames/late"}})
    assert answer.status_code == 401 and answer.json()["reason"] == "expired", answer.text
    with pytest.raises(InvalidToken) as refused:
        CompletionTokens(SECRET, clock=clock).verify(token)
    assert refused.value.reason == "expired"
    status = _status(running)
    assert status.state is JobState.PROCESSING and status.result is None
    (attempt,) = status.attempts
    assert _refusals(status) == [(attempt.attempt_id, attempt.fence, "expired", "complete")]
    assert attempt.events == status.events


def test_a_hand_off_keeps_the_lease_it_asked_for_on_the_ledgers_clock(
    engine: EngineSimulator,
) -> None:
    """The handler hands off with a 60-s lease, then works on for 50 s of the ledger's
    clock before it raises ``HandedOff``: the lease extended then ends where the hand-off
    asked, 60 s after it, not 60 s after the handler's end."""
    clock = VirtualClock()
    service = Service(clock)
    with serve_app(service.app, lifespan="on") as running:
        _submit(engine, running, lease=60, busy=50)
        _token(service, engine)
        engine.wait_until(lambda: not service.executor._running)  # handed off, extended
        now = datetime.fromtimestamp(clock.time_ns() / 1e9, UTC)  # 50 s after the hand-off
        assert _owner_lease(running) == service.leases["S:1"] == now + timedelta(seconds=10)


def test_forged_tokens_are_counted_in_the_log_once_a_minute_of_the_ledgers_clock(
    engine: EngineSimulator, caplog: pytest.LogCaptureFixture
) -> None:
    clock = VirtualClock()
    service = Service(clock)
    caplog.set_level(logging.WARNING, logger="rill_executor.rillflow")
    with serve_app(service.app, lifespan="on") as running:
        _submit(engine, running)
        forged = _forged(_token(service, engine))
        for advance in (0, 59, 1, 30):
            clock.advance(advance)
            answer = _complete(running, forged, {"result": {"uri": "s3://frames/evil"}})
            assert answer.status_code == 401, answer.text
    counted = [r.getMessage() for r in caplog.records if "signature not verifying" in r.message]
    assert [line.rsplit(": ", 1)[1] for line in counted] == ["1 so far", "3 so far"]


def test_a_superseded_token_is_refused_and_the_new_attempt_stands() -> None:
    # The first run hands off with a short lease and no heartbeat; the engine's timeout
    # dispatches again, the new attempt takes over the expired lease and renders itself.
    # The engine, the ledger and its store share one virtual clock: the timeout's poll and
    # the lease running out cost no waiting.
    clock = VirtualClock()
    service = Service(clock)
    with serve_app(service.app, lifespan="on") as running, EngineSimulator(clock=clock) as engine:
        _superseded(service, running, engine, clock)


def _superseded(
    service: Service, running: str, engine: EngineSimulator, clock: VirtualClock
) -> None:
    retry = Retry(max_retry_times=5, interval_in_seconds=0)  # at once, after the timeout
    execution = _submit(engine, running, retry=retry, timeout=1, lease=2, then="render")
    stale = _token(service, engine)
    engine.wait_idle()
    assert engine.task(execution, "render").status is TaskStatus.RUNNING
    # The timeout, due at 1 s, fires at the engine's poll of 3 s, past the 2 s lease; the
    # advance ends at that instant, so the retry's run finds the clock there.
    clock.advance(3)
    view = engine.wait_for(execution, "render", timeout=20)
    assert view.status is TaskStatus.SUCCEED and view.output == {"uri": "s3://frames/S:1/here"}
    answer = _complete(running, stale, {"result": {"uri": "s3://frames/S:1/farm"}})
    assert answer.status_code == 409 and answer.json()["reason"] == "superseded", answer.text
    beat = _complete(running, stale, {"lease": 60}, path="heartbeat")
    assert beat.status_code == 409 and beat.json()["reason"] == "superseded", beat.text
    status = _status(running)
    assert status.result == {"uri": "s3://frames/S:1/here"}
    assert service.runs == Counter({"S:1": 2})
    first, second = status.attempts
    refused = [
        (first.attempt_id, first.fence, "superseded", use) for use in ("complete", "heartbeat")
    ]
    assert _refusals(status) == refused
    assert len(first.events) == 2 and second.events == ()


def test_an_invalid_result_is_a_422_and_the_attempt_fails(
    service: Service, running: str, engine: EngineSimulator
) -> None:
    execution = _submit(engine, running)
    token = _token(service, engine)
    answer = _complete(running, token, {"result": {"url": "not the right field"}})
    assert answer.status_code == 422 and "uri" in answer.json()["detail"], answer.text
    assert _status(running).state is JobState.FAILED
    assert engine.wait_for(execution, "render").status is TaskStatus.FAILED


def test_a_worker_reports_a_failure(
    service: Service, running: str, engine: EngineSimulator
) -> None:
    execution = _submit(engine, running)
    token = _token(service, engine)
    answer = _complete(running, token, {"error": "the farm lost the frame", "retryable": False})
    assert answer.status_code == 200 and answer.json()["state"] == "failed", answer.text
    assert engine.wait_for(execution, "render").status is TaskStatus.FAILED
    (callback,) = engine.callbacks(execution, "render")
    assert "the farm lost the frame" in callback.body_text


def test_heartbeat_extends_the_lease(
    service: Service, running: str, engine: EngineSimulator
) -> None:
    _submit(engine, running, lease=30)
    token = _token(service, engine)
    engine.wait_until(lambda: _lease_left(running) > timedelta(seconds=20))
    before = _owner_lease(running)
    answer = _complete(running, token, {"lease": 600}, path="heartbeat")
    assert answer.status_code == 200, answer.text
    after = _owner_lease(running)
    assert after > before + timedelta(seconds=500)
    assert datetime.fromisoformat(answer.json()["lease_expires_at"]) == after


def _owner_lease(url: str) -> datetime:
    owner = _status(url).owner
    assert owner is not None
    return owner.lease_expires_at


def _lease_left(url: str) -> timedelta:
    owner = _status(url).owner
    return owner.lease_left if owner is not None else timedelta(0)


def test_a_sync_dispatch_cannot_hand_off(
    service: Service, running: str, engine: EngineSimulator
) -> None:
    execution = engine.submit(
        Task(
            "render",
            f"{running}/render",
            pattern=Pattern.TASK_SYNC,
            input={"scene": "S", "frame": 1},
        )
    )
    view = engine.wait_for(execution, "render")
    assert view.status is TaskStatus.FAILED
    assert service.tokens == {}


def test_tokens_need_a_long_secret_and_refuse_garbage() -> None:
    with pytest.raises(ConfigError, match="32 bytes"):
        CompletionTokens("short")
    with pytest.raises(InvalidToken) as caught:
        CompletionTokens(SECRET).verify("no-dot-here")
    assert caught.value.reason == "malformed"
