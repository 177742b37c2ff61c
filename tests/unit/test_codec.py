"""A result is stored as the JSON of its annotated type, whatever the handler returned."""

from __future__ import annotations

from typing import Any

import pytest

from rill_executor import Ledger

CASES = [
    (int, 5, 5),
    (int, "5", 5),  # validated as the annotation first
    (int, True, 1),
    (float, 3, 3.0),
    (bool, 1, True),
    (str, "x", "x"),
    (Any, {"a": [1, "b"]}, {"a": [1, "b"]}),
    (dict[str, Any], {"a": 1}, {"a": 1}),
    (dict[str, int], {"a": "5"}, {"a": 5}),
    (list[Any], [1, "x"], [1, "x"]),
    (list[int], ["5"], [5]),
]


@pytest.mark.parametrize(("annotation", "returned", "replayed"), CASES)
def test_a_result_replays_as_its_annotation(
    annotation: Any, returned: object, replayed: object
) -> None:
    ledger = Ledger("memory://", namespace="codec")

    def handler(x: int) -> Any:
        return returned

    handler.__annotations__["return"] = annotation
    decorated = ledger.idempotent(name="handler", key=str)(handler)
    first = decorated(1)
    status = ledger.status("1", handler=decorated)
    assert status is not None
    stored = status.result  # the stored JSON, decoded without the annotation
    assert type(stored) is type(replayed) and stored == replayed
    assert type(first) is type(returned)  # the caller gets what the handler returned
    assert decorated(1) == replayed
