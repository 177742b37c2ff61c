"""The callback URL the engine hands out, and its optional HMAC-SHA1 ``sign``.

The engine (``FlowAuthHeaderGenerator`` with ``AuthHttpUtil``) sorts the parameters by name,
URL-encodes names and values as Java's ``URLEncoder`` does (plus ``%20`` for a space and
``%7E`` for ``~``), joins them with ``&`` and signs that string:
``sign = Base64(HMAC-SHA1(secret, "execution_id=…&task_name=…&ts=…"))``. The callback URL's
query is the same string, with ``sign`` added in sorted position.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from urllib.parse import parse_qsl, quote, urlsplit

__all__ = ["callback_sign", "callback_url", "verify_callback_sign"]


def _java_url_encode(value: str) -> str:
    # URLEncoder keeps only letters, digits and ".-*_"; the engine then escapes "*" and "~".
    return quote(value, safe="-_.").replace("~", "%7E")


def _query_string(params: Mapping[str, str]) -> str:
    return "&".join(
        f"{_java_url_encode(name)}={_java_url_encode(params[name])}" for name in sorted(params)
    )


def _sign(secret: str, params: Mapping[str, str]) -> str:
    digest = hmac.new(
        secret.encode("utf-8"), _query_string(params).encode("utf-8"), hashlib.sha1
    ).digest()
    return base64.b64encode(digest).decode("ascii")


def callback_sign(secret: str, execution_id: str, task_name: str, ts: int) -> str:
    """The ``sign`` the engine puts in the callback URL of this dispatch."""
    return _sign(secret, {"execution_id": execution_id, "task_name": task_name, "ts": str(ts)})


def callback_url(
    trigger_url: str, execution_id: str, task_name: str, ts: int, secret: str | None
) -> str:
    """``X-Callback-Url`` for one dispatch: ``trigger_url`` plus the (signed) query."""
    params = {"execution_id": execution_id, "task_name": task_name, "ts": str(ts)}
    if secret is not None:
        params["sign"] = _sign(secret, params)
    return f"{trigger_url}?{_query_string(params)}"


def verify_callback_sign(url: str, secret: str) -> bool:
    """Whether ``url`` (an ``X-Callback-Url``) carries a valid ``sign`` for ``secret``."""
    params = dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
    sign = params.pop("sign", None)
    if sign is None:
        return False
    return hmac.compare_digest(sign, _sign(secret, params))
