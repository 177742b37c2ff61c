"""Java's hash iteration order, as the engine lists a foreach's groups.

The expected orders were printed by OpenJDK 17 running the engine's own chain of tables:
a ``ConcurrentHashMap`` of the group indexes ``"0"…"n-1"`` (``ForeachTaskRunner.doRun``), a
``HashSet`` of ``"__{foreach}_{index}"`` collected from its keys
(``DAGWalkHelper.buildSubTaskContextFieldNameInCurrentTask``), a ``HashMap`` of the group
contexts put in that order (``ContextDAO.buildContext``), read out by ``values()``.
"""

from __future__ import annotations

import pytest

from rill_executor.testing.rillflow._javaorder import foreach_group_order, java_string_hash


def test_string_hash_is_javas_over_utf16_code_units() -> None:
    # String.hashCode, as Integer.toUnsignedString prints it.
    assert [java_string_hash(s) for s in ("", "a", "__transcodeSegments_0", "é😀")] == [
        0,
        97,
        1893303782,
        1996812,
    ]


# As Java printed them, comma-separated.
JAVA_ORDERS = {
    ("transcodeSegments", 3): "2,1,0",
    ("shards", 3): "1,0,2",
    ("transcodeSegments", 12): "3,2,5,4,7,6,9,8,11,1,10,0",
    # 24 groups: the indexes' ConcurrentHashMap grew once, reversing some of its buckets.
    ("split", 24): "0,4,3,2,1,8,7,6,5,20,10,21,22,11,23,12,13,9,14,15,16,17,18,19",
    # 40 groups: the tables grew to 64 buckets on the way.
    ("transcodeSegments", 40): (
        "29,28,27,26,25,24,23,22,21,20,19,18,17,39,30,3,2,5,4,7,6,9,8,16,38,15,37,14,36,13,35,"
        "12,34,11,33,10,32,1,31,0"
    ),
    # 100 groups: two-digit indexes, whose hashes crowd into fewer buckets.
    ("x", 100): (
        "49,48,47,46,45,44,43,42,41,40,59,58,57,56,6,55,5,54,4,53,3,52,2,51,1,50,0,9,8,7,69,68,"
        "67,66,65,64,63,62,61,60,79,78,77,76,75,74,73,72,71,70,80,89,88,87,86,85,84,83,82,81,91,"
        "90,19,18,17,16,15,14,13,12,11,99,10,98,97,96,95,94,93,92,29,28,27,26,25,24,23,22,21,20,"
        "39,38,37,36,35,34,33,32,31,30"
    ),
}


@pytest.mark.parametrize(("foreach", "groups"), sorted(JAVA_ORDERS))
def test_a_foreachs_groups_come_in_javas_hash_order(foreach: str, groups: int) -> None:
    expected = [int(index) for index in JAVA_ORDERS[foreach, groups].split(",")]
    assert foreach_group_order(foreach, groups) == expected
