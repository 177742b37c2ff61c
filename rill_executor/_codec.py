"""Results in and out of the store: pydantic JSON, with a size limit."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, to_json

from ._errors import ResultNotSerializable, ResultTooLarge, StoreProtocolError
from ._records import ErrorInfo

__all__ = ["adapter_for", "decode_result", "encode_error", "encode_result"]

DEFAULT_MAX_RESULT_BYTES = 1024 * 1024


@lru_cache(maxsize=512)
def _cached_adapter(annotation: Any) -> TypeAdapter[Any]:
    return TypeAdapter(annotation)


def adapter_for(annotation: Any) -> TypeAdapter[Any]:
    try:
        return _cached_adapter(annotation)
    except TypeError:  # an unhashable annotation
        return TypeAdapter(annotation)


def encode_result(value: Any, limit: int, adapter: TypeAdapter[Any] | None = None) -> str:
    try:
        raw = adapter.dump_json(value) if adapter is not None else to_json(value)
    except (PydanticSerializationError, ValueError, TypeError) as exc:
        raise ResultNotSerializable(
            f"cannot store a result of type {type(value).__name__}: {exc}. Return a pydantic"
            " model, a dataclass or plain JSON data (dict, list, str, numbers)"
        ) from exc
    if len(raw) > limit:
        raise ResultTooLarge(
            f"the result serialises to {len(raw)} bytes, over the ledger's limit of {limit};"
            " store large data as an output object and return a reference, or raise"
            " max_result_bytes",
            size=len(raw),
            limit=limit,
        )
    return raw.decode("utf-8")


def decode_result(text: str, annotation: Any = Any) -> Any:
    try:
        return adapter_for(annotation).validate_json(text)
    except ValidationError as exc:
        raise StoreProtocolError(
            f"the stored result does not validate as {annotation!r}: {exc}. The handler's"
            " return type changed for a key that already has a result: use a new result"
            " version for the new type"
        ) from exc


def encode_error(error: BaseException | str, *, retryable: bool) -> str:
    return ErrorInfo.of(error, retryable=retryable).model_dump_json()
