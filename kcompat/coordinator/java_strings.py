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
