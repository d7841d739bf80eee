"""Negative lengths and counts below -1 decode as null, as Kafka's generated readers do.

Kafka's generated ``read`` methods test ``length < 0`` (not ``== -1``): a nullable field with any
negative length or count is null, a non-nullable one is refused. The conformance suite found the
difference with a Metadata v1 request whose topics count is -7: Kafka answers it (null topics = all
topics), so kcompat must too.
"""

from __future__ import annotations

import struct

import pytest

from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.protocol.messages.produce import ProduceRequest
from kcompat.protocol.primitives import DecodeError, r_count, r_nbytes, r_nrecords, r_nstr, r_str


@pytest.mark.parametrize("count", [-1, -2, -7, -(2 ** 31)])
def test_nullable_array_with_any_negative_count_is_null(count):
    req, end = MetadataRequest.read(memoryview(struct.pack(">i", count)), 0, 1)
    assert req.topics is None and end == 4
    assert r_count(struct.pack(">i", count), 0) == (-1, 4)


def test_non_nullable_array_with_a_negative_count_is_refused():
    # Produce v3: transactional_id (null), acks, timeout, then topic_data with count -5
    body = struct.pack(">hhi", -1, 1, 1000) + struct.pack(">i", -5)
    with pytest.raises(DecodeError):
        ProduceRequest.read(memoryview(body), 0, 3)


@pytest.mark.parametrize("length", [-1, -2, -32768])
def test_nullable_string_with_any_negative_length_is_null(length):
    assert r_nstr(struct.pack(">h", length), 0) == (None, 2)
    with pytest.raises(DecodeError):
        r_str(struct.pack(">h", length), 0)


@pytest.mark.parametrize("length", [-1, -3, -(2 ** 31)])
def test_nullable_bytes_and_records_with_any_negative_length_are_null(length):
    assert r_nbytes(struct.pack(">i", length), 0) == (None, 4)
    assert r_nrecords(struct.pack(">i", length), 0) == (None, 4)


def test_a_positive_length_beyond_the_buffer_is_still_refused():
    with pytest.raises(DecodeError):
        r_count(struct.pack(">i", 1000), 0)
    with pytest.raises(DecodeError):
        r_nstr(struct.pack(">h", 30000) + b"abc", 0)
