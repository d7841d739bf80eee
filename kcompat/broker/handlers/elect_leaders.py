"""ElectLeaders (key 43), versions 0-2: elect the preferred (type 0) or, from v1, an unclean
(type 1) leader for partitions (KIP-183, KIP-460; ``kafka-leader-election.sh``,
``Admin.electLeaders``).

Runs on the active controller, forwarded there by other nodes (Kafka's ``ControllerApis.
handleElectLeaders``); the election rules are :func:`kcompat.kraft.leader_election.elect_leaders`.
Per partition: NONE (a new leader is committed), ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION. ``topic_partitions`` null means every
partition, and then only partitions that needed an election are listed. An unknown election type
is INVALID_REQUEST for every partition named and, from v1, at the top level; v0 has no election
type (always preferred) and no top-level error code.

With an authorizer ALTER on the cluster is required (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kcompat.broker.authz import Op
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.elect_leaders import ElectLeadersResponse as R

API_KEY = 43
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, req):
    if not ctx.authorize_cluster(Op.ALTER):
        return error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return ctx.services.controller_service.handle(ctx, req, lambda: _local(ctx, req), error_response)


def _local(ctx, req) -> R:
    """On the active controller (inside ControllerService.run)."""
    services = ctx.services
    election_type = req.election_type if ctx.api_version >= 1 else 0
    wanted = None if req.topic_partitions is None else \
        [(t.topic, list(t.partitions)) for t in req.topic_partitions]
    try:
        results = services.cluster_control.elect_leaders(election_type, wanted, services.now_ms())
    except KafkaError as e:
        return error_response(req, ctx.api_version, e.code, e.message)
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=[
        R.ReplicaElectionResult(topic=t.topic, partition_result=[
            R.PartitionResult(partition_id=p.partition, error_code=p.error, error_message=p.message)
            for p in t.partitions])
        for t in results])


def error_response(req, version, code, message: str | None = None) -> R:
    """Kafka's ``ElectLeadersRequest.getErrorResponse``: the code at the top level (v1+) and for
    every partition named (none when the request named all partitions)."""
    return R(throttle_time_ms=0, error_code=code, replica_election_results=[
        R.ReplicaElectionResult(topic=t.topic, partition_result=[
            R.PartitionResult(partition_id=p, error_code=code, error_message=message) for p in t.partitions])
        for t in (req.topic_partitions or [])])
