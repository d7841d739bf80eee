"""Which log dir holds each replica (KIP-858 directory assignment) on the active controller.

A broker with several log dirs tells the controller where each of its replicas lives with
AssignReplicasToDirs (after creating a log, after a move between dirs); the controller records
it in the partition's ``Directories`` (a PartitionChangeRecord), as Kafka's
``ReplicationControlManager.handleAssignReplicasToDirs``. When the broker later reports a
directory offline in its heartbeat, the partitions assigned to it lose this replica as leader
and ISR member (:meth:`kcompat.kraft.cluster_control.ClusterControl.heartbeat`).
"""

from __future__ import annotations

import uuid

from kcompat.kraft.image import MetadataImage, directory_list
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.metadata_records import PartitionChangeRecord


def assign_replicas_to_dirs(image: MetadataImage, broker_id: int, broker_epoch: int,
                            assignments: list[tuple[uuid.UUID, uuid.UUID, int]]
                            ) -> tuple[list, dict[tuple[uuid.UUID, uuid.UUID, int], ErrorCode]]:
    """``assignments``: ``(directory id, topic id, partition)``. Returns the PartitionChangeRecords
    (only where the directory changes) and the error code of each assignment: NONE,
    UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (the broker is not a
    replica). Raises KafkaError (BROKER_ID_NOT_REGISTERED, STALE_BROKER_EPOCH) for the whole
    request."""
    b = image.brokers.get(broker_id)
    if b is None:
        raise KafkaError(ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker {broker_id} is not registered.")
    if b.epoch != broker_epoch:
        raise KafkaError(ErrorCode.STALE_BROKER_EPOCH,
                         f"Expected broker epoch {b.epoch}, but got broker epoch {broker_epoch}")
    records = []
    results = {}
    for dir_id, topic_id, index in assignments:
        t = image.topics_by_id.get(topic_id)
        p = t.partitions.get(index) if t is not None else None
        if t is None:
            code = ErrorCode.UNKNOWN_TOPIC_ID
        elif p is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif broker_id not in p.replicas:
            code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        else:
            code = ErrorCode.NONE
            if p.directories.get(broker_id) != dir_id:
                dirs = directory_list(p)
                dirs[p.replicas.index(broker_id)] = dir_id
                records.append(PartitionChangeRecord(partition_id=index, topic_id=topic_id, directories=dirs))
        results[(dir_id, topic_id, index)] = code
    return records, results
