"""ListPartitionReassignments (key 46), version 0: the reassignments in progress (KIP-455;
``kafka-reassign-partitions.sh --list`` and ``--verify``, ``Admin.listPartitionReassignments``).

Runs on the active controller, forwarded there by other nodes (Kafka's ``ControllerApis.
handleListPartitionReassignments``); see :func:`kcompat.kraft.reassignment.list_reassignments`:
each partition being reassigned with its full replica list (target then removing replicas) and
its adding and removing replicas; ``topics`` null lists every one; unknown topics and partitions
and partitions not being reassigned are left out. With an authorizer DESCRIBE on the cluster is
required (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kcompat.broker.authz import Op
from kcompat.kraft.reassignment import list_reassignments
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsResponse as R

API_KEY = 46
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, req):
    if not ctx.authorize_cluster(Op.DESCRIBE):
        return error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return ctx.services.controller_service.handle(ctx, req, lambda: _local(ctx, req), error_response)


def _local(ctx, req) -> R:
    """On the active controller (inside ControllerService.run)."""
    wanted = None if req.topics is None else [(t.name, list(t.partition_indexes)) for t in req.topics]
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, topics=[
        R.OngoingTopicReassignment(name=name, partitions=[
            R.OngoingPartitionReassignment(partition_index=o.partition, replicas=o.replicas,
                                           adding_replicas=o.adding, removing_replicas=o.removing)
            for o in ongoing])
        for name, ongoing in list_reassignments(ctx.services.image, wanted)])


def error_response(req, version, code, message: str | None = None) -> R:
    """The whole request failed with ``code`` (Kafka's ``ListPartitionReassignmentsRequest.getErrorResponse``)."""
    return R(throttle_time_ms=0, error_code=code, error_message=message, topics=[])
