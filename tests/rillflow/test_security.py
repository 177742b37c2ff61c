"""The executor's boundary against a hostile network: callbacks only to the engines, bounded
bodies, one spelling per token, bounded leases and event logs, no 5xx on any input.

Requests go through httpx's ASGI transport (its peer is 127.0.0.1) to an app on the memory
store, or over real HTTP to an in-process or subprocess server where the wire matters.
"""

from __future__ import annotations

import asyncio
import re
import select
import socket
import string
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi import FastAPI, Request
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from rill_executor import AsyncClaim, AsyncLedger, ConfigError, HandedOff, JobStatus
from rill_executor._rules.notices import Watch
from rill_executor.rillflow import (
    CompletionTokens,
    Deliverer,
    Delivery,
    RillFlowExecutor,
    status_router,
)
from rill_executor.rillflow._engines import Engines
from rill_executor.rillflow._tokens import _unb64
from rill_executor.store import MAX_EVENTS
from rill_executor.testing.rillflow import serve_app

from ..adapters.faults.waits import ends_within
from .service import ExecutorService

SECRET = "render-farm-secret-0123456789abcdef"
OPERATOR = "operator-token-0123456789"
T = TypeVar("T")
ENGINE = "http://127.0.0.1:9/flow/trigger.json?execution_id=E1&task_name=T&ts=1"


class Frame(BaseModel):
    scene: str
    frame: int


class Service:
    """An executor on the memory store whose handler hands its work off (a token per key)."""

    def __init__(self, engines: Iterable[str] | None = ("127.0.0.1",)) -> None:
        self.ledger = AsyncLedger("memory://", namespace="render", lease=5)
        self.executor = RillFlowExecutor(self.ledger, token_secret=SECRET, engines=engines)
        self.tokens: dict[str, str] = {}
        self.app = FastAPI(lifespan=self.executor.lifespan)

        @self.executor.task("/render", key=lambda job: f"{job.scene}:{job.frame}", name="render")
        async def render(job: Frame) -> dict[str, Any]:
            self.tokens[f"{job.scene}:{job.frame}"] = self.executor.hand_off(3600)
            raise HandedOff()

        self.app.include_router(self.executor.router)
        self.app.include_router(status_router([self.ledger], tokens={OPERATOR: ["render"]}))

    def client(self, peer: str = "127.0.0.1") -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.app, client=(peer, 40000))
        return httpx.AsyncClient(transport=transport, base_url="http://executor")

    async def dispatch(
        self, http: httpx.AsyncClient, callback: str, frame: int = 1
    ) -> httpx.Response:
        return await http.post(
            "/render?execution_id=E1&name=render",
            json={"execution_id": "E1", "scene": "S", "frame": frame},
            headers={"X-Mode": "async", "X-Callback-Url": callback},
        )

    async def status(self, key: str = "S:1") -> JobStatus | None:
        return await self.ledger.status(key, handler="render")


@pytest.fixture
def service() -> Service:
    return Service()


def run(scenario: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(scenario())


# 1. Callbacks go only to the engines.


@pytest.mark.parametrize(
    "callback",
    [
        "not a url",
        "file:///etc/passwd",
        "gopher://127.0.0.1:70/x",
        "http://10.0.0.7:8080/internal/admin",  # not the dispatch's sender
        "http://user@127.0.0.1:9/flow/trigger.json",
        "http://127.0.0.1:99999/x",
    ],
)
def test_a_callback_url_outside_the_engines_is_refused_and_claims_nothing(callback: str) -> None:
    service = Service(engines=None)

    async def scenario() -> tuple[httpx.Response, JobStatus | None]:
        async with service.client() as http:
            answer = await service.dispatch(http, callback)
        return answer, await service.status()

    answer, status = run(scenario)
    assert answer.status_code == 400, answer.text
    assert "callback URL" in answer.json()["error_msg"]
    assert status is None


def test_without_engines_the_dispatch_sender_is_the_engine() -> None:
    service = Service(engines=None)

    async def scenario() -> httpx.Response:
        async with service.client(peer="10.0.0.5") as http:
            answer = await service.dispatch(http, "http://10.0.0.5:9/flow/trigger.json?ts=1")
        await service.executor.drain()
        return answer

    answer = run(scenario)
    assert answer.status_code == 200, answer.text
    assert answer.json()["state"] == "accepted"


@pytest.mark.parametrize(
    ("peer", "callback"),
    [
        ("127.0.0.1", "http://127.0.0.1:15000/quitquitquit"),  # a sidecar proxy's admin port
        ("127.0.0.2", "http://127.0.0.2:8080/flow/trigger.json"),
        ("::1", "http://[::1]:15000/quitquitquit"),
        ("::ffff:127.0.0.1", "http://[::ffff:127.0.0.1]:15000/quitquitquit"),
        ("169.254.169.254", "http://169.254.169.254/latest/meta-data/"),
        ("fe80::1", "http://[fe80::1]:8080/flow/trigger.json"),
        ("0.0.0.0", "http://0.0.0.0:15000/quitquitquit"),
        ("::", "http://[::]:15000/quitquitquit"),
    ],
)
def test_without_engines_a_local_callback_is_refused_and_claims_nothing(
    peer: str, callback: str
) -> None:
    """Behind a sidecar or mesh proxy the sender is the local host: a dispatch may not name
    one of its ports (or a link-local service) as its callback unless the engines say so."""
    service = Service(engines=None)

    async def scenario() -> tuple[httpx.Response, JobStatus | None]:
        async with service.client(peer=peer) as http:
            answer = await service.dispatch(http, callback)
        return answer, await service.status()

    answer, status = run(scenario)
    assert answer.status_code == 400, answer.text
    message = answer.json()["error_msg"]
    assert "loopback, link-local or unspecified" in message and "engines=[" in message
    assert status is None


def test_a_local_engine_named_in_engines_is_called_back() -> None:
    service = Service(engines=["127.0.0.1"])  # a local simulator, say

    async def scenario() -> httpx.Response:
        async with service.client() as http:
            answer = await service.dispatch(http, ENGINE)
        await service.executor.drain()
        return answer

    answer = run(scenario)
    assert answer.status_code == 200, answer.text
    assert answer.json()["state"] == "accepted"


def test_named_engines_are_the_only_callback_targets() -> None:
    service = Service(engines=["http://rill-flow:8080/flow", "engine-b.internal"])
    good = [
        "http://rill-flow:8080/flow/trigger.json?ts=1",
        "https://engine-b.internal/flow/trigger.json",
        "http://ENGINE-B.internal:8081/x",
    ]
    bad = [
        ENGINE,  # the sender itself, once engines are named
        "https://rill-flow:8080/flow/trigger.json",  # another scheme
        "http://rill-flow:8081/flow/trigger.json",  # another port
        "http://rill-flow:8080/flowers",  # outside the base path
        "http://rill-flow.evil:8080/flow/trigger.json",
    ]

    async def scenario() -> None:
        async with service.client() as http:
            for n, url in enumerate(good):
                answer = await service.dispatch(http, url, frame=n)
                assert answer.status_code == 200, (url, answer.text)
            for n, url in enumerate(bad, start=10):
                answer = await service.dispatch(http, url, frame=n)
                assert answer.status_code == 400, (url, answer.text)
                assert await service.status(f"S:{n}") is None
        await service.executor.drain()

    run(scenario)


@pytest.mark.parametrize("engines", ["http://rill-flow:8080", [], ["ftp://x"], ["a/b"], [3]])
def test_bad_engines_are_a_config_error(engines: Any) -> None:
    with pytest.raises(ConfigError):
        RillFlowExecutor(AsyncLedger("memory://", namespace="render"), engines=engines)


def test_the_deliverer_never_posts_outside_the_engines() -> None:
    """A notice stored with a URL outside the engines (before they were named, say) is
    not sent: it is left pending for an executor that serves its engine; one to an engine
    is sent."""
    posted: list[str] = []
    sink = FastAPI()

    @sink.post("/{path:path}")
    async def take(path: str, request: Request) -> dict[str, str]:
        posted.append(path)
        return {"result": "ok"}

    async def scenario(url: str) -> dict[str, Delivery]:
        ledger = AsyncLedger("memory://", namespace="render", lease=5)
        executor = RillFlowExecutor(ledger, engines=[f"{url}/flow"])
        for key, target in (("a", f"{url}/internal/admin"), ("b", f"{url}/flow/trigger.json")):
            claim = await ledger.claim(key, watch=Watch(f"E/{key}", {"url": target}))
            assert isinstance(claim, AsyncClaim)
            await claim.commit({"done": key})
        done = {d.key: d for d in await executor.deliverer.deliver()}
        await executor.deliverer.stop()
        return done

    with serve_app(sink) as url:
        done = asyncio.run(scenario(url))
    assert posted == ["flow/trigger.json"]
    assert done["a"].classification == "passed_over" and "not sent" in done["a"].detail


def test_a_deliverer_alone_sends_only_http_urls() -> None:
    async def scenario() -> Delivery:
        ledger = AsyncLedger("memory://", namespace="render", lease=5)
        claim = await ledger.claim("a", watch=Watch("E/a", {"url": "file:///etc/passwd"}))
        assert isinstance(claim, AsyncClaim)
        await claim.commit({"done": 1})
        deliverer = Deliverer(ledger)
        (done,) = await deliverer.deliver()
        await deliverer.stop()
        return done

    done = run(scenario)
    assert done.classification == "refused" and "not an http(s) URL" in done.detail


class RawEngine:
    """An engine on a raw socket that answers every callback with ``answer`` (bytes, pieces
    of it sent 0.1 s apart, or None to keep the socket open and answer nothing);
    ``streamed`` bytes of a body follow until the client goes. Counts the requests that
    reached it and the bytes it sent."""

    def __init__(self, answer: bytes | list[bytes] | None, streamed: int = 0) -> None:
        self.answer, self.streamed = answer, streamed
        self.requests, self.sent = 0, 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/flow"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self._listener.settimeout(0.1)
        held: list[socket.socket] = []
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            held.append(conn)
            conn.settimeout(5)
            if not conn.recv(65536):
                continue
            self.requests += 1
            if self.answer is None:
                continue  # black-holed: read, never answered, never closed
            pieces = self.answer if isinstance(self.answer, list) else [self.answer]
            try:
                for n, piece in enumerate(pieces):
                    if n:
                        time.sleep(0.1)
                    conn.sendall(piece)
                chunk = b" " * CHUNK
                while self.sent < self.streamed:
                    conn.sendall(chunk)
                    self.sent += CHUNK
            except OSError:  # the client went
                pass
        for conn in held:
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._listener.close()


def _deliver_one(engine: RawEngine, timeout: float = 5.0) -> Delivery:
    async def scenario() -> Delivery:
        ledger = AsyncLedger("memory://", namespace="render", lease=30)
        target = f"{engine.url}/trigger.json?execution_id=E1&task_name=T"
        claim = await ledger.claim("a", watch=Watch("E1/T", {"url": target}))
        assert isinstance(claim, AsyncClaim)
        await claim.commit({"done": 1})
        deliverer = Deliverer(ledger, timeout=timeout)
        deliverer.engines = Engines([engine.url])
        try:
            (done,) = await deliverer.deliver()
        finally:
            await deliverer.stop()
        return done

    ended, done = ends_within(60, lambda: run(scenario))
    assert ended, "the delivery did not end"
    assert isinstance(done, Delivery), done
    return done


def test_an_engine_redirect_is_not_followed() -> None:
    """An engine's redirect could point anywhere: not followed, the notice tried again later."""
    elsewhere = RawEngine(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    redirect = (
        f"HTTP/1.1 307 Temporary Redirect\r\nLocation: {elsewhere.url}/trigger.json\r\n"
        "Content-Length: 0\r\n\r\n"
    )
    engine = RawEngine(redirect.encode())
    try:
        done = _deliver_one(engine)
    finally:
        engine.close()
        elsewhere.close()
    assert engine.requests == 1 and elsewhere.requests == 0
    assert done.classification == "retry_later" and "HTTP 307" in done.detail


def test_an_answer_that_arrives_in_pieces_is_read_whole() -> None:
    """The engine's "repeated finish" answer, its body sent in two pieces: classified from
    the whole of it (a final duplicate), not from its first piece."""
    body = b'{"error_code": "30601", "error_msg": "repeated finish task T"}'
    head = f"HTTP/1.1 500 Internal Server Error\r\nContent-Length: {len(body)}\r\n\r\n"
    engine = RawEngine([head.encode() + body[:20], body[20:]])
    try:
        done = _deliver_one(engine)
    finally:
        engine.close()
    assert done.classification == "final_duplicate", done.detail


def test_an_engine_that_never_answers_is_given_up_on_at_the_timeout() -> None:
    engine = RawEngine(None)
    try:
        done = _deliver_one(engine, timeout=0.5)
    finally:
        engine.close()
    assert engine.requests == 1
    assert done.classification == "retry_later"
    assert "no answer" in done.detail and "0.5 s" in done.detail, done.detail


# 3. Bodies are read only up to their limit.

MB = 1024 * 1024
CHUNK = 64 * 1024


class Flood:
    """A chunked body that would be ``total`` bytes; counts what was taken from it."""

    def __init__(self, total: int = 200 * MB) -> None:
        self.total = total
        self.taken = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunk = b" " * CHUNK
        while self.taken < self.total:
            self.taken += CHUNK
            yield chunk


def _token_of(service: Service) -> str:
    async def scenario() -> str:
        async with service.client() as http:
            assert (await service.dispatch(http, ENGINE)).status_code == 200
        await service.executor.drain()
        return service.tokens["S:1"]

    return run(scenario)


@pytest.mark.parametrize("route", ["dispatch", "complete", "heartbeat", "unauthenticated"])
def test_a_chunked_body_is_cut_at_the_limit(service: Service, route: str) -> None:
    """A 200 MB chunked body is read only up to the route's limit (413); a request without a
    valid token is answered 401 before its body is read."""
    token = _token_of(service)
    flood = Flood()
    path, auth = {
        "dispatch": ("/render?execution_id=E2&name=render", None),
        "complete": ("/rill/complete", token),
        "heartbeat": ("/rill/heartbeat", token),
        "unauthenticated": ("/rill/complete", "not-a-token"),
    }[route]
    headers = {"Authorization": f"Bearer {auth}"} if auth else {}

    async def scenario() -> httpx.Response:
        async with service.client() as http:
            return await http.post(path, content=flood, headers=headers)

    answer = run(scenario)
    assert answer.status_code == (401 if route == "unauthenticated" else 413), answer.text
    assert flood.taken <= MB + 2 * CHUNK


@pytest.mark.parametrize("path", ["/render?execution_id=E&name=render", "/rill/complete"])
def test_a_declared_length_over_the_limit_is_refused_at_once(service: Service, path: str) -> None:
    """Over real HTTP: a ``Content-Length`` of 200 MB, and no body sent, is answered 413."""
    token = _token_of(service)
    with serve_app(service.app) as url:
        host, port = urlsplit(url).netloc.split(":")
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(
                f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {200 * MB}\r\n\r\n".encode()
            )
            head = sock.recv(4096).decode(errors="replace")
    assert head.startswith("HTTP/1.1 413"), head


def _peak_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1))  # type: ignore[union-attr]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
def test_a_200_mb_body_leaves_the_worker_memory_where_it_was(tmp_path: Path) -> None:
    """The example app under uvicorn (one worker, SQLite): a 200 MB chunked dispatch is
    answered 413 and the worker's peak memory stays within a few MB of its idle figure."""
    service = ExecutorService(f"sqlite:///{tmp_path}/jobs.db", tmp_path, workers=1).start()
    try:
        assert service._process is not None
        pid = service._process.pid
        idle = _peak_kb(pid)
        head, sent = _flood(service.port, 200 * MB)
        grown = _peak_kb(pid) - idle
    finally:
        service.stop()
    assert head.startswith("HTTP/1.1 413"), head
    assert grown < 8 * 1024, f"the worker's peak memory grew by {grown} kB"
    assert sent < 50 * MB, f"the server read {sent} bytes before answering"


def _flood(port: int, total: int) -> tuple[str, int]:
    """POST ``total`` bytes chunked to the example's task until the server answers or
    drops the connection: its answer's head and how many bytes went out."""
    chunk = b"%x\r\n%s\r\n" % (MB, b" " * MB)
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            b"POST /segments?execution_id=E&name=segment HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        sock.setblocking(False)
        while sent < total:
            ready, _, _ = select.select([sock], [sock], [], 10)
            if ready:
                break  # the answer is in
            try:
                sent += sock.send(chunk)
            except BlockingIOError:
                continue
            except OSError:
                break  # the server closed the connection
        sock.setblocking(True)
        try:
            head = sock.recv(4096).decode(errors="replace")
        except OSError as exc:
            head = f"no answer: {exc}"
    return head, sent


def test_an_engine_answer_is_read_only_up_to_its_limit() -> None:
    """An engine answering a callback with 200 MB: the deliverer reads its first
    ``MAX_ANSWER_BYTES`` and goes."""
    head = f"HTTP/1.1 200 OK\r\nContent-Length: {200 * MB}\r\n\r\n".encode()
    engine = RawEngine(head + b'{"code": 0}', streamed=200 * MB)
    try:
        done = _deliver_one(engine)
    finally:
        engine.close()
    assert done.classification == "ok"
    assert engine.sent < 50 * MB  # the socket buffers' worth, not the body


# 4. One spelling per token.


_ALPHABET = string.ascii_letters + string.digits + "-_"


def _same_bytes(text: str) -> str:
    """``text`` with its last character changed, decoding to the same bytes (its unused
    low bits differ); ``text`` itself when it has no unused bits."""
    decoded = _unb64(text)
    for c in _ALPHABET:
        if c != text[-1] and _unb64(text[:-1] + c) == decoded:
            return text[:-1] + c
    return text


def _respellings(token: str) -> list[str]:
    head, _, tail = token.partition(".")
    spelled = [
        f"{head}.{_same_bytes(tail)}",
        f"{_same_bytes(head)}.{tail}",
        f"{token}!!",
        f"{token}==",
        f"{head}==.{tail}",
        f"{head}.{tail[:10]}\n{tail[10:]}",
    ]
    return [t for t in spelled if t != token]


def test_a_token_is_accepted_in_its_one_spelling(service: Service) -> None:
    token = _token_of(service)

    async def scenario() -> tuple[int, list[int]]:
        async with service.client() as http:
            beat = "/rill/heartbeat"
            respelled = [
                (await http.post(beat, json={}, headers={"Authorization": f"Bearer {t}"}))
                for t in _respellings(token)
            ]
            genuine = await http.post(beat, json={}, headers={"Authorization": f"Bearer {token}"})
        return genuine.status_code, [a.status_code for a in respelled]

    genuine, respelled = run(scenario)
    assert genuine == 200
    assert respelled == [401] * len(respelled)


# 5. A namespace given as a string.


@pytest.mark.parametrize("namespaces", ["orders-eu", b"orders", 3])
def test_a_string_where_namespaces_are_meant_is_a_config_error(namespaces: Any) -> None:
    ledger = AsyncLedger("memory://", namespace="orders")
    with pytest.raises(ConfigError, match="collection of namespaces"):
        status_router([ledger], tokens={OPERATOR: namespaces})


# 6. Heartbeat leases are bounded.


@pytest.mark.parametrize(
    "body",
    [
        b'{"lease": 1e15}',
        b'{"lease": 1e400}',
        b'{"lease": Infinity}',
        b'{"lease": NaN}',
        b'{"lease": 0.000001}',
        b'{"lease": -5}',
        b'{"lease": 604801}',
    ],
)
def test_a_heartbeat_lease_out_of_bounds_is_refused(service: Service, body: bytes) -> None:
    token = _token_of(service)

    async def scenario() -> httpx.Response:
        async with service.client() as http:
            return await http.post(
                "/rill/heartbeat", content=body, headers={"Authorization": f"Bearer {token}"}
            )

    answer = run(scenario)
    assert answer.status_code == 400, answer.text
    assert answer.json()["reason"] == "bad_body"


@pytest.mark.parametrize(
    ("ttl", "lease"),
    [
        (3600, timedelta(days=8)),  # over a heartbeat's 7 days
        (timedelta(days=30), None),  # the lease is the ttl when none is given
    ],
)
def test_a_hand_off_lease_out_of_bounds_is_a_config_error(
    ttl: float | timedelta, lease: float | timedelta | None
) -> None:
    """``hand_off(lease=...)`` is bounded as a heartbeat's lease is: a longer one is refused
    with a ``ConfigError`` that names the bound, before a token is issued or the lease
    extended."""
    service = Service()
    refused: list[Exception] = []

    @service.executor.task("/bounded", key=lambda job: f"{job.scene}:{job.frame}", name="bounded")
    async def bounded(job: Frame) -> dict[str, Any]:
        try:
            service.executor.hand_off(ttl, lease=lease)
        except ConfigError as exc:
            refused.append(exc)
        return {"ok": True}

    service.app.include_router(service.executor.router)

    async def scenario() -> JobStatus | None:
        async with service.client() as http:
            answer = await http.post(
                "/bounded?execution_id=E1&name=bounded",
                json={"execution_id": "E1", "scene": "S", "frame": 1},
                headers={"X-Mode": "async", "X-Callback-Url": ENGINE},
            )
            assert answer.status_code == 200, answer.text
        await service.executor.drain()
        return await service.ledger.status("S:1", handler="bounded")

    status = run(scenario)
    assert len(refused) == 1 and "at most 7 days" in str(refused[0]), refused
    assert status is not None and status.result == {"ok": True}
    assert service.executor._handoffs._asked == {}  # no lease was asked for


# 2. No write without a verified token.


def _completions(service: Service, tokens: CompletionTokens, attempt_ids: list[str]) -> list[int]:
    """The status of a ``/rill/complete`` for each attempt id, each with a token ``tokens``
    signed for the genuine job's key and fence under that attempt id."""
    genuine = service.executor._handoffs.tokens
    assert genuine is not None
    claims = genuine.verify(_token_of(service))

    def token(attempt_id: str) -> str:
        claim = SimpleNamespace(
            namespace=claims.namespace,
            key=claims.key,
            job_id=claims.job_id,
            attempt_id=attempt_id,
            fence=claims.fence,
        )
        return tokens.issue(claim, handler=claims.handler, ttl=60)  # type: ignore[arg-type]

    async def scenario() -> list[int]:
        async with service.client() as http:
            return [
                (
                    await http.post(
                        "/rill/complete",
                        json={"result": {"from": n}},
                        headers={"Authorization": f"Bearer {token(attempt_id)}"},
                    )
                ).status_code
                for n, attempt_id in enumerate(attempt_ids)
            ]

    return run(scenario)


def test_a_forged_token_writes_nothing_and_is_counted(service: Service) -> None:
    """70 tokens signed with another secret, each claiming the genuine job with a 40 KB
    attempt id: the job's event log stays empty, and each is counted."""
    other = CompletionTokens("another-secret-0123456789abcdef-0123456789")
    forged = ["x" * 40_000 + str(n) for n in range(70)]
    assert _completions(service, other, forged) == [401] * 70
    status = run(service.status)
    assert status is not None and status.events == ()
    assert service.executor._handoffs.forged == 70


def test_refused_genuine_tokens_cannot_push_the_first_entries_out(service: Service) -> None:
    """72 genuine tokens of attempts that do not own the job, each refused (409) with a
    bounded entry: the log keeps the first 64 and counts the 8 it dropped."""
    genuine = service.executor._handoffs.tokens
    assert genuine is not None
    late = [f"late-{n}" for n in range(MAX_EVENTS + 8)]
    assert _completions(service, genuine, late) == [409] * (MAX_EVENTS + 8)
    status = run(service.status)
    assert status is not None
    assert [e.attempt_id for e in status.events] == late[:MAX_EVENTS]
    assert status.events_dropped == 8


# Any input: never a 5xx, never a traceback.

_PRINTABLE = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=80)
_HEADERS = [
    "X-Mode",
    "X-Callback-Url",
    "Authorization",
    "Content-Type",
    "Content-Length",
    "traceparent",
    "tracestate",
    "X-Flow-Server",
    "Transfer-Encoding",
]
_PATHS = ["/render", "/rill/complete", "/rill/heartbeat", "/rill/jobs/render/S:1"]
_QUERY = ["execution_id", "name", "handler", "x"]
_FUZZED = Service()
_TOKEN = _token_of(_FUZZED)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    method=st.sampled_from(["POST", "GET", "PUT"]),
    path=st.sampled_from(_PATHS),
    query=st.lists(
        st.tuples(st.sampled_from(["execution_id", "name", "handler", "x"]), st.text(max_size=30)),
        max_size=4,
    ),
    headers=st.dictionaries(
        st.sampled_from(_HEADERS),
        st.one_of(_PRINTABLE, st.sampled_from(["async", "Bearer " + _TOKEN, ENGINE, "1e400"])),
        max_size=6,
    ),
    auth=st.one_of(st.none(), st.just(f"Bearer {_TOKEN}"), _PRINTABLE),
    body=st.one_of(
        st.binary(max_size=400),
        st.sampled_from([b'{"lease": 1e400}', b'{"result": 1}', b'{"error": "x"}', b"[]"]),
    ),
)
@example(  # the known cases, besides what is drawn
    method="POST",
    path="/rill/heartbeat",
    query=[],
    headers={},
    auth=f"Bearer {_TOKEN}",
    body=b'{"lease": 1e400}',
)
def test_no_input_gets_a_server_error(
    method: str,
    path: str,
    query: list[tuple[str, str]],
    headers: dict[str, str],
    auth: str | None,
    body: bytes,
) -> None:
    if auth is not None:
        headers["Authorization"] = auth
    headers.pop("Content-Length", None)  # httpx sets the true one; a false one is the wire's
    headers.pop("Transfer-Encoding", None)

    async def scenario() -> httpx.Response:
        async with _FUZZED.client() as http:
            params = httpx.QueryParams(tuple(query))
            return await http.request(method, path, params=params, headers=headers, content=body)

    answer = run(scenario)
    assert answer.status_code < 500, answer.text
