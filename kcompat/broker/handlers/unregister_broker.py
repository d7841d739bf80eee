"""UnregisterBroker (key 64), version 0: remove a broker's registration from the cluster metadata
(KIP-631; ``kafka-cluster.sh unregister --id N``, ``Admin.unregisterBroker``).

Runs on the active controller, forwarded there by other nodes (Kafka's ``ControllerApis.
handleUnregisterBroker``); the rules are :meth:`kcompat.kraft.cluster_control.ClusterControl.
unregister`: BROKER_ID_NOT_REGISTERED for an unknown id, INVALID_REQUEST while the broker is the
last in-sync replica of a partition, otherwise an UnregisterBrokerRecord, after which Metadata and
DescribeCluster no longer list the broker.

With an authorizer ALTER on the cluster is required (CLUSTER_AUTHORIZATION_FAILED), as in Kafka.
"""

from __future__ import annotations

from kcompat.broker.authz import Op
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.unregister_broker import UnregisterBrokerResponse as R

API_KEY = 64
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, req):
    if not ctx.authorize_cluster(Op.ALTER):
        return error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return ctx.services.controller_service.handle(ctx, req, lambda: _local(ctx, req), error_response)


def _local(ctx, req) -> R:
    """On the active controller (inside ControllerService.run)."""
    services = ctx.services
    try:
        services.cluster_control.unregister(req.broker_id, services.now_ms())
    except KafkaError as e:
        return error_response(req, ctx.api_version, e.code, e.message)
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None)


def error_response(req, version, code, message: str | None = None) -> R:
    """The whole request failed with ``code`` (Kafka's ``UnregisterBrokerRequest.getErrorResponse``)."""
    return R(throttle_time_ms=0, error_code=code, error_message=message)
