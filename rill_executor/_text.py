"""Text the stores keep: identity-like text refused when unprintable, free text escaped.

Identity-like text (keys, origins, watches, result versions) names things: a NUL, a control
character or a lone surrogate in it is a bug or an attack, refused with a typed error before
anything is sent to a store (``printable``, ``printable_json``).

Free text (error messages, results, events, a resolution's reason and actor, a delivery's
detail) must come back exactly, but not every store can hold every string: PostgreSQL's
``text`` and ``jsonb`` refuse NUL (``\\u0000``), ``jsonb`` refuses lone surrogates, and no
UTF-8 driver can send a lone surrogate at all. So every string the ledger hands a store is
escaped, reversibly, the same way for every store (``escape_text``; ``store_json`` for each
string inside JSON text, keys included), and unescaped when read (``unescape_text``,
``load_json``, ``read_json``). The escape character is U+10FFFD (private use, plane 16),
followed by the escaped character's code point as six hex digits::

    NUL           ->  U+10FFFD "000000"
    U+D800        ->  U+10FFFD "00d800"
    U+10FFFD      ->  U+10FFFD "10fffd"

Everything else is kept as it is, so text without those characters (nearly all text) is
stored unchanged and costs one regular-expression search.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ._errors import UsageError

__all__ = [
    "ESCAPE",
    "escape_text",
    "load_json",
    "printable",
    "printable_json",
    "read_json",
    "store_json",
    "unescape_text",
]

ESCAPE = "\U0010fffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff\U0010fffd]")
# In JSON text these are either raw or \u escapes (a pair for U+10FFFD: \udbff\udffd). A
# match may be a false alarm (an escaped backslash before "u0000"): parsing settles it.
_UNSTORABLE_JSON = re.compile(r"[\x00\ud800-\udfff\U0010fffd]|\\u(?:0000|[dD][89a-fA-F])")
_ESCAPED = re.compile("\U0010fffd([0-9a-f]{6})")
_ESCAPED_JSON = re.compile(r"\U0010fffd|\\u[dD][bB][fF][fF]\\u[dD][fF][fF][dD]")
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")  # Cc and lone surrogates
_DUMP = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def escape_text(text: str) -> str:
    """``text`` as a store keeps it: no NUL, no lone surrogate."""
    if not _UNSTORABLE.search(text):
        return text
    return _UNSTORABLE.sub(lambda m: f"{ESCAPE}{ord(m.group()):06x}", text)


def unescape_text(text: str) -> str:
    """The inverse of ``escape_text``."""
    if ESCAPE not in text:
        return text
    return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), text)


def _each_string(value: Any, change: Any) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [_each_string(item, change) for item in value]
    if isinstance(value, dict):
        return {change(k): _each_string(v, change) for k, v in value.items()}
    return value


def store_json(text: str) -> str:
    """JSON text as a store keeps it: each string in it (keys too) through ``escape_text``."""
    if not _UNSTORABLE_JSON.search(text):
        return text
    escaped = _each_string(json.loads(text), escape_text)
    return _DUMP(escaped)


def load_json(text: str) -> Any:
    """JSON text a store kept, parsed, each string through ``unescape_text``."""
    value = json.loads(text)
    if not _ESCAPED_JSON.search(text):
        return value
    return _each_string(value, unescape_text)


def read_json(text: str) -> str:
    """JSON text a store kept, as it was before ``store_json``: the same value."""
    if not _ESCAPED_JSON.search(text):
        return text
    return _DUMP(load_json(text))


def _unprintable(text: str, what: str, error: type[UsageError]) -> UsageError:
    found = _UNPRINTABLE.search(text)
    assert found is not None
    return error(
        f"{what} {text[:40]!r} contains the character {found.group()!r} (a control character"
        " or a lone surrogate); it names something, so it must be printable text"
    )


def printable(text: str, what: str, error: type[UsageError]) -> str:
    """``text``, or ``error`` if it holds a control character or a lone surrogate."""
    if _UNPRINTABLE.search(text):
        raise _unprintable(text, what, error)
    return text


def printable_json(value: Any, what: str, error: type[UsageError]) -> None:
    """``error`` if any string in JSON data ``value`` (keys too) is not ``printable``."""
    if isinstance(value, str):
        printable(value, what, error)
    elif isinstance(value, list):
        for item in value:
            printable_json(item, what, error)
    elif isinstance(value, dict):
        for k, v in value.items():
            printable(k, what, error)
            printable_json(v, what, error)
