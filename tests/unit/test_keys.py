import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rill_executor import MAX_KEY_BYTES, InvalidKey, InvalidPayload, fingerprint_of
from rill_executor._keys import job_id, validate_key, validate_namespace


def test_job_ids_separate_namespaces_and_keys() -> None:
    assert job_id("a", "b:c") != job_id("a:b", "c")
    assert job_id("ns", "k") == job_id("ns", "k")
    assert len(job_id("ns", "k" * 500)) == 64


@given(st.text(min_size=1).filter(lambda s: s.isprintable()))
def test_printable_keys_within_the_limit_are_accepted(key: str) -> None:
    if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES or any(
        0xD800 <= ord(c) <= 0xDFFF for c in key
    ):
        with pytest.raises(InvalidKey):
            validate_key(key)
    else:
        assert validate_key(key) == key


def test_key_errors_say_what_is_wrong() -> None:
    with pytest.raises(InvalidKey, match="over the limit of 512"):
        validate_key("x" * 513)
    with pytest.raises(InvalidKey, match="not valid UTF-8"):
        validate_key(b"\xff")
    with pytest.raises(InvalidKey, match="control character"):
        validate_key("a\x07b")
    with pytest.raises(InvalidKey, match="empty"):
        validate_key("")
    with pytest.raises(InvalidKey, match="namespace"):
        validate_namespace("two words")


def test_fingerprints_are_canonical() -> None:
    assert fingerprint_of({"a": 1, "b": [1, 2]}) == fingerprint_of({"b": [1, 2], "a": 1})
    assert fingerprint_of({"a": 1}) != fingerprint_of({"a": 2})
    with pytest.raises(InvalidPayload, match="fingerprint="):
        fingerprint_of(object())


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_JSON)
def test_a_fingerprint_is_the_sha256_of_the_payloads_sorted_compact_json(payload: object) -> None:
    # Fingerprints are stored with every job: the definition must never drift, or a
    # retry after an upgrade would conflict with its own first attempt.
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert fingerprint_of(payload) == hashlib.sha256(text.encode()).hexdigest()


def test_a_fingerprint_is_stable_across_releases() -> None:
    assert fingerprint_of({"video": "A", "segment": 1, "tags": ["é", None, 1.5, True]}) == (
        hashlib.sha256('{"segment":1,"tags":["é",null,1.5,true],"video":"A"}'.encode()).hexdigest()
    )


def test_a_cyclic_payload_cannot_be_fingerprinted() -> None:
    payload: dict[str, object] = {}
    payload["self"] = payload
    with pytest.raises(InvalidPayload, match="Circular reference"):
        fingerprint_of(payload)
