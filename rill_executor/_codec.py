"""Results in and out of the store: pydantic JSON, with a size limit.

A result is checked before it is stored exactly as a replay will read it: serialised as
its annotated type, then decoded again. A value that would not come back (a dict missing
a field, NaN where a float is due, ``None`` for a model) is refused before anything is
written, so a stored result always replays.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, to_json

from ._errors import InvalidResult, ResultNotSerializable, ResultTooLarge
from ._records import ErrorInfo

__all__ = ["adapter_for", "encode_error", "encode_result", "type_name"]

DEFAULT_MAX_RESULT_BYTES = 1024 * 1024


@lru_cache(maxsize=512)
def _cached_adapter(annotation: Any) -> TypeAdapter[Any]:
    return TypeAdapter(annotation)


def adapter_for(annotation: Any) -> TypeAdapter[Any]:
    try:
        return _cached_adapter(annotation)
    except TypeError:  # an unhashable annotation
        return TypeAdapter(annotation)


def type_name(annotation: Any) -> str:
    return getattr(annotation, "__qualname__", None) or repr(annotation)


def _first_errors(exc: ValidationError, limit: int = 3) -> str:
    parts = []
    for error in exc.errors(include_url=False)[:limit]:
        where = ".".join(str(part) for part in error["loc"]) or "the value"
        parts.append(f"{where}: {error['msg']}")
    more = exc.error_count() - limit
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def _unserialisable(value: Any, exc: Exception) -> ResultNotSerializable:
    return ResultNotSerializable(
        f"cannot store a result of type {type(value).__name__}: {exc}. Return a pydantic"
        " model, a dataclass or plain JSON data (dict, list, str, numbers)"
    )


# Schemas a value of exactly this type always serialises as, with nothing to refuse.
_EXACT: dict[str, type] = {"int": int, "str": str, "float": float, "bool": bool, "none": type(None)}
_ANY = {"type": "any"}


def _as_it_is(schema: Any, value: Any) -> bool:
    """Whether ``value`` serialises under ``schema`` with no mismatch to refuse: Any takes
    what it finds, a scalar of its own type is itself, and so is a list of anything or a
    dict of anything by str keys (``list``, ``dict[str, Any]``)."""
    kind = schema["type"]
    if kind == "any":
        return True
    if kind == "list":
        return type(value) is list and schema.get("items_schema", _ANY) == _ANY
    if kind == "dict":
        return (
            type(value) is dict
            and schema.get("values_schema", _ANY) == _ANY
            and all(type(k) is str for k in value)
        )
    return _EXACT.get(kind) is type(value)


def _dump(value: Any, adapter: TypeAdapter[Any], source: str, expected: str) -> bytes:
    """``value`` as JSON of the annotated type; a value of another type is validated first."""
    serializer = adapter.serializer
    try:
        if _as_it_is(adapter.core_schema, value):
            # Refusing a mismatch (warnings="error") costs more than the whole dump.
            return serializer.to_json(value)
        return serializer.to_json(value, warnings="error")
    except PydanticSerializationError:
        pass  # not of the annotated type as it stands: does it validate as one?
    except (ValueError, TypeError) as exc:
        raise _unserialisable(value, exc) from exc
    try:
        value = adapter.validate_python(value)
    except ValidationError as exc:
        raise InvalidResult(
            f"{source} returned a {type(value).__name__} that does not validate as"
            f" {expected}: {_first_errors(exc)}. Return a value of the annotated type"
        ) from exc
    try:
        return serializer.to_json(value, warnings="error")
    except (PydanticSerializationError, ValueError, TypeError) as exc:
        raise _unserialisable(value, exc) from exc


def _has_non_finite(plain: Any) -> bool:
    if isinstance(plain, float):
        return not math.isfinite(plain)
    if isinstance(plain, dict):
        return any(_has_non_finite(v) for v in plain.values())
    if isinstance(plain, (list, tuple, set, frozenset)):
        return any(_has_non_finite(v) for v in plain)
    return False


def _non_finite(value: Any, adapter: TypeAdapter[Any] | None) -> bool:
    """Whether ``value`` holds a NaN or an infinity where it is serialised: only looked for
    when its JSON has a null or such a constant, so most results pay nothing."""
    serializer = (adapter or adapter_for(Any)).serializer
    try:
        plain = serializer.to_python(value, warnings=False)
    except (PydanticSerializationError, ValueError, TypeError):
        return False  # serialised as JSON already: a mismatch is no NaN
    return _has_non_finite(plain)


def encode_result(
    value: Any,
    limit: int,
    adapter: TypeAdapter[Any] | None = None,
    *,
    source: str = "the handler",
    expected: str = "its return annotation",
) -> str:
    """The JSON text to store for ``value``, checked to decode again through ``adapter``."""
    if adapter is None:
        try:
            raw = to_json(value)
        except (PydanticSerializationError, ValueError, TypeError) as exc:
            raise _unserialisable(value, exc) from exc
    else:
        raw = _dump(value, adapter, source, expected)
    if len(raw) > limit:
        raise ResultTooLarge(
            f"the result serialises to {len(raw)} bytes, over the ledger's limit of {limit};"
            " store large data as an output object and return a reference, or raise"
            " max_result_bytes",
            size=len(raw),
            limit=limit,
        )
    if adapter is not None:
        try:
            adapter.validator.validate_json(raw)
        except ValidationError as exc:
            raise InvalidResult(
                f"{source} returned a value that would not decode as {expected} once stored"
                f" ({_first_errors(exc)}): JSON has no NaN or Infinity (they become null) and"
                " no None where the annotation wants a value. Return a value of the annotated"
                " type"
            ) from exc
    if (b"null" in raw or b"NaN" in raw or b"Infinity" in raw) and _non_finite(value, adapter):
        raise InvalidResult(
            f"{source} returned a value holding NaN or Infinity, which would not come back as"
            f" {expected} once stored: JSON has neither (it would be stored as null and replay"
            " as None). Return finite numbers, or None where the annotation allows it"
        )
    return raw.decode("utf-8")


def encode_error(
    error: BaseException | str, *, retryable: bool, error_type: str | None = None
) -> str:
    """The JSON text of ``ErrorInfo`` for ``error`` (its type ``error_type`` when given). Not
    through pydantic: a message may hold a lone surrogate (``rill_executor._text`` escapes it
    for the store)."""
    info = ErrorInfo.of(error, retryable=retryable).model_dump()
    if error_type is not None:
        info["type"] = error_type
    return json.dumps(info, ensure_ascii=False, separators=(",", ":"))
