"""Java's hash iteration order, as the engine's foreach output comes in.

The engine gathers a foreach's group contexts through hash tables: the group indexes are the
keys of a ``ConcurrentHashMap`` (``ForeachTaskRunner.doRun``), the context fields
``__{foreach}_{index}`` a ``HashSet`` built from them
(``DAGWalkHelper.buildSubTaskContextFieldNameInCurrentTask``), and the group contexts the
values of a ``HashMap`` (``ContextDAO.buildContext``), read out in its iteration order
(``ContextHelper.getSubContextList``). So ``sub_context`` is in Java's hash order, not in
index order. This module reproduces those tables: ``String.hashCode``, the bucket index,
table resizing and how each table keeps the entries of one bucket.

Not reproduced: a ``HashMap`` bucket that becomes a red-black tree (9 or more keys in one
bucket of a table of 64 buckets or more) orders new keys by the tree; its keys are kept in
insertion order here.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["foreach_group_order", "hash_map_order", "java_string_hash"]

_MASK = 0xFFFFFFFF
_TREEIFY = 8  # TREEIFY_THRESHOLD of HashMap and ConcurrentHashMap
_MIN_TREEIFY_CAPACITY = 64


def java_string_hash(text: str) -> int:
    """``String.hashCode`` over UTF-16 code units, as an unsigned 32-bit value."""
    data = text.encode("utf-16-be")
    value = 0
    for position in range(0, len(data), 2):
        value = (31 * value + (data[position] << 8 | data[position + 1])) & _MASK
    return value


def _spread(value: int) -> int:
    return value ^ (value >> 16)


def hash_map_order(keys: Iterable[str]) -> list[str]:
    """The iteration order of a ``java.util.HashMap`` (or ``HashSet``) after putting ``keys``.

    ``HashMap.putVal``: a new key goes to the tail of its bucket; a bucket reaching 9 keys
    in a table under 64 buckets, or a size over 3/4 of the table, doubles the table, and
    ``resize`` splits every bucket into two keeping the keys' relative order.
    """
    table: list[list[str]] = [[] for _ in range(16)]
    size = 0
    for key in keys:
        bucket = table[_spread(java_string_hash(key)) & (len(table) - 1)]
        if key in bucket:
            continue
        bucket.append(key)
        if len(bucket) > _TREEIFY and len(table) < _MIN_TREEIFY_CAPACITY:
            table = _resize(table)
        size += 1
        if size > len(table) * 3 // 4:
            table = _resize(table)
    return [key for bucket in table for key in bucket]


def _resize(table: list[list[str]]) -> list[list[str]]:
    grown: list[list[str]] = [[] for _ in range(2 * len(table))]
    for bucket in table:
        for key in bucket:
            grown[_spread(java_string_hash(key)) & (len(grown) - 1)].append(key)
    return grown


def concurrent_hash_map_order(keys: Iterable[str]) -> list[str]:
    """The iteration order of a ``java.util.concurrent.ConcurrentHashMap`` after putting ``keys``.

    As ``HashMap`` but: the table doubles once the size reaches 3/4 of it (``addCount``),
    and ``transfer`` moves a bucket by putting the keys before its last run of keys bound
    for one half in front of that half's list, one by one, so they come out reversed.
    """
    table: list[list[str]] = [[] for _ in range(16)]
    size = 0
    for key in keys:
        bucket = table[_spread(java_string_hash(key)) & (len(table) - 1)]
        if key in bucket:
            continue
        bucket.append(key)
        if len(bucket) > _TREEIFY and len(table) < _MIN_TREEIFY_CAPACITY:
            # treeifyBin → tryPresize(2n): grow until 3/4 of the table reaches 4n's table size.
            wanted = 1 << (3 * len(table) + 1 - 1).bit_length()
            while wanted > len(table) * 3 // 4:
                table = _transfer(table)
        size += 1
        while size >= len(table) * 3 // 4:
            table = _transfer(table)
    return [key for bucket in table for key in bucket]


def _transfer(table: list[list[str]]) -> list[list[str]]:
    length = len(table)
    grown: list[list[str]] = [[] for _ in range(2 * length)]
    for index, bucket in enumerate(table):
        if not bucket:
            continue
        # The hash bit that picks the half: the same index, or the index plus the old length.
        bits = [_spread(java_string_hash(key)) & length for key in bucket]
        last_run = len(bucket) - 1
        while last_run > 0 and bits[last_run - 1] == bits[last_run]:
            last_run -= 1
        halves: tuple[list[str], list[str]] = ([], [])
        halves[bits[last_run] != 0].extend(bucket[last_run:])
        for key, bit in zip(bucket[:last_run], bits[:last_run], strict=True):
            halves[bit != 0].insert(0, key)
        grown[index], grown[index + length] = halves
    return grown


def foreach_group_order(foreach: str, groups: int) -> list[int]:
    """The group indexes of a foreach's ``sub_context``, in the order the engine lists them."""
    indexes = concurrent_hash_map_order(str(index) for index in range(groups))
    fields = hash_map_order(f"__{foreach}_{index}" for index in indexes)
    return [int(field.rsplit("_", 1)[1]) for field in hash_map_order(fields)]
