"""AlterReplicaLogDirs (key 34), versions 0-2: move replicas of this broker to other log dirs while
they serve (KIP-113; ``kafka-reassign-partitions.sh`` with ``log_dirs`` in its JSON,
``Admin.alterReplicaLogDirs``).

As Kafka's ``KafkaApis.handleAlterReplicaLogDirsRequest``: with an authorizer ALTER on the cluster
is required, else every partition answers CLUSTER_AUTHORIZATION_FAILED. Per partition the result of
:meth:`kcompat.isr.replica_log_dirs.ReplicaLogDirs.alter_replica_log_dir` (NONE once the move has
started: the data is copied into a future log, which swaps in when it has caught up;
LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR, REPLICA_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION). A
partition named under two dirs takes the last one, as Kafka's map does.

Version 0 (the same as 1, which only added throttling after the response) was removed in Kafka 4.0
(KIP-896); kcompat keeps serving it for older clients, as it does the other versions Kafka 4 dropped.
"""

from __future__ import annotations

from kcompat.broker.authz import Op
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsResponse as R

API_KEY = 34
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, req):
    wanted: dict[tuple[str, int], str] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                wanted[(t.name, p)] = d.path
    services = ctx.services
    results: dict[tuple[str, int], int] = {}
    if not ctx.authorize_cluster(Op.ALTER):
        results = {key: ErrorCode.CLUSTER_AUTHORIZATION_FAILED for key in wanted}
    else:
        jbod = services.replica_manager.log_dirs
        now = services.now_ms()
        for (topic, index), path in wanted.items():
            results[(topic, index)] = jbod.alter_replica_log_dir(
                topic, index, path, in_metadata=services.image.has_partition(topic, index), now_ms=now)
    by_topic: dict[str, list] = {}
    for (topic, index), code in results.items():
        by_topic.setdefault(topic, []).append(R.AlterReplicaLogDirPartitionResult(partition_index=index,
                                                                                  error_code=code))
    return R(throttle_time_ms=0, results=[R.AlterReplicaLogDirTopicResult(topic_name=name, partitions=parts)
                                          for name, parts in by_topic.items()])


def error_response(req, version, code):
    return R(throttle_time_ms=0, results=[
        R.AlterReplicaLogDirTopicResult(topic_name=t.name, partitions=[
            R.AlterReplicaLogDirPartitionResult(partition_index=p, error_code=code) for p in t.partitions])
        for d in req.dirs for t in d.topics])
