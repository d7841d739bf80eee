"""Kafka's ``Utils.murmur2`` hash, used by its default partitioner and by the remote log
metadata partitioner (KIP-405)."""

from __future__ import annotations

import struct


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (32-bit MurmurHash2, seed 0x9747b28c) as a signed Java int."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    n4 = length // 4
    for k in struct.unpack_from(f"<{n4}I", data) if n4 else ():
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = length & ~3
    rest = length % 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h
