"""AlterPartitionReassignments (key 45), versions 0-1: start, change or cancel partition
reassignments (KIP-455; ``kafka-reassign-partitions.sh --execute`` / ``--cancel``,
``Admin.alterPartitionReassignments``); v1 can forbid changing a partition's replication factor
(KIP-860, ``--disallow-replication-factor-change``).

Runs on the active controller, forwarded there by other nodes (Kafka's ``ControllerApis.
handleAlterPartitionReassignments``); the rules are :mod:`kcompat.kraft.reassignment`. Per
partition: NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS
(cancelling what is not in progress), INVALID_REPLICATION_FACTOR (v1 with
AllowReplicationFactorChange false, a target of another size), with Kafka's messages. With an authorizer ALTER on the
cluster is required: CLUSTER_AUTHORIZATION_FAILED at the top level and for every partition.
"""

from __future__ import annotations

from kcompat.broker.authz import Op
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsResponse as R

API_KEY = 45
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx, req):
    if not ctx.authorize_cluster(Op.ALTER):
        return error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return ctx.services.controller_service.handle(ctx, req, lambda: _local(ctx, req), error_response)


def _local(ctx, req) -> R:
    """On the active controller (inside ControllerService.run)."""
    services = ctx.services
    wanted = [(t.name, [(p.partition_index, None if p.replicas is None else list(p.replicas)) for p in t.partitions])
              for t in req.topics]
    allow_rf_change = ctx.api_version < 1 or req.allow_replication_factor_change
    results = services.cluster_control.alter_reassignments(wanted, services.now_ms(), allow_rf_change)
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, responses=[
        R.ReassignableTopicResponse(name=t.name, partitions=[
            R.ReassignablePartitionResponse(partition_index=p.partition, error_code=p.error, error_message=p.message)
            for p in t.partitions])
        for t in results])


def error_response(req, version, code, message: str | None = None) -> R:
    """Kafka's ``AlterPartitionReassignmentsRequest.getErrorResponse``: ``code`` at the top level
    and for every partition named."""
    return R(throttle_time_ms=0, error_code=code, error_message=message, responses=[
        R.ReassignableTopicResponse(name=t.name, partitions=[
            R.ReassignablePartitionResponse(partition_index=p.partition_index, error_code=code, error_message=message)
            for p in t.partitions])
        for t in req.topics])
