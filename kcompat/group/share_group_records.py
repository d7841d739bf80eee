"""``__consumer_offsets`` records of KIP-932 share groups, in Kafka 4.3's formats
(kafka-specs-4.3.1/group-coordinator, ``GroupCoordinatorRecordHelpers``).

As for KIP-848 consumer groups (:mod:`kcompat.group.consumer_records`), a key is an int16 record
type followed by the key struct, a value an int16 version (0) followed by the value struct, or null
for a tombstone:

==== ============================================== =============================================
type key (group id, ...)                            value
==== ============================================== =============================================
9    ShareGroupPartitionMetadataKey (Kafka 4.0)     read and skipped (the hash is in type 11)
10   ShareGroupMemberMetadataKey (+ member id)      rack, client id and host, subscribed topics
11   ShareGroupMetadataKey                          group epoch, metadata hash of the subscription
12   ShareGroupTargetAssignmentMetadataKey          assignment epoch, timestamp
13   ShareGroupTargetAssignmentMemberKey (+ id)     the member's target assignment
14   ShareGroupCurrentMemberAssignmentKey (+ id)    member epoch, previous epoch, state, assigned
15   ShareGroupStatePartitionMetadataKey            topics whose share-partition state is
                                                    initialized, being initialized or deleted
==== ============================================== =============================================
"""

from __future__ import annotations

import uuid

from kcompat.group.consumer_records import (
    Assignment, ConsumerRecordError, GroupRecordKey, _prefixed, _read, key_codec,
)
from kcompat.protocol.group_records.share_group_current_member_assignment_key import (
    ShareGroupCurrentMemberAssignmentKey as CurrentKey)
from kcompat.protocol.group_records.share_group_current_member_assignment_value import (
    ShareGroupCurrentMemberAssignmentValue as CurrentValue)
from kcompat.protocol.group_records.share_group_member_metadata_key import ShareGroupMemberMetadataKey as MemberKey
from kcompat.protocol.group_records.share_group_member_metadata_value import (
    ShareGroupMemberMetadataValue as MemberValue)
from kcompat.protocol.group_records.share_group_metadata_key import ShareGroupMetadataKey as MetadataKey
from kcompat.protocol.group_records.share_group_metadata_value import ShareGroupMetadataValue as MetadataValue
from kcompat.protocol.group_records.share_group_state_partition_metadata_key import (
    ShareGroupStatePartitionMetadataKey as StateKey)
from kcompat.protocol.group_records.share_group_state_partition_metadata_value import (
    ShareGroupStatePartitionMetadataValue as StateValue)
from kcompat.protocol.group_records.share_group_target_assignment_member_key import (
    ShareGroupTargetAssignmentMemberKey as TargetMemberKey)
from kcompat.protocol.group_records.share_group_target_assignment_member_value import (
    ShareGroupTargetAssignmentMemberValue as TargetMemberValue)
from kcompat.protocol.group_records.share_group_target_assignment_metadata_key import (
    ShareGroupTargetAssignmentMetadataKey as TargetMetadataKey)
from kcompat.protocol.group_records.share_group_target_assignment_metadata_value import (
    ShareGroupTargetAssignmentMetadataValue as TargetMetadataValue)

PARTITION_METADATA, MEMBER_METADATA, GROUP_METADATA = 9, 10, 11
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, STATE_PARTITION_METADATA = 12, 13, 14, 15
SHARE_RECORD_TYPES = frozenset({PARTITION_METADATA, MEMBER_METADATA, GROUP_METADATA, TARGET_METADATA,
                                TARGET_MEMBER, CURRENT_ASSIGNMENT, STATE_PARTITION_METADATA})
_MEMBER_TYPES = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT})

_KEYS = {PARTITION_METADATA: MetadataKey, MEMBER_METADATA: MemberKey, GROUP_METADATA: MetadataKey,
         TARGET_METADATA: TargetMetadataKey, TARGET_MEMBER: TargetMemberKey, CURRENT_ASSIGNMENT: CurrentKey,
         STATE_PARTITION_METADATA: StateKey}
_VALUES = {MEMBER_METADATA: MemberValue, GROUP_METADATA: MetadataValue, TARGET_METADATA: TargetMetadataValue,
           TARGET_MEMBER: TargetMemberValue, CURRENT_ASSIGNMENT: CurrentValue, STATE_PARTITION_METADATA: StateValue}


class ShareKey(GroupRecordKey):
    """A decoded share-group key: ``record_type`` (9-15), the group, and the member id (10, 13, 14)."""


# key(record_type, group_id, member_id=None) -> bytes; parse_key(record_type, data) -> ShareKey
key, parse_key = key_codec(_KEYS, _MEMBER_TYPES, ShareKey)


def parse_value(record_type: int, data: bytes):
    """The value struct of a record of ``record_type`` (None for type 9, which is skipped)."""
    cls = _VALUES.get(record_type)
    return None if cls is None else _read(cls, data)


def _topic_partitions(cls, assignment: Assignment) -> list:
    return [cls(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(assignment.items(), key=lambda i: str(i[0]))
            if ps]


def member_metadata_value(*, rack_id: str | None, client_id: str, client_host: str,
                          subscribed_topic_names: list[str]) -> bytes:
    return _prefixed(0, MemberValue(rack_id=rack_id, client_id=client_id, client_host=client_host,
                                    subscribed_topic_names=sorted(subscribed_topic_names)))


def group_metadata_value(epoch: int, metadata_hash: int) -> bytes:
    return _prefixed(0, MetadataValue(epoch=epoch, metadata_hash=metadata_hash))


def target_metadata_value(assignment_epoch: int, timestamp_ms: int) -> bytes:
    return _prefixed(0, TargetMetadataValue(assignment_epoch=assignment_epoch, assignment_timestamp=timestamp_ms))


def target_member_value(assignment: Assignment) -> bytes:
    return _prefixed(0, TargetMemberValue(topic_partitions=_topic_partitions(TargetMemberValue.TopicPartition,
                                                                                assignment)))


def current_assignment_value(member_epoch: int, previous_member_epoch: int, assigned: Assignment) -> bytes:
    """State 0 (STABLE): a share member always has its target assignment (no revocation)."""
    return _prefixed(0, CurrentValue(member_epoch=member_epoch, previous_member_epoch=previous_member_epoch, state=0,
                                     assigned_partitions=_topic_partitions(CurrentValue.TopicPartitions, assigned)))


def state_partition_metadata_value(initialized: dict[uuid.UUID, tuple[str, frozenset[int]]],
                                   deleting: dict[uuid.UUID, str]) -> bytes:
    """``initialized``: topic id -> (name, partitions whose share state exists); ``deleting``:
    topic id -> name of topics whose share state is being deleted."""
    info = StateValue.TopicPartitionsInfo
    return _prefixed(0, StateValue(
        initializing_topics=[],
        initialized_topics=[info(topic_id=t, topic_name=name, partitions=sorted(ps))
                            for t, (name, ps) in sorted(initialized.items(), key=lambda i: str(i[0]))],
        deleting_topics=[StateValue.TopicInfo(topic_id=t, topic_name=name)
                         for t, name in sorted(deleting.items(), key=lambda i: str(i[0]))]))


__all__ = ["ConsumerRecordError", "SHARE_RECORD_TYPES", "ShareKey", "key", "parse_key", "parse_value",
           "member_metadata_value", "group_metadata_value", "target_metadata_value", "target_member_value",
           "current_assignment_value", "state_partition_metadata_value"]
