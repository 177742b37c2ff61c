"""Completion tokens: a signed, expiring reference to one attempt of one job.

A handler that hands its work to an external worker (a render farm that calls back when
done) gives the worker a token; the worker presents it to complete or heartbeat the job.
The token binds the namespace, stored key, job id, attempt id and fence of the claim, the
mounted handler's name and an expiry, signed with HMAC-SHA256 under a server secret:
``base64url(compact JSON) "." base64url(signature)``. It is not encrypted: the worker can
read what it refers to, but not change it. The fence, checked by the store at completion,
refuses a token whose attempt was superseded.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .. import AsyncClaim, Claim, ConfigError, UsageError
from ..integration import Seconds, to_us
from ..store import SYSTEM_CLOCK, Clock

__all__ = ["CompletionTokens", "InvalidToken", "TokenClaims"]

MIN_SECRET_BYTES = 32


class InvalidToken(UsageError):
    """A completion token that cannot be used: ``reason`` is ``malformed``, ``forged`` (the
    signature does not match: a token made with another secret, or changed after signing) or
    ``expired``. ``claims``: what the token says it refers to, when that can be read (genuine
    for an expired token; unverified for a forged one)."""

    def __init__(self, message: str, *, reason: str, claims: TokenClaims | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.claims = claims


@dataclass(frozen=True, slots=True)
class TokenClaims:
    """What a verified token refers to."""

    namespace: str
    key: str  # the stored key (scoped by the handler's name)
    job_id: str
    attempt_id: str
    fence: int
    handler: str
    expires_at: datetime

    def remaining(self, clock: Clock = SYSTEM_CLOCK) -> timedelta:
        """The token's time left on ``clock``'s wall clock (at most zero once expired)."""
        return self.expires_at - datetime.fromtimestamp(clock.time_ns() / 1e9, UTC)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class CompletionTokens:
    """Issues and verifies completion tokens under one server secret (32 bytes or more).

    A token's expiry is a time on ``clock``'s wall clock (``time_ns``): the process's own by
    default; ``RillFlowExecutor`` passes its ledger's, so that on a test's ``VirtualClock``
    a token expires when the test advances the clock past it."""

    def __init__(self, secret: str | bytes, *, clock: Clock = SYSTEM_CLOCK) -> None:
        key = secret.encode() if isinstance(secret, str) else secret
        if len(key) < MIN_SECRET_BYTES:
            raise ConfigError(
                f"a completion token secret must be at least {MIN_SECRET_BYTES} bytes (got"
                f" {len(key)}); make one with secrets.token_urlsafe(32) and keep it out of the"
                " code, the same in every process that serves completions"
            )
        self._key = key
        self._clock = clock

    def _sign(self, payload: bytes) -> bytes:
        return hmac.digest(self._key, payload, hashlib.sha256)

    def issue(self, claim: Claim | AsyncClaim, *, handler: str, ttl: Seconds) -> str:
        """A token for ``claim``'s attempt, good for ``ttl`` from now."""
        expires = (self._clock.time_ns() + to_us(ttl, "ttl") * 1000) / 1e9
        body = {
            "ns": claim.namespace,
            "k": claim.key,
            "j": claim.job_id,
            "a": claim.attempt_id,
            "f": claim.fence,
            "h": handler,
            "exp": round(expires, 3),
        }
        payload = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
        return f"{_b64(payload)}.{_b64(self._sign(payload))}"

    def verify(self, token: str) -> TokenClaims:
        """The claims of a genuine, unexpired token; ``InvalidToken`` otherwise."""
        head, dot, tail = token.partition(".")
        try:
            payload, signature = _unb64(head), _unb64(tail)
        except (binascii.Error, ValueError):
            raise InvalidToken("the token is not base64url text", reason="malformed") from None
        if not dot or not payload:
            raise InvalidToken("the token is not PAYLOAD.SIGNATURE", reason="malformed")
        # One spelling per token: the decoder skips stray characters and ignores the unused
        # bits of a last character, so only the canonical encoding of what it read is taken.
        if _b64(payload) != head or _b64(signature) != tail:
            raise InvalidToken("the token is not in its canonical encoding", reason="malformed")
        if not hmac.compare_digest(self._sign(payload), signature):
            raise InvalidToken(
                "the token's signature does not match: it was changed, or signed with another"
                " secret",
                reason="forged",
                claims=_unverified(payload),
            )
        claims = _claims(payload)
        if claims.remaining(self._clock) <= timedelta(0):
            raise InvalidToken(
                f"the token expired at {claims.expires_at.isoformat()}; the handler can issue a"
                " longer one (hand_off(ttl=...)), or the worker can heartbeat before it expires",
                reason="expired",
                claims=claims,
            )
        return claims


def _unverified(payload: bytes) -> TokenClaims | None:
    try:
        return _claims(payload)
    except InvalidToken:
        return None


def _claims(payload: bytes) -> TokenClaims:
    try:
        body: dict[str, Any] = json.loads(payload)
        return TokenClaims(
            namespace=str(body["ns"]),
            key=str(body["k"]),
            job_id=str(body["j"]),
            attempt_id=str(body["a"]),
            fence=int(body["f"]),
            handler=str(body["h"]),
            expires_at=datetime.fromtimestamp(float(body["exp"]), UTC),
        )
    except (ValueError, TypeError, KeyError, OverflowError):
        # Signed by us yet unreadable: only a token from another version of this format.
        raise InvalidToken(
            "the token's payload is not one this server issues", reason="malformed"
        ) from None
