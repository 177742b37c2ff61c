"""The status endpoint: a job and its whole history by (namespace, key), for the engine's
operators, behind bearer tokens that each name the namespaces they may read.

``GET {prefix}/jobs/{namespace}/{key}[?handler=NAME]`` answers the ``JobStatus`` as JSON;
``handler`` looks up a decorated (or mounted) handler's job for that business key.
401: no or unknown token; 403: the token may not read that namespace; 404: no such
namespace here, or no such job; 400: a key that cannot be a job's; 503: the store is down
or misconfigured (ask again later).
"""

from __future__ import annotations

import contextlib
import hmac
from collections.abc import AsyncIterator, Collection, Iterable, Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query
from fastapi.responses import JSONResponse

from .. import AsyncLedger, ConfigError, StoreError, UsageError

__all__ = ["status_router"]

_ALL = "*"


def _token(authorization: str | None) -> str | None:
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _allowed(tokens: Mapping[str, Collection[str]], token: str | None) -> Collection[str] | None:
    """The namespaces ``token`` may read, comparing in constant time; None if unknown."""
    found: Collection[str] | None = None
    for known, namespaces in tokens.items():
        if token is not None and hmac.compare_digest(known.encode(), token.encode()):
            found = namespaces
    return found


def status_router(
    ledgers: Iterable[AsyncLedger],
    *,
    tokens: Mapping[str, Collection[str]],
    prefix: str = "/rill",
) -> APIRouter:
    """A router answering job status for ``ledgers`` (one per namespace).

    ``tokens`` maps each bearer token to the namespaces it may read (``"*"``: all). Bad
    tokens (shorter than 16 characters) are a ``ConfigError`` raised when the app starts
    (the router's lifespan): raised here, at import, it would have an ASGI server restart
    its workers for ever. Until then every request is answered 503.
    """
    for namespaces in tokens.values():
        if isinstance(namespaces, (str, bytes)) or not isinstance(namespaces, Collection):
            # A str is a collection of its characters: "orders-eu" would let "o" through.
            raise ConfigError(
                "status_router(tokens=...) maps each token to a collection of namespaces,"
                f" e.g. {{token: [{namespaces!r}]}}, not to {type(namespaces).__name__}"
            )
    by_namespace = {ledger.namespace: ledger for ledger in ledgers}
    problem = None
    if not tokens or any(not isinstance(t, str) or len(t) < 16 for t in tokens):
        problem = ConfigError(
            "status_router needs bearer tokens of at least 16 characters, e.g."
            " secrets.token_urlsafe(32), each mapped to the namespaces it may read"
        )
        tokens = {}

    @contextlib.asynccontextmanager
    async def refuse_bad_tokens(app: Any) -> AsyncIterator[None]:
        if problem is not None:
            raise problem
        yield

    router = APIRouter(prefix=prefix, lifespan=refuse_bad_tokens)
    unauthorized = {"WWW-Authenticate": "Bearer"}

    @router.get("/jobs/{namespace}/{key:path}")
    async def job_status(
        namespace: str,
        key: str,
        handler: Annotated[str | None, Query()] = None,
        authorization: Annotated[str | None, Header()] = None,
    ) -> JSONResponse:
        if problem is not None:
            raise HTTPException(503, str(problem))
        allowed = _allowed(tokens, _token(authorization))
        if allowed is None:
            raise HTTPException(401, "a valid bearer token is required", headers=unauthorized)
        if _ALL not in allowed and namespace not in allowed:
            raise HTTPException(403, f"this token may not read namespace {namespace!r}")
        ledger = by_namespace.get(namespace)
        if ledger is None:
            raise HTTPException(404, f"no namespace {namespace!r} is served here")
        try:
            status = await ledger.status(key, handler=handler)
        except (StoreError, ConfigError) as exc:  # the executor's side: ask again later
            raise HTTPException(503, str(exc)) from None
        except UsageError as exc:
            raise HTTPException(400, str(exc)) from None
        if status is None:
            scoped = key if handler is None else f"{handler}/{key}"
            hint = (
                ": a decorated handler's job is stored as NAME/KEY: pass ?handler=NAME"
                if handler is None
                else ""
            )
            raise HTTPException(404, f"no job {scoped!r} in namespace {namespace!r}{hint}")
        return JSONResponse(status.model_dump(mode="json"))

    return router
