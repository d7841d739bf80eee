"""Java's hash-table iteration orders (:func:`kcompat.coordinator.java_strings.java_hash_order`),
checked against what OpenJDK 17 printed for the same keys: a ``ConcurrentHashMap`` filled by
``put`` (Kafka's ``Pool``, e.g. the transactional ids of a ``__transaction_state`` partition) and a
``HashSet`` copied from a collection (``DynamicBrokerConfig``'s refused keys)."""

from __future__ import annotations

import pytest

from kcompat.coordinator.java_strings import concurrent_map_table_size, hash_set_copy_table_size, java_hash_order

# "txn-" + (i * 7919 % 1000) for i in 0..29, in insertion order
KEYS = [f"txn-{i * 7919 % 1000}" for i in range(30)]
# keySet() of each, as OpenJDK 17 iterated it
JAVA = {
    ("chm", 11): "txn-838,txn-271,txn-919,txn-595,txn-352,txn-0,txn-676,txn-433,txn-757,txn-514,txn-190",
    ("hashset", 12): "txn-838,txn-919,txn-676,txn-433,txn-109,txn-757,txn-514,txn-271,txn-595,txn-352,txn-0,txn-190",
    ("chm", 13): "txn-838,txn-919,txn-676,txn-433,txn-109,txn-757,txn-514,txn-271,txn-595,txn-352,txn-28,txn-0,"
                 "txn-190",
    ("chm", 30): "txn-838,txn-919,txn-732,txn-676,txn-137,txn-433,txn-894,txn-813,txn-757,txn-218,txn-514,txn-975,"
                 "txn-271,txn-299,txn-651,txn-595,txn-352,txn-0,txn-56,txn-190,txn-947,txn-704,txn-785,txn-542,"
                 "txn-109,txn-866,txn-623,txn-380,txn-28,txn-461",
}


@pytest.mark.parametrize("kind,count", sorted(JAVA))
def test_iteration_order_is_javas(kind, count):
    keys = KEYS[:count]
    size = concurrent_map_table_size(count) if kind == "chm" else hash_set_copy_table_size(count)
    assert ",".join(java_hash_order(keys, size)) == JAVA[kind, count]


def test_table_sizes():
    # ConcurrentHashMap doubles when the count reaches 3/4 of the table; a HashSet copy sizes for count/.75 + 1
    assert [concurrent_map_table_size(n) for n in (0, 11, 12, 23, 24)] == [16, 16, 32, 32, 64]
    assert [hash_set_copy_table_size(n) for n in (0, 11, 12, 24, 25)] == [16, 16, 32, 64, 64]
