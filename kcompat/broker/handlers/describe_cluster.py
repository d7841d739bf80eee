"""DescribeCluster (key 60), versions 0-2: cluster id, controller and brokers (KIP-700).

v1 adds ``endpoint_type`` (KIP-919): a broker listener serves 1 (brokers), a controller listener
2 (controllers: the quorum's voters at their controller addresses, with the active controller as
``controller_id``, Kafka's ``ControllerApis.handleDescribeCluster``; what ``--bootstrap-controller``
tools and ``bootstrap.controllers`` admin clients ask first). The other type is
MISMATCHED_ENDPOINT_TYPE (INVALID_REQUEST for v0, which cannot name one), an unknown type
UNSUPPORTED_ENDPOINT_TYPE, with Kafka 4.3.1's messages. With an authorizer,
``cluster_authorized_operations`` lists what the ACLs allow (0 without DESCRIBE on the cluster).
v2 (KIP-1073): ``include_fenced_brokers`` adds the registered brokers that are fenced, each broker
says ``is_fenced`` (Kafka 4.3.1's ``KafkaApis.handleDescribeCluster``).
"""

from __future__ import annotations

from kcompat.broker.handlers.metadata import AUTHORIZED_OPS_NOT_REQUESTED, cluster_operations
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.describe_cluster import DescribeClusterResponse as R

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 2

ENDPOINT_BROKERS = 1
ENDPOINT_CONTROLLERS = 2
_ENDPOINT_NAMES = {ENDPOINT_BROKERS: "BROKER", ENDPOINT_CONTROLLERS: "CONTROLLER"}


def handle(ctx, req):
    services = ctx.services
    version = ctx.api_version
    wanted = req.endpoint_type if version >= 1 else ENDPOINT_BROKERS
    serves = ENDPOINT_CONTROLLERS if ctx.on_controller_listener else ENDPOINT_BROKERS
    if wanted not in _ENDPOINT_NAMES:
        return _refused(ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, f"Unsupported endpoint type {wanted}")
    if wanted != serves:
        return _refused(ErrorCode.MISMATCHED_ENDPOINT_TYPE if version >= 1 else ErrorCode.INVALID_REQUEST,
                        f"The request was sent to an endpoint of type {_ENDPOINT_NAMES[serves]}, but we wanted "
                        f"an endpoint of type {_ENDPOINT_NAMES[wanted]}")
    ops = cluster_operations(ctx) if req.include_cluster_authorized_operations else AUTHORIZED_OPS_NOT_REQUESTED
    if serves == ENDPOINT_CONTROLLERS:
        leader = services.quorum.leader_id
        return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                 endpoint_type=ENDPOINT_CONTROLLERS, cluster_id=services.cluster_id,
                 controller_id=-1 if leader is None else leader, cluster_authorized_operations=ops,
                 brokers=[R.DescribeClusterBroker(broker_id=v.node_id, host=v.host, port=v.port, rack=None)
                          for v in services.config.controller_quorum_voters])
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, endpoint_type=ENDPOINT_BROKERS,
             cluster_id=services.cluster_id, controller_id=services.node_id,
             brokers=_brokers(services, ctx.listener_name, version >= 2 and req.include_fenced_brokers),
             cluster_authorized_operations=ops)


def _refused(code: ErrorCode, message: str) -> R:
    """A request for the other (or an unknown) endpoint type: as Kafka, no cluster id, no nodes."""
    return R(error_code=code, error_message=message, endpoint_type=ENDPOINT_BROKERS, cluster_id="", controller_id=-1,
             brokers=[])


def _brokers(services, listener_name: str, include_fenced: bool):
    """The unfenced brokers on ``listener_name``; with ``include_fenced`` every registered one,
    by id, with its ``is_fenced`` (Kafka's ``getBrokerNodes``)."""
    if not include_fenced:
        return [R.DescribeClusterBroker(broker_id=n, host=h, port=p, rack=r)
                for n, h, p, r in services.metadata_cache.live_broker_endpoints(listener_name)]
    out = []
    for b in sorted(services.image.brokers.values(), key=lambda b: b.broker_id):
        ep = b.endpoints.get(listener_name)
        if ep is not None:
            out.append(R.DescribeClusterBroker(broker_id=b.broker_id, host=ep.host, port=ep.port, rack=b.rack,
                                               is_fenced=b.fenced))
    return out


def error_response(req, version, code):
    return R(error_code=code, cluster_id="", controller_id=-1, brokers=[])
