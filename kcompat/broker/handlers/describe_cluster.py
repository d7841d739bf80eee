"""DescribeCluster (key 60), versions 0-2: cluster id, controller and brokers (KIP-700).

v1 adds ``endpoint_type`` (KIP-919): 1 = brokers (what we serve), 2 = controllers (answered
with UNSUPPORTED_ENDPOINT_TYPE by a broker listener, as Kafka does). With an authorizer,
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


def handle(ctx, req):
    services = ctx.services
    if ctx.api_version >= 1 and req.endpoint_type != ENDPOINT_BROKERS:
        return R(error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                 error_message="The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
                               "of type CONTROLLER",
                 endpoint_type=req.endpoint_type, cluster_id=services.cluster_id, controller_id=-1, brokers=[])
    ops = cluster_operations(ctx) if req.include_cluster_authorized_operations else AUTHORIZED_OPS_NOT_REQUESTED
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, endpoint_type=ENDPOINT_BROKERS,
             cluster_id=services.cluster_id, controller_id=services.node_id,
             brokers=_brokers(services, ctx.listener_name, ctx.api_version >= 2 and req.include_fenced_brokers),
             cluster_authorized_operations=ops)


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
