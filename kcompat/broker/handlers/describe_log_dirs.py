"""DescribeLogDirs (key 35), versions 0-5: the broker's log dirs and the partitions in each, with
their size on disk (``kafka-log-dirs.sh --describe``; ``kafka-reassign-partitions.sh`` 4.x reads it
to keep replicas in their log dirs).

As Kafka's ``KafkaApis.handleDescribeLogDirsRequest`` and ``ReplicaManager.describeLogDirs``: with an
authorizer DESCRIBE on the cluster is required, else the response has no results and
CLUSTER_AUTHORIZATION_FAILED (the top-level error code exists from v3). Null topics mean every
partition this broker has a log for; otherwise the named partitions, topics without one of them left
out. Per dir: its absolute path, the topics, per partition ``partition_size`` (the bytes of its
segments' ``.log`` files, as ``UnifiedLog.size``), ``offset_lag`` (the high watermark minus the log
end offset, never below 0; -1 when the replica has no partition state) and ``is_future_key``
false; a replica moving to this dir (AlterReplicaLogDirs) is listed there too with its future log:
``is_future_key`` true, the lag behind the current log's end offset. v4 adds the total and usable
bytes of the dir's filesystem; v5 ``is_cordoned``, true for a dir ``cordoned.log.dirs`` names
(KIP-1066; Kafka 4.3 sets it only at metadata.version 4.3-IV0 or later, kcompat at any). An
offline dir, or one whose filesystem cannot be read, answers KAFKA_STORAGE_ERROR with no topics.

Version 0 (the same as 1, which only added throttling after the response) was removed in Kafka 4.0
(KIP-896); kcompat keeps serving it for older clients, as it does the other versions Kafka 4 dropped.
"""

from __future__ import annotations

from kcompat.broker.api_services import ApiServices
from kcompat.broker.authz import Op
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.describe_log_dirs import DescribeLogDirsResponse as R

API_KEY = 35
MIN_VERSION = 0
MAX_VERSION = 5

INVALID_OFFSET_LAG = -1   # DescribeLogDirsResponse.INVALID_OFFSET_LAG


def handle(ctx, req):
    if not ctx.authorize_cluster(Op.DESCRIBE):     # KafkaApis: DESCRIBE on CLUSTER
        return error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    wanted = None if req.topics is None else {(t.topic, p) for t in req.topics for p in t.partitions}
    services = ctx.services
    results = []
    for d in services.log_manager.describe_dirs(wanted):
        if d.error is not None:
            results.append(R.DescribeLogDirsResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=d.path,
                                                   topics=[]))
            continue
        topics: dict[str, list] = {}
        for (topic, index), log in d.logs.items():
            topics.setdefault(topic, []).append(R.DescribeLogDirsPartition(
                partition_index=index, partition_size=log.size_in_bytes,
                offset_lag=_offset_lag(services, topic, index, log.log_end_offset), is_future_key=False))
        for (topic, index), log in d.future_logs.items():
            topics.setdefault(topic, []).append(R.DescribeLogDirsPartition(
                partition_index=index, partition_size=log.size_in_bytes,
                offset_lag=services.replica_manager.log_dirs.future_lag(topic, index), is_future_key=True))
        results.append(R.DescribeLogDirsResult(
            error_code=ErrorCode.NONE, log_dir=d.path, total_bytes=d.total_bytes, usable_bytes=d.usable_bytes,
            is_cordoned=d.is_cordoned,
            topics=[R.DescribeLogDirsTopic(name=name, partitions=parts) for name, parts in topics.items()]))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, results=results)


def _offset_lag(services: ApiServices, topic: str, index: int, log_end_offset: int) -> int:
    """``ReplicaManager.getLogEndOffsetLag`` for a current (not future) log."""
    partition = services.replica_manager.get(topic, index)
    if partition is None:
        return INVALID_OFFSET_LAG
    return max(partition.high_watermark - log_end_offset, 0)


def error_response(req, version, code):
    return R(throttle_time_ms=0, error_code=code, results=[])
