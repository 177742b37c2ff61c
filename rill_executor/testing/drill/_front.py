"""The front door the engine dispatches to: each request goes to the next executor in turn.

Like a load balancer in front of the executors, it tries the next one when an executor
refuses the connection (killed, restarting), and answers 502 when none takes it. A stopped
executor accepts the connection and never answers: the engine's read timeout sees that.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import AsyncIterator, Callable, Sequence

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

__all__ = ["round_robin_app"]

_HOP = {"host", "content-length", "connection", "keep-alive", "transfer-encoding"}


def round_robin_app(  # served with lifespan="on": the client is opened and closed there
    upstreams: Sequence[str],
    routed: Callable[[str, str, int], None] | None = None,
    timeout: float = 120.0,
) -> Starlette:
    """An ASGI app forwarding every request to the next of ``upstreams`` (base URLs);
    ``routed(execution_id, name, index)`` is told which one took a dispatch."""
    turn = itertools.count()
    lock = threading.Lock()
    clients: list[httpx.AsyncClient] = []

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
            clients.append(client)
            yield

    async def forward(request: Request) -> Response:
        client = clients[0]
        body = await request.body()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        targets = list(upstreams)
        with lock:
            first = next(turn)
        for i in range(len(targets)):
            index = (first + i) % len(targets)
            base = targets[index]
            url = f"{base}{request.url.path}"
            if request.url.query:
                url += f"?{request.url.query}"
            if routed is not None:
                query = request.query_params
                routed(query.get("execution_id", ""), query.get("name", ""), index)
            try:
                answer = await client.request(request.method, url, content=body, headers=headers)
            except httpx.ConnectError:
                continue
            except httpx.HTTPError as exc:
                return Response(f"upstream {base}: {type(exc).__name__}", status_code=502)
            kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP}
            kept.pop("content-encoding", None)
            return Response(answer.content, status_code=answer.status_code, headers=kept)
        return Response("no executor took the connection", status_code=502)

    methods = ["GET", "POST", "PUT", "DELETE", "PATCH"]
    return Starlette(routes=[Route("/{path:path}", forward, methods=methods)], lifespan=lifespan)
