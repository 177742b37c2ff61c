"""The conformance kit's groups, and a store's opt-out of a group or a test with a reason."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from rill_executor.testing import StoreConformance
from rill_executor.testing.conformance import GROUPS

NAMES = ("claims", "replay", "history", "outbox", "outputs", "purge", "resolution")


def _tests(cls: type) -> set[str]:
    return {name for name in dir(cls) if name.startswith("test_")}


def _skip_reason(test: Any) -> str | None:
    marks = [m for m in getattr(test, "pytestmark", []) if m.name == "skip"]
    return marks[0].kwargs["reason"] if marks else None


def test_the_groups_partition_the_kit() -> None:
    assert tuple(GROUPS) == (*NAMES, "races", "leases", "hostile")
    owned = [name for group in GROUPS.values() for name in vars(group) if name.startswith("test_")]
    assert len(owned) == len(set(owned)), "a test in two groups"
    assert set(owned) == _tests(StoreConformance), "a test in no group"


def test_a_group_or_a_test_opted_out_is_skipped_with_its_reason_for_that_store_only() -> None:
    class TestOneProcess(StoreConformance):
        skip_groups: ClassVar = {"races": "one process only"}
        skip_tests: ClassVar = {"test_ping_answers": "no ping"}

    races = {name for name in vars(GROUPS["races"]) if name.startswith("test_")}
    reasons = {name: _skip_reason(getattr(TestOneProcess, name)) for name in _tests(TestOneProcess)}
    skipped = {name for name, reason in reasons.items() if reason}
    assert skipped == races | {"test_ping_answers"}
    assert {_skip_reason(getattr(TestOneProcess, name)) for name in races} == {"one process only"}
    assert _skip_reason(TestOneProcess.test_ping_answers) == "no ping"
    herd: Any = TestOneProcess.test_simultaneous_claims_grant_one_owner
    assert [m.name for m in herd.pytestmark] == ["parametrize", "skip"]  # its own marks kept

    class TestEverything(StoreConformance):
        pass

    assert not any(_skip_reason(getattr(TestEverything, name)) for name in _tests(TestEverything))


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"skip_groups": {"race": "r"}}, "skip_groups: the kit has no group 'race'; its groups"),
        ({"skip_tests": {"test_pign_answers": "r"}}, "no test 'test_pign_answers'"),
        ({"skip_tests": {"test_ping_answers": " "}}, "give the reason"),
        ({"skip_groups": ["races"]}, "must map a group name to a reason"),
        ({"test_ping_answers": None}, "sets test_ping_answers to None: name it in skip_tests"),
    ],
)
def test_an_opt_out_the_kit_cannot_apply_is_an_error_where_the_class_is_defined(
    setting: dict[str, Any], message: str
) -> None:
    with pytest.raises(TypeError, match=message.replace("(", r"\(")):
        type("TestBroken", (StoreConformance,), setting)
