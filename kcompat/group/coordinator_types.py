"""Shared pieces of the group coordinator (:mod:`kcompat.group.coordinator`): its configuration, the
records and results it returns, the API enum, constants, and Kafka's partition hashing."""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import NamedTuple

from kcompat.coordinator import CoordinatorResult
from kcompat.coordinator.java_strings import java_string_hash
from kcompat.group.records import OffsetAndMetadata
from kcompat.group.state import GroupState
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.group_records.group_metadata_value import GroupMetadataValue

log = logging.getLogger("kcompat.group")

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                                             GroupState.COMPLETING_REBALANCE, GroupState.STABLE,
                                             GroupState.DEAD)

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs
UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
NO_OFFSET = -1
GROUP_TYPE_CLASSIC = "classic"
# DescribeGroups v3+ authorized operations without an authorizer: READ(3), DELETE(6), DESCRIBE(8),
# AclEntry.supportedOperations(GROUP) as a bit field.
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


@dataclass(frozen=True)
class GroupConfig:
    """Broker configs of the same names (Kafka defaults)."""

    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1800000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    max_size: int = 2**31 - 1  # group.max.size
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    num_partitions: int = 50  # offsets.topic.num.partitions


NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


@dataclass
class Record:
    """One ``__consumer_offsets`` record in Kafka's format. A record with a producer id is a
    transactional offset commit: it goes in a transactional batch of that producer and epoch
    (records of different producers in different batches). ``offset`` is the record's log offset,
    set by whoever appends it before :meth:`GroupCoordinator.replay` (-1: not known, the
    coordinator then takes the next position after the last record it saw in the partition)."""

    partition: int
    key: bytes
    value: bytes | None  # None = tombstone
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    offset: int = -1


class TxnMarker(NamedTuple):
    """A COMMIT/ABORT control record in a partition being loaded (see :meth:`GroupCoordinator.load`)."""

    offset: int
    producer_id: int
    commit: bool


class Result(CoordinatorResult[Record]):
    """What a group coordinator call returns: ``__consumer_offsets`` records, then replies."""


class _Api(enum.Enum):
    JOIN = "JoinGroup"
    SYNC = "SyncGroup"
    HEARTBEAT = "Heartbeat"
    LEAVE = "LeaveGroup"
    COMMIT = "OffsetCommit"
    FETCH = "OffsetFetch"
    DESCRIBE = "DescribeGroups"
    DELETE = "DeleteGroups"
    OFFSET_DELETE = "OffsetDelete"
    TXN_COMMIT = "TxnOffsetCommit"
    CONSUMER_HEARTBEAT = "ConsumerGroupHeartbeat"
    CONSUMER_DESCRIBE = "ConsumerGroupDescribe"
    SHARE_HEARTBEAT = "ShareGroupHeartbeat"
    SHARE_DESCRIBE = "ShareGroupDescribe"
    STREAMS_HEARTBEAT = "StreamsGroupHeartbeat"
    STREAMS_DESCRIBE = "StreamsGroupDescribe"


# Kafka's isValidGroupId: these APIs accept the empty group id (backwards compatibility).
_EMPTY_GROUP_ID_ALLOWED = frozenset({_Api.COMMIT, _Api.FETCH, _Api.DESCRIBE, _Api.DELETE})

# TxnOffsetCommit answers a partition not in the transaction with TRANSACTION_ABORTABLE from v4 on
# (Kafka's genericErrorSupported), INVALID_TXN_STATE before (errors.txn_abortable_error)
TXN_GENERIC_ERROR_MIN_VERSION = 4

# The transaction verification (KIP-890) error a TxnOffsetCommit answers with, as Kafka's
# GroupMetadataManager.maybeConvertOffsetCommitError; the verifier returns what a produce would get.
TXN_VERIFY_ERRORS = {
    ErrorCode.NETWORK_EXCEPTION: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`` (Utils.abs(MIN) = 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(2**31) else abs(h)) % num_partitions


_Positioned = tuple[int, OffsetAndMetadata]  # (log offset of the record, the offset it commits)


class _LoadState:
    """What a partition's log says so far while it is loading: last group value, committed
    offsets, and transactional offsets per producer whose marker has not been read yet
    (GroupMetadataManager.loadGroupsAndOffsets' pendingOffsets)."""

    __slots__ = ("groups", "offsets", "pending", "last_offset", "consumer", "share", "streams")

    def __init__(self) -> None:
        self.groups: dict[str, GroupMetadataValue] = {}
        # KIP-848 records: group id -> (record type, member id or regex) -> latest value
        self.consumer: dict[str, dict[tuple[int, str | None], bytes]] = {}
        self.share: dict[str, dict[tuple[int, str | None], bytes]] = {}   # KIP-932 records by group
        self.streams: dict[str, dict[tuple[int, str | None], bytes]] = {}   # KIP-1071 records by group
        self.offsets: dict[str, dict[tuple[str, int], _Positioned]] = {}
        self.pending: dict[int, dict[str, dict[tuple[str, int], _Positioned]]] = {}
        self.last_offset = -1

    def position(self, offset: int) -> int:
        if offset < 0:
            offset = self.last_offset + 1
        self.last_offset = max(self.last_offset, offset)
        return offset
