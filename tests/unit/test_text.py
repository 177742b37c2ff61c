"""The stores' escaping of free text: reversible, and leaving nothing a store refuses."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rill_executor import InvalidPayload
from rill_executor._text import (
    escape_text,
    load_json,
    printable,
    printable_json,
    read_json,
    store_json,
    unescape_text,
)
from rill_executor.testing.conformance.hostile import hostile_text

_REFUSED = re.compile("[\x00\ud800-\udfff]")  # what PostgreSQL or a UTF-8 driver refuses
_text = hostile_text | st.text()
_scalar = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
)
_json: Any = st.recursive(
    _scalar | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings(v))]
    return []


@settings(max_examples=150)
@given(_text)
def test_escaping_text_is_reversible_and_leaves_nothing_refused(text: str) -> None:
    stored = escape_text(text)
    assert not _REFUSED.search(stored)
    stored.encode("utf-8")  # strict: no lone surrogate is left
    assert unescape_text(stored) == text


@settings(max_examples=150)
@given(_json)
def test_escaping_json_is_reversible_and_leaves_nothing_refused(value: Any) -> None:
    for ascii_only in (True, False):
        text = json.dumps(value, ensure_ascii=ascii_only)
        stored = store_json(text)
        assert not _REFUSED.search(stored)
        assert not any(_REFUSED.search(s) for s in _strings(json.loads(stored)))
        stored.encode("utf-8")
        # JSON reads the escapes \\ud800\\udc00 as one character: the value is the text's
        assert load_json(stored) == json.loads(text)
        assert json.loads(read_json(stored)) == json.loads(text)
    assert load_json(store_json(json.dumps(value, ensure_ascii=False))) == value


def test_text_with_nothing_to_escape_is_kept_as_it_is() -> None:
    text = '{"uri":"s3://out/A/1","note":"é \\n \\\\ \\u0001 😀"}'
    assert store_json(text) is text and read_json(text) is text
    assert escape_text("plain é") == "plain é"


@pytest.mark.parametrize("bad", ["a\x00b", "tab\there", "\ud800", "esc\x1b[0m", "\x85"])
def test_names_refuse_control_characters_and_lone_surrogates(bad: str) -> None:
    with pytest.raises(InvalidPayload, match="control character or a lone surrogate"):
        printable(bad, "watch id", InvalidPayload)
    with pytest.raises(InvalidPayload):
        printable_json({"ok": [1, {bad: "x"}]}, "origin", InvalidPayload)
    assert printable("ws:dag_c_1 é 😀", "watch id", InvalidPayload) == "ws:dag_c_1 é 😀"
