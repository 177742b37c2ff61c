"""Namespaces, business keys, job ids, fingerprints and attempt ids.

Every store addresses a job by ``job_id``: the SHA-256 of (namespace, key). User input
therefore never becomes a table key, a Redis key name or an object path by itself, so no key
can collide with another namespace's, change a Redis hash slot or exceed a driver's limit.
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
import re
import secrets
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from pydantic_core import PydanticSerializationError, to_jsonable_python

from ._errors import InvalidKey, InvalidOutputName, InvalidPayload, StoreProtocolError
from ._text import printable

__all__ = [
    "MAX_KEY_BYTES",
    "attempt_object_key",
    "canonical_object_key",
    "validate_output_name",
    "MAX_VERSION_CHARS",
    "fingerprint_of",
    "handler_key",
    "job_id",
    "new_attempt_id",
    "validate_attempt_id",
    "validate_fingerprint",
    "validate_handler_name",
    "validate_key",
    "validate_namespace",
    "validate_result_version",
    "validate_store_id",
]

MAX_KEY_BYTES = 512
"""Longest business key, in UTF-8 bytes. Longer natural keys should be hashed by the caller."""
MAX_VERSION_CHARS = 128
MAX_HANDLER_NAME_CHARS = 200
MAX_ATTEMPT_ID_CHARS = 128
MAX_OUTPUT_NAME_CHARS = 200
MAX_OBJECT_KEY_BYTES = 900  # S3 allows 1024 with the store's own prefix
_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_ATTEMPT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # Unicode category Cc, exactly
_OUTPUT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_FINGERPRINT = re.compile(r"[0-9a-f]{64}")
_STORE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{7,63}")


def validate_namespace(namespace: object) -> str:
    if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace):
        raise InvalidKey(
            f"namespace {namespace!r} is not valid: use 1-64 characters of letters, digits,"
            " '.', '_' or '-', starting with a letter or digit (e.g. 'transcode')"
        )
    return namespace


def validate_key(key: object) -> str:
    """Return ``key`` as a str, or raise ``InvalidKey`` saying what is wrong with it."""
    if isinstance(key, bytes):
        try:
            key = key.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidKey(
                f"business key {key[:40]!r} is not valid UTF-8 ({exc.reason} at byte"
                f" {exc.start}); build keys from text such as 'video-A:segment-1:h264-v2'"
            ) from None
    if not isinstance(key, str):
        raise InvalidKey(
            f"business key must be a str, got {type(key).__name__}; derive a string such as"
            " f'{video}:{segment}:{profile}' from the business input"
        )
    if not key:
        raise InvalidKey("business key is empty; derive it from the business input")
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidKey(
            f"business key {key[:40]!r} contains lone surrogates and is not valid UTF-8"
        ) from None
    if size > MAX_KEY_BYTES:
        raise InvalidKey(
            f"business key is {size} bytes of UTF-8, over the limit of {MAX_KEY_BYTES};"
            " shorten it or hash the variable part (e.g. hashlib.sha256(part).hexdigest())"
        )
    control = _CONTROL.search(key)
    if control:
        raise InvalidKey(
            f"business key {key[:40]!r} contains the control character {control.group()!r};"
            " keys must be printable text"
        )
    return key


def validate_handler_name(name: object) -> str:
    """A decorated handler's name: the scope of its jobs' keys, so no '/' in it."""
    if (
        not isinstance(name, str)
        or not name
        or len(name) > MAX_HANDLER_NAME_CHARS
        or "/" in name
        or _CONTROL.search(name)
    ):
        raise InvalidKey(
            f"handler name {name!r} is not valid: use 1-{MAX_HANDLER_NAME_CHARS} printable"
            " characters without '/', e.g. 'transcode' or 'billing.refund'"
        )
    return name


def handler_key(name: str, key: object) -> str:
    """The key a decorated handler's job is stored under: ``{name}/{business key}``."""
    return scoped_key(validate_handler_name(name), key)


def scoped_key(name: str, key: object) -> str:
    """``handler_key`` for a ``name`` already validated (the decorator's, checked once)."""
    scoped = f"{name}/{validate_key(key)}"
    if len(scoped.encode("utf-8")) > MAX_KEY_BYTES:
        return validate_key(scoped)  # raises, saying by how much
    return scoped


def validate_result_version(version: object) -> str | None:
    if version is None:
        return None
    if not isinstance(version, str) or not version or len(version) > MAX_VERSION_CHARS:
        raise InvalidPayload(
            f"result version {version!r} must be a non-empty str of at most"
            f" {MAX_VERSION_CHARS} characters, e.g. 'h264-v2'"
        )
    return printable(version, "result version", InvalidPayload)


_TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


def validate_traceparent(trace: object) -> str:
    """A W3C ``traceparent`` (version 00), e.g. of the span an attempt runs in."""
    if not isinstance(trace, str) or not _TRACEPARENT.fullmatch(trace):
        raise InvalidPayload(
            f"trace {trace!r} is not a W3C traceparent: '00-', 32 lowercase hex digits, '-',"
            " 16 more, '-' and two of flags, e.g."
            " '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'"
        )
    return trace


def validate_fingerprint(fingerprint: object) -> str:
    if not isinstance(fingerprint, str) or not _FINGERPRINT.fullmatch(fingerprint):
        raise InvalidPayload(
            f"fingerprint {fingerprint!r} is not a SHA-256 hex digest; compute it with"
            " rill_executor.fingerprint_of(payload)"
        )
    return fingerprint


def validate_attempt_id(attempt_id: object) -> str:
    # Attempt ids become a segment of output object keys: no '/', nothing to escape.
    if not isinstance(attempt_id, str) or not _ATTEMPT_ID.fullmatch(attempt_id):
        raise InvalidPayload(
            f"attempt id {attempt_id!r} must be 1-{MAX_ATTEMPT_ID_CHARS} letters, digits,"
            " '.', '_', ':' or '-', starting with a letter or digit; omit it to have one"
            " generated"
        )
    return attempt_id


def validate_output_name(name: object) -> str:
    if not isinstance(name, str) or not _OUTPUT_NAME.fullmatch(name) or ".." in name:
        raise InvalidOutputName(
            f"output name {name!r} is not valid: use 1-{MAX_OUTPUT_NAME_CHARS} letters,"
            " digits, '.', '_' or '-', starting with a letter or digit, without '..'"
            " (e.g. 'segment-1.mp4'); it becomes the last part of the object's key"
        )
    return name


def validate_store_id(store_id: object) -> str:
    # A store's identity becomes a segment of its output object keys.
    if not isinstance(store_id, str) or not _STORE_ID.fullmatch(store_id):
        raise StoreProtocolError(
            f"the job store reported the identity {store_id!r}; a store identity is 8-64"
            " letters, digits, '_' or '-' (e.g. uuid4().hex), created once with the store's"
            " data — fix the store adapter's store_id()"
        )
    return store_id


def attempt_object_key(namespace: str, job: str, store_id: str, attempt_id: str, name: str) -> str:
    """Where an attempt writes output ``name``: its own folder under the job's digest and
    the identity of the job store that holds the attempt, so that two job stores sharing
    one output prefix never write, or judge, each other's objects."""
    return f"{namespace}/{job}/{store_id}/{attempt_id}/{name}"


def canonical_object_key(namespace: str, key: str, result_version: str | None, name: str) -> str:
    """Where a committed output is published: stable for (key, result version, name).

    Under ``{namespace}/published/``, never under a job's digest folder, so collecting
    orphans can tell published copies from attempts' objects.
    """
    segments = (quote(key, safe=":@-._~"), quote(result_version or "_", safe=":@-._~"))
    path = f"{namespace}/published/{segments[0]}/{segments[1]}/{name}"
    if len(path.encode()) > MAX_OBJECT_KEY_BYTES:
        raise InvalidOutputName(
            f"the canonical key for output {name!r} of {key!r} would be {len(path.encode())}"
            f" bytes, over {MAX_OBJECT_KEY_BYTES}; use a shorter business key or name"
        )
    return path


def job_id(namespace: str, key: str) -> str:
    """The store address of (namespace, key): 64 hex characters."""
    return hashlib.sha256(f"{namespace}\x00{key}".encode()).hexdigest()


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _canonical_encoder() -> Callable[[Any], str]:
    """``_CANONICAL.encode``, with CPython's C encoder built once rather than per call (most
    of the cost of fingerprinting a small payload). No cycle check: ``to_jsonable_python``
    refuses a cyclic payload before it gets here."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return _CANONICAL.encode
    c = _CANONICAL
    encode = make(None, c.default, json.encoder.encode_basestring, None, c.key_separator,
                  c.item_separator, c.sort_keys, c.skipkeys, c.allow_nan)  # fmt: skip
    return lambda plain: "".join(encode(plain, 0))


_canonical = _canonical_encoder()


def fingerprint_of(payload: Any) -> str:
    """SHA-256 of the canonical JSON of ``payload`` (sorted keys, no whitespace).

    Anything pydantic can serialise works: models, dataclasses, dicts, datetimes.
    """
    try:
        plain = to_jsonable_python(payload)
    except (PydanticSerializationError, ValueError) as exc:  # ValueError: a cycle
        raise InvalidPayload(
            f"cannot fingerprint a {type(payload).__name__}: {exc}; pass fingerprint= a"
            " function returning the JSON-serialisable part of the request"
        ) from exc
    return hashlib.sha256(_canonical(plain).encode("utf-8")).hexdigest()


def new_attempt_id() -> str:
    return secrets.token_hex(12)
