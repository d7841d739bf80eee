"""AssignReplicasToDirs (key 73), version 0: a broker tells the active controller which of its log
dirs holds each of its replicas (KIP-858); see :func:`kcompat.kraft.directories.assign_replicas_to_dirs`.
Served on the controller listener (brokers send it to the active controller, as Kafka's
``AssignmentsManager``); NOT_CONTROLLER elsewhere.
"""

from __future__ import annotations

import logging

from kcompat.broker.api_services import ApiServices
from kcompat.kraft.directories import assign_replicas_to_dirs
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.assign_replicas_to_dirs import AssignReplicasToDirsResponse as R

log = logging.getLogger("kcompat.kraft")

API_KEY = 73
MIN_VERSION = 0
MAX_VERSION = 0


def local(services: ApiServices, req) -> R:
    """On the active controller (inside ControllerService.run)."""
    wanted = [(d.id, t.topic_id, p.partition_index) for d in req.directories for t in d.topics for p in t.partitions]
    try:
        records, results = assign_replicas_to_dirs(services.image, req.broker_id, req.broker_epoch, wanted)
    except KafkaError as e:
        return error_response(req, 0, e.code)
    services.controller.commit(records, services.now_ms())
    done = sum(1 for code in results.values() if code == ErrorCode.NONE)
    log.info("broker %d: %d replica(s) assigned to log dirs (%d changed)", req.broker_id, done, len(records))
    dirs: dict = {}
    for (dir_id, topic_id, index), code in results.items():
        topics = dirs.setdefault(dir_id, {})
        topics.setdefault(topic_id, []).append(R.PartitionData(partition_index=index, error_code=code))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, directories=[
        R.DirectoryData(id=dir_id, topics=[R.TopicData(topic_id=tid, partitions=parts) for tid, parts in topics.items()])
        for dir_id, topics in dirs.items()])


def handle(ctx, req):
    return ctx.services.controller_service.handle(ctx, req, lambda: local(ctx.services, req), error_response)


def error_response(req, version, code):
    return R(throttle_time_ms=0, error_code=code, directories=[])
