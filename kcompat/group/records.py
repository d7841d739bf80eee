"""``__consumer_offsets`` records in Kafka's format (kafka-specs/group-coordinator).

A key is an int16 key version followed by the key struct: versions 0 and 1 are an offset commit key
(group, topic, partition), 2 is a group metadata key (group); larger versions are the KIP-848 and
share-group record types, which a classic coordinator skips. A value is an int16 value version
followed by the value struct, or null for a tombstone.

Versions written, as Kafka 3.x (GroupCoordinatorRecordHelpers / GroupMetadataManager with a
metadata version >= 2.3): offset commit key v1; OffsetCommitValue v3, or v1 when the commit carries
an explicit expire timestamp (OffsetCommit v2-v4 retention_time_ms), because only v1 has that
field; group metadata key v2; GroupMetadataValue v3. The flexible v4 of both values is read but
never written (Kafka writes it only once a tagged field needs it).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kcompat.group import consumer_records as crec
from kcompat.group import share_group_records as srec
from kcompat.group import streams_records as strec
from kcompat.protocol.group_records.group_metadata_key import GroupMetadataKey
from kcompat.protocol.group_records.group_metadata_value import GroupMetadataValue
from kcompat.protocol.group_records.offset_commit_key import OffsetCommitKey
from kcompat.protocol.group_records.offset_commit_value import OffsetCommitValue
from kcompat.protocol.primitives import DecodeError

_I16 = struct.Struct(">h")

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3

NO_LEADER_EPOCH = -1
NO_TIMESTAMP = -1


class RecordFormatError(ValueError):
    """A ``__consumer_offsets`` key or value this coordinator cannot decode."""


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed offset (Kafka's OffsetAndMetadata). ``expire_timestamp`` is None unless the
    commit asked for its own retention (OffsetCommit v2-v4), the pre-KIP-211 expiry."""

    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    commit_timestamp: int = 0
    expire_timestamp: int | None = None


def _prefixed(version: int, struct_obj) -> bytes:
    out = bytearray(_I16.pack(version))
    struct_obj.write(out, version)
    return bytes(out)


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return _prefixed(OFFSET_COMMIT_KEY_VERSION, OffsetCommitKey(group=group, topic=topic, partition=partition))


def group_metadata_key(group: str) -> bytes:
    return _prefixed(GROUP_METADATA_KEY_VERSION, GroupMetadataKey(group=group))


def offset_commit_value(om: OffsetAndMetadata) -> bytes:
    version = OFFSET_COMMIT_VALUE_VERSION if om.expire_timestamp is None else OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE
    value = OffsetCommitValue(offset=om.offset, leader_epoch=om.leader_epoch, metadata=om.metadata,
                              commit_timestamp=om.commit_timestamp,
                              expire_timestamp=NO_TIMESTAMP if om.expire_timestamp is None else om.expire_timestamp)
    return _prefixed(version, value)


def group_metadata_value(value: GroupMetadataValue) -> bytes:
    return _prefixed(GROUP_METADATA_VALUE_VERSION, value)


def _read_version(data: bytes) -> tuple[memoryview, int]:
    if data is None or len(data) < 2:
        raise RecordFormatError("record shorter than its version prefix")
    buf = memoryview(data)
    return buf, _I16.unpack_from(buf, 0)[0]


def _read_struct(cls, buf: memoryview, version: int):
    try:
        obj, end = cls.read(buf, 2, version)
    except (DecodeError, struct.error, IndexError, ValueError) as e:
        raise RecordFormatError(f"bad {cls.__name__} v{version}: {e}") from e
    if end != len(buf):
        raise RecordFormatError(f"{len(buf) - end} trailing bytes after {cls.__name__} v{version}")
    return obj


def parse_key(key: bytes):
    """The decoded key: :class:`OffsetKey`, :class:`GroupKey`, a
    :class:`kcompat.group.consumer_records.ConsumerKey` for KIP-848 consumer group records (types
    3-8, 16), a :class:`kcompat.group.share_group_records.ShareKey` for KIP-932 share group records
    (types 9-15), a :class:`kcompat.group.streams_records.StreamsKey` for KIP-1071 streams group
    records (types 17, 19-23); None for other record types."""
    buf, version = _read_version(key)
    if version in (0, 1):
        k = _read_struct(OffsetCommitKey, buf, version)
        return OffsetKey(k.group, k.topic, k.partition)
    if version == 2:
        return GroupKey(_read_struct(GroupMetadataKey, buf, version).group)
    if version < 0:
        raise RecordFormatError(f"negative key version {version}")
    if version in crec.CONSUMER_RECORD_TYPES:
        try:
            return crec.parse_key(version, key)
        except crec.ConsumerRecordError as e:
            raise RecordFormatError(str(e)) from e
    for module, types in ((srec, srec.SHARE_RECORD_TYPES), (strec, strec.STREAMS_RECORD_TYPES)):
        if version in types:
            try:
                return module.parse_key(version, key)
            except crec.ConsumerRecordError as e:
                raise RecordFormatError(str(e)) from e
    return None


def parse_offset_value(value: bytes) -> OffsetAndMetadata:
    buf, version = _read_version(value)
    lo, hi = OffsetCommitValue.VALID_VERSIONS
    if not lo <= version <= hi:
        raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
    v = _read_struct(OffsetCommitValue, buf, version)
    return OffsetAndMetadata(offset=v.offset, leader_epoch=v.leader_epoch, metadata=v.metadata or "",
                             commit_timestamp=v.commit_timestamp,
                             expire_timestamp=v.expire_timestamp if version == 1 else None)


def parse_group_value(value: bytes) -> GroupMetadataValue:
    buf, version = _read_version(value)
    lo, hi = GroupMetadataValue.VALID_VERSIONS
    if not lo <= version <= hi:
        raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
    return _read_struct(GroupMetadataValue, buf, version)
