"""__consumer_offsets record formats (byte for byte as Kafka writes them) and the group -> partition
mapping (Java's String.hashCode)."""

from __future__ import annotations

import struct

import pytest

from kcompat.group.streams_records import StreamsKey
from kcompat.group.consumer_records import ConsumerKey
from kcompat.group.share_group_records import ShareKey
from hypothesis import given
from hypothesis import strategies as st

from kcompat.group import partition_for
from kcompat.group.coordinator import java_string_hash, java_string_length
from kcompat.group.records import (
    GroupKey, OffsetAndMetadata, OffsetKey, RecordFormatError, group_metadata_key, group_metadata_value,
    offset_commit_key, offset_commit_value, parse_group_value, parse_key, parse_offset_value,
)
from kcompat.protocol.group_records.group_metadata_value import GroupMetadataValue
from kcompat.protocol.group_records.offset_commit_value import OffsetCommitValue


def s16(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def b32(b: bytes) -> bytes:
    return struct.pack(">i", len(b)) + b


def test_offset_commit_key_bytes():
    expected = struct.pack(">h", 1) + s16("grp") + s16("topic") + struct.pack(">i", 7)
    assert offset_commit_key("grp", "topic", 7) == expected


def test_group_metadata_key_bytes():
    assert group_metadata_key("grp") == struct.pack(">h", 2) + s16("grp")


def test_offset_commit_value_v3_bytes():
    om = OffsetAndMetadata(offset=42, leader_epoch=5, metadata="meta", commit_timestamp=1234)
    assert offset_commit_value(om) == (struct.pack(">hqi", 3, 42, 5) + s16("meta") + struct.pack(">q", 1234))


def test_offset_commit_value_with_expire_timestamp_is_v1():
    om = OffsetAndMetadata(offset=42, leader_epoch=5, metadata="", commit_timestamp=1234, expire_timestamp=9999)
    # v1 has no leader epoch: Kafka drops it there too
    assert offset_commit_value(om) == struct.pack(">hq", 1, 42) + s16("") + struct.pack(">qq", 1234, 9999)
    back = parse_offset_value(offset_commit_value(om))
    assert back == OffsetAndMetadata(42, -1, "", 1234, 9999)


def test_group_metadata_value_v3_bytes():
    value = GroupMetadataValue(protocol_type="consumer", generation=3, protocol="range", leader="m1",
                               current_state_timestamp=777, members=[GroupMetadataValue.MemberMetadata(
                                   member_id="m1", group_instance_id="i1", client_id="cid", client_host="/1.2.3.4",
                                   rebalance_timeout=300000, session_timeout=45000, subscription=b"SUB",
                                   assignment=b"ASG")])
    expected = (struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 3) + s16("range") + s16("m1")
                + struct.pack(">q", 777) + struct.pack(">i", 1)
                + s16("m1") + s16("i1") + s16("cid") + s16("/1.2.3.4") + struct.pack(">ii", 300000, 45000)
                + b32(b"SUB") + b32(b"ASG"))
    assert group_metadata_value(value) == expected
    assert parse_group_value(expected) == value


def test_empty_group_metadata_value_has_null_protocol_and_leader():
    value = GroupMetadataValue(protocol_type="consumer", generation=4, protocol=None, leader=None,
                               current_state_timestamp=5, members=[])
    data = group_metadata_value(value)
    assert data == (struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 4) + s16(None) + s16(None)
                    + struct.pack(">qi", 5, 0))
    back = parse_group_value(data)
    assert back.protocol is None and back.leader is None and back.members == []


@pytest.mark.parametrize("version", range(0, 5))
def test_every_offset_commit_value_version_is_read(version):
    v = OffsetCommitValue(offset=9, leader_epoch=2, metadata="x", commit_timestamp=11, expire_timestamp=22)
    out = bytearray(struct.pack(">h", version))
    v.write(out, version)
    om = parse_offset_value(bytes(out))
    assert om.offset == 9 and om.metadata == "x" and om.commit_timestamp == 11
    assert om.leader_epoch == (2 if version >= 3 else -1)
    assert om.expire_timestamp == (22 if version == 1 else None)


@pytest.mark.parametrize("version", range(0, 5))
def test_every_group_metadata_value_version_is_read(version):
    v = GroupMetadataValue(protocol_type="consumer", generation=1, protocol="range", leader="m",
                           current_state_timestamp=5, members=[GroupMetadataValue.MemberMetadata(
                               member_id="m", group_instance_id="i", client_id="c", client_host="h",
                               rebalance_timeout=7, session_timeout=6, subscription=b"s", assignment=b"a")])
    out = bytearray(struct.pack(">h", version))
    v.write(out, version)
    back = parse_group_value(bytes(out))
    assert back.generation == 1 and back.members[0].member_id == "m" and back.members[0].assignment == b"a"


def test_keys_parse_and_other_record_types_are_skipped():
    assert parse_key(offset_commit_key("g", "t", 1)) == OffsetKey("g", "t", 1)
    assert parse_key(struct.pack(">h", 0) + s16("g") + s16("t") + struct.pack(">i", 1)) == OffsetKey("g", "t", 1)
    assert parse_key(group_metadata_key("g")) == GroupKey("g")
    assert parse_key(struct.pack(">h", 3) + s16("g")) == ConsumerKey(3, "g")  # a KIP-848 consumer group record
    assert parse_key(struct.pack(">h", 11) + s16("g")) == ShareKey(11, "g")  # a KIP-932 share group record
    assert parse_key(struct.pack(">h", 17) + s16("g")) == StreamsKey(17, "g")  # a KIP-1071 streams group record
    assert parse_key(struct.pack(">h", 18) + s16("g")) is None  # type 18 (never written by Kafka 4.3.1): skipped
    for bad in (b"", b"\x00", struct.pack(">h", 1) + b"\x00\x05ab", struct.pack(">h", 2) + s16("g") + b"x"):
        with pytest.raises(RecordFormatError):
            parse_key(bad)
    with pytest.raises(RecordFormatError):
        parse_offset_value(struct.pack(">h", 9) + b"\x00" * 20)


@given(st.builds(OffsetAndMetadata, st.integers(-1, 2**63 - 1), st.integers(-1, 2**31 - 1), st.text(max_size=50),
                 st.integers(0, 2**62)))
def test_offset_value_round_trip(om):
    assert parse_offset_value(offset_commit_value(om)) == om


# ---------------------------------------------------------------------------------------------
# group -> partition
# ---------------------------------------------------------------------------------------------

def java_hash_reference(s: str) -> int:
    """String.hashCode written out independently: code points -> UTF-16 units, int32 arithmetic."""
    units = []
    for ch in s:
        cp = ord(ch)
        if cp >= 0x10000:
            cp -= 0x10000
            units += [0xD800 | (cp >> 10), 0xDC00 | (cp & 0x3FF)]
        else:
            units.append(cp)
    h = 0
    for u in units:
        h = (h * 31 + u) % 2**32
    return h - 2**32 if h >= 2**31 else h


def kafka_partition(s: str, n: int) -> int:
    h = java_hash_reference(s)
    return (0 if h == -2**31 else abs(h)) % n


KNOWN = {
    "": 0,
    "a": 97,
    "abc": 96354,
    "my-group": java_hash_reference("my-group"),
    "polygenelubricants": -2**31,  # famous String whose hashCode is Integer.MIN_VALUE
    "\U0001F600grp": java_hash_reference("\U0001F600grp"),  # non-BMP: two UTF-16 units
}


@pytest.mark.parametrize("group_id", list(KNOWN))
def test_java_hash_code(group_id):
    assert java_string_hash(group_id) == KNOWN[group_id] == java_hash_reference(group_id)


def test_non_bmp_character_counts_as_a_surrogate_pair():
    # U+1F600 is D83D DE00 in UTF-16: 31 * 0xD83D + 0xDE00
    assert java_string_hash("\U0001F600") == 31 * 0xD83D + 0xDE00
    assert java_string_length("\U0001F600") == 2 and java_string_length("ab") == 2


def test_partition_for_known_values():
    assert partition_for("", 50) == 0
    assert partition_for("a", 50) == 97 % 50
    assert partition_for("abc", 50) == 96354 % 50
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(Integer.MIN_VALUE) == 0
    neg = next(s for s in (f"group-{i}" for i in range(1000)) if java_hash_reference(s) < 0)
    assert partition_for(neg, 50) == abs(java_hash_reference(neg)) % 50


@given(st.text(max_size=30), st.integers(1, 200))
def test_partition_for_matches_reference(group_id, n):
    assert partition_for(group_id, n) == kafka_partition(group_id, n)
