"""Java's String.hashCode and length, which place a group or a transactional id on a partition of
its coordinator's internal topic exactly as Kafka does (``Utils.abs(id.hashCode) % partitions``)."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=8192)
def java_string_hash(s: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, as a signed int32."""
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_string_length(s: str) -> int:
    """Java's String.length(): UTF-16 code units."""
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def java_hash_order(names, table_size: int = 16) -> list[str]:
    """``names`` in the order a ``java.util.HashMap`` / ``HashSet`` / ``ConcurrentHashMap`` with
    ``table_size`` slots (a power of two) iterates them: by bucket ``(h ^ (h >>> 16)) & (size - 1)``
    of the String hash. Names sharing a bucket keep their order in ``names`` (Java's insertion
    order, as long as the table was not resized since: a resize may reorder a bucket's chain)."""
    def bucket(n: str) -> int:
        h = java_string_hash(n) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (table_size - 1)
    return sorted(dict.fromkeys(names), key=bucket)


def hash_set_copy_table_size(count: int) -> int:
    """Slots of ``new HashSet<>(collection of count)``: ``tableSizeFor(max(count / .75f + 1, 16))``."""
    want = max(int(count / 0.75) + 1, 16)
    return 1 << (want - 1).bit_length()


def concurrent_map_table_size(count: int) -> int:
    """Slots of a default ``ConcurrentHashMap`` after ``count`` puts: it doubles from 16 once the
    count reaches three quarters of the table."""
    size = 16
    while count >= size - (size >> 2):
        size *= 2
    return size
