"""Request bodies read within a limit: a declared ``Content-Length`` over it is refused before
a byte is read, and a chunked body is read only up to it, so a large body never sits whole
in a worker's memory (a worker that answers without reading the rest lets its server drop
the connection)."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse

__all__ = ["BodyTooLarge", "read_body", "refused_body"]

_MAX_LENGTH_DIGITS = 18  # a longer Content-Length is over any limit (and int() of it is slow)


class BodyTooLarge(Exception):
    """A body over the limit, by its ``Content-Length`` or as it was read."""

    def __init__(self, limit: int, size: int | None) -> None:
        shown = f"{size} bytes" if size is not None else "longer than that"
        super().__init__(f"the request body is {shown}, over the limit of {limit} bytes")


class BadLength(ValueError):
    """A ``Content-Length`` that is not a number of bytes."""


def _declared(request: Request) -> int | None:
    value = request.headers.get("content-length")
    if value is None:
        return None
    text = value.strip()
    if not text.isdigit() or not text.isascii():
        raise BadLength(f"Content-Length {value[:40]!r} is not a number of bytes")
    return int(text) if len(text) <= _MAX_LENGTH_DIGITS else 10**_MAX_LENGTH_DIGITS


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body; ``BodyTooLarge`` as soon as it is known to be over ``limit``."""
    declared = _declared(request)
    if declared is not None and declared > limit:
        raise BodyTooLarge(limit, declared)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit, None)
        chunks.append(chunk)
    return b"".join(chunks)


def refused_body(exc: BodyTooLarge) -> JSONResponse:
    """413, and ``Connection: close``: the rest of the body is not read."""
    body = {"error_code": "BodyTooLarge", "error_msg": str(exc)}
    return JSONResponse(body, status_code=413, headers={"Connection": "close"})
