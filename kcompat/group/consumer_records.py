"""``__consumer_offsets`` records of KIP-848 consumer groups, in Kafka 4.3's formats
(kafka-specs-4.3.1/group-coordinator, ``GroupCoordinatorRecordHelpers``).

A key is an int16 *record type* followed by the key struct (Kafka 4 writes the record type where
Kafka 3 wrote a key version), a value an int16 value version (0) followed by the value struct, or
null for a tombstone:

==== ============================================== =============================================
type key (group id, ...)                            value
==== ============================================== =============================================
3    ConsumerGroupMetadataKey                       ConsumerGroupMetadataValue: group epoch,
                                                    metadata hash of the subscribed topics
5    ConsumerGroupMemberMetadataKey (+ member id)    ConsumerGroupMemberMetadataValue
6    ConsumerGroupTargetAssignmentMetadataKey       ConsumerGroupTargetAssignmentMetadataValue
7    ConsumerGroupTargetAssignmentMemberKey (+ id)  ConsumerGroupTargetAssignmentMemberValue
8    ConsumerGroupCurrentMemberAssignmentKey (+ id) ConsumerGroupCurrentMemberAssignmentValue
16   ConsumerGroupRegularExpressionKey (+ regex)    ConsumerGroupRegularExpressionValue
==== ============================================== =============================================

Type 4 (ConsumerGroupPartitionMetadata) is read and skipped: Kafka 4.1+ keeps the metadata hash
in the group metadata value instead (KIP-1101) and so does kcompat. Assignments are
``{topic id (uuid.UUID): frozenset of partitions}``; a member's current assignment also carries
the epoch each partition was assigned at (KIP-1251, Kafka 4.3: AssignmentEpochs).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from kcompat.protocol.group_records.consumer_group_current_member_assignment_key import (
    ConsumerGroupCurrentMemberAssignmentKey as CurrentKey)
from kcompat.protocol.group_records.consumer_group_current_member_assignment_value import (
    ConsumerGroupCurrentMemberAssignmentValue as CurrentValue)
from kcompat.protocol.group_records.consumer_group_member_metadata_key import (
    ConsumerGroupMemberMetadataKey as MemberKey)
from kcompat.protocol.group_records.consumer_group_member_metadata_value import (
    ConsumerGroupMemberMetadataValue as MemberValue)
from kcompat.protocol.group_records.consumer_group_metadata_key import ConsumerGroupMetadataKey as MetadataKey
from kcompat.protocol.group_records.consumer_group_metadata_value import ConsumerGroupMetadataValue as MetadataValue
from kcompat.protocol.group_records.consumer_group_regular_expression_key import (
    ConsumerGroupRegularExpressionKey as RegexKey)
from kcompat.protocol.group_records.consumer_group_regular_expression_value import (
    ConsumerGroupRegularExpressionValue as RegexValue)
from kcompat.protocol.group_records.consumer_group_target_assignment_member_key import (
    ConsumerGroupTargetAssignmentMemberKey as TargetMemberKey)
from kcompat.protocol.group_records.consumer_group_target_assignment_member_value import (
    ConsumerGroupTargetAssignmentMemberValue as TargetMemberValue)
from kcompat.protocol.group_records.consumer_group_target_assignment_metadata_key import (
    ConsumerGroupTargetAssignmentMetadataKey as TargetMetadataKey)
from kcompat.protocol.group_records.consumer_group_target_assignment_metadata_value import (
    ConsumerGroupTargetAssignmentMetadataValue as TargetMetadataValue)
from kcompat.protocol.primitives import DecodeError

GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, REGULAR_EXPRESSION = 6, 7, 8, 16
CONSUMER_RECORD_TYPES = frozenset({GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA, TARGET_METADATA,
                                   TARGET_MEMBER, CURRENT_ASSIGNMENT, REGULAR_EXPRESSION})

_I16 = struct.Struct(">h")
_KEYS = {GROUP_METADATA: MetadataKey, PARTITION_METADATA: MetadataKey, MEMBER_METADATA: MemberKey,
         TARGET_METADATA: TargetMetadataKey, TARGET_MEMBER: TargetMemberKey, CURRENT_ASSIGNMENT: CurrentKey,
         REGULAR_EXPRESSION: RegexKey}
_VALUES = {GROUP_METADATA: MetadataValue, MEMBER_METADATA: MemberValue, TARGET_METADATA: TargetMetadataValue,
           TARGET_MEMBER: TargetMemberValue, CURRENT_ASSIGNMENT: CurrentValue, REGULAR_EXPRESSION: RegexValue}

Assignment = dict[uuid.UUID, frozenset[int]]
# {(topic id, partition): the epoch it was assigned to the member at} (KIP-1251)
AssignmentEpochs = dict[tuple[uuid.UUID, int], int]


class ConsumerRecordError(ValueError):
    """A KIP-848 record that cannot be decoded."""


@dataclass(frozen=True)
class ConsumerKey:
    """A decoded KIP-848 key: ``record_type`` (3-8, 16), the group, and the member id (types 5, 7,
    8) or the regular expression (type 16) in ``sub``."""

    record_type: int
    group: str
    sub: str | None = None


def _prefixed(version: int, obj) -> bytes:
    out = bytearray(_I16.pack(version))
    obj.write(out, 0)
    return bytes(out)


def key(record_type: int, group_id: str, sub: str | None = None) -> bytes:
    """The key bytes of a record of ``record_type`` for ``group_id`` (and member id / regex)."""
    cls = _KEYS[record_type]
    if record_type == REGULAR_EXPRESSION:
        obj = cls(group_id=group_id, regular_expression=sub)
    elif sub is not None:
        obj = cls(group_id=group_id, member_id=sub)
    else:
        obj = cls(group_id=group_id)
    return _prefixed(record_type, obj)


def parse_key(record_type: int, data: bytes) -> ConsumerKey:
    """Decode a key whose type prefix is ``record_type`` (one of :data:`CONSUMER_RECORD_TYPES`)."""
    k = _read(_KEYS[record_type], data)
    sub = getattr(k, "member_id", None) if record_type != REGULAR_EXPRESSION else k.regular_expression
    return ConsumerKey(record_type, k.group_id, sub)


def parse_value(record_type: int, data: bytes):
    """The value struct of a record of ``record_type`` (None for type 4, which is skipped)."""
    cls = _VALUES.get(record_type)
    return None if cls is None else _read(cls, data)


@dataclass(frozen=True)
class GroupRecordKey:
    """A decoded share or streams group key: ``record_type``, the group, and the member id of the
    per-member record types in ``sub`` (None for the others)."""

    record_type: int
    group: str
    sub: str | None = None


def key_codec(keys: dict, member_types, key_cls):
    """``(key, parse_key)`` of a share or streams group's records: ``key(record_type, group_id,
    member_id=None) -> bytes`` (``keys[record_type]`` with the group id, and the member id for the
    types in ``member_types``) and ``parse_key(record_type, data) -> key_cls`` (raises
    :class:`ConsumerRecordError` for bytes that are not such a key)."""
    def key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
        cls = keys[record_type]
        obj = cls(group_id=group_id, member_id=member_id) if record_type in member_types else cls(group_id=group_id)
        return _prefixed(record_type, obj)

    def parse_key(record_type: int, data: bytes):
        k = _read(keys[record_type], data)
        return key_cls(record_type, k.group_id, k.member_id if record_type in member_types else None)
    return key, parse_key


def _read(cls, data: bytes):
    if data is None or len(data) < 2:
        raise ConsumerRecordError(f"{cls.__name__}: shorter than its version prefix")
    buf = memoryview(data)
    try:
        obj, end = cls.read(buf, 2, 0)
    except (DecodeError, struct.error, IndexError, ValueError) as e:
        raise ConsumerRecordError(f"bad {cls.__name__}: {e}") from e
    if end != len(buf):
        raise ConsumerRecordError(f"{len(buf) - end} trailing bytes after {cls.__name__}")
    return obj


def topic_partitions(cls, assignment: Assignment) -> list:
    """``[cls(topic_id, partitions)]`` of ``assignment``, sorted, without empty topics."""
    return [cls(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(assignment.items(), key=lambda i: str(i[0]))
            if ps]


def topic_partitions_with_epochs(cls, assignment: Assignment, epochs: AssignmentEpochs) -> list:
    """``[cls(topic_id, partitions, assignment_epochs)]`` of ``assignment`` with the epoch each
    partition was assigned at (``epochs``; KIP-1251's AssignmentEpochs, one per partition, in
    the same order), sorted, without empty topics."""
    out = topic_partitions(cls, assignment)
    for tp in out:
        tp.assignment_epochs = [epochs[(tp.topic_id, p)] for p in tp.partitions]
    return out


def to_assignment_epochs(topic_partitions, default_epoch: int) -> AssignmentEpochs:
    """The ``{(topic id, partition): assignment epoch}`` of ConsumerGroupCurrentMemberAssignmentValue
    topic partitions (Kafka's ``Utils.assignmentFromTopicPartitions``): a topic whose
    AssignmentEpochs is missing (written before KIP-1251) or not one per partition gets
    ``default_epoch`` (the record's member epoch, at least 0) for each partition."""
    default_epoch = max(default_epoch, 0)
    out: dict[tuple[uuid.UUID, int], int] = {}
    for tp in topic_partitions or ():
        epochs = tp.assignment_epochs
        if epochs is None or len(epochs) != len(tp.partitions):
            epochs = [default_epoch] * len(tp.partitions)
        for p, epoch in zip(tp.partitions, epochs):
            out[(tp.topic_id, p)] = epoch
    return out


def to_assignment(topic_partitions) -> Assignment:
    """``[TopicPartitions(topic_id, partitions)]`` of any of the records or requests -> Assignment."""
    out: dict[uuid.UUID, frozenset[int]] = {}
    for tp in topic_partitions or ():
        out[tp.topic_id] = out.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return out


def group_metadata_value(epoch: int, metadata_hash: int) -> bytes:
    return _prefixed(0, MetadataValue(epoch=epoch, metadata_hash=metadata_hash))


def member_metadata_value(*, instance_id: str | None, rack_id: str | None, client_id: str, client_host: str,
                          subscribed_topic_names: list[str], subscribed_topic_regex: str | None,
                          rebalance_timeout_ms: int, server_assignor: str | None,
                          classic: tuple[int, tuple[tuple[str, bytes], ...]] | None = None) -> bytes:
    """``classic``: (session timeout ms, JoinGroup protocols) of a classic member."""
    cm = None
    if classic is not None:
        cm = MemberValue.ClassicMemberMetadata(session_timeout_ms=classic[0], supported_protocols=[
            MemberValue.ClassicProtocol(name=n, metadata=m) for n, m in classic[1]])
    return _prefixed(0, MemberValue(instance_id=instance_id, rack_id=rack_id, client_id=client_id,
                                    client_host=client_host, subscribed_topic_names=list(subscribed_topic_names),
                                    subscribed_topic_regex=subscribed_topic_regex,
                                    rebalance_timeout_ms=rebalance_timeout_ms, server_assignor=server_assignor,
                                    classic_member_metadata=cm))


def target_metadata_value(assignment_epoch: int, timestamp_ms: int) -> bytes:
    return _prefixed(0, TargetMetadataValue(assignment_epoch=assignment_epoch, assignment_timestamp=timestamp_ms))


def target_member_value(assignment: Assignment) -> bytes:
    return _prefixed(0, TargetMemberValue(topic_partitions=topic_partitions(TargetMemberValue.TopicPartition,
                                                                             assignment)))


def current_assignment_value(member_epoch: int, previous_member_epoch: int, state: int, assigned: Assignment,
                             pending_revocation: Assignment, epochs: AssignmentEpochs) -> bytes:
    """``epochs``: the assignment epoch of every partition of ``assigned`` and
    ``pending_revocation`` (KIP-1251; Kafka 4.3 writes them as AssignmentEpochs)."""
    tp = CurrentValue.TopicPartitions
    return _prefixed(0, CurrentValue(
        member_epoch=member_epoch, previous_member_epoch=previous_member_epoch, state=state,
        assigned_partitions=topic_partitions_with_epochs(tp, assigned, epochs),
        partitions_pending_revocation=topic_partitions_with_epochs(tp, pending_revocation, epochs)))


def regular_expression_value(topics: list[str], version: int, timestamp_ms: int) -> bytes:
    return _prefixed(0, RegexValue(topics=sorted(topics), version=version, timestamp=timestamp_ms))
