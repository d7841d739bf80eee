"""ListConfigResources (key 74), versions 0-1: the config resources a cluster has, by type.

KIP-714 introduced it as ListClientMetricsResources (v0: the names of the client metrics
subscriptions, ``kafka-client-metrics.sh --list``); KIP-1142 renamed it and added v1's
``resource_types`` filter. As Kafka 4.3.1's ``KafkaApis.handleListConfigResources``:

- v0 lists CLIENT_METRICS (16); v1 lists the types asked for, an empty list meaning all it
  supports: TOPIC (2), BROKER (4), BROKER_LOGGER (8), CLIENT_METRICS (16), GROUP (32). Any
  other type fails the whole request with UNSUPPORTED_VERSION and no resources.
- Names: groups with dynamic configs (existing or not), client metrics subscriptions, every
  registered broker with an endpoint on the request's listener (fenced or not) once as a broker
  logger and once as a broker, every topic (internal ones too); in that order of types, names
  sorted within a type (Kafka's sets have no order).
- With an authorizer, DESCRIBE_CONFIGS on the CLUSTER; without it CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from kcompat.broker.authz import Op
from kcompat.broker.config_changes import BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP, TOPIC
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.list_config_resources import ListConfigResourcesResponse as R

API_KEY = 74
MIN_VERSION = 0
MAX_VERSION = 1

# ListConfigResourcesRequest.supportedResourceTypes() per request version
SUPPORTED = {0: frozenset({CLIENT_METRICS}), 1: frozenset({TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP})}


def handle(ctx, req):
    if not ctx.authorize_cluster(Op.DESCRIBE_CONFIGS):
        return error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    supported = SUPPORTED[min(ctx.api_version, 1)]
    types = set(req.resource_types) if ctx.api_version >= 1 and req.resource_types else supported
    if not types <= supported:
        return error_response(req, ctx.api_version, ErrorCode.UNSUPPORTED_VERSION)
    image = ctx.services.image
    brokers = [str(b.broker_id) for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
               if ctx.listener_name in b.endpoints]
    listed = [
        (GROUP, image.names_with_configs(GROUP)),
        (CLIENT_METRICS, image.names_with_configs(CLIENT_METRICS)),
        (BROKER_LOGGER, brokers),
        (BROKER, brokers),
        (TOPIC, sorted(image.topics)),
    ]
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, config_resources=[
        R.ConfigResource(resource_name=name, resource_type=rtype)
        for rtype, names in listed if rtype in types for name in names])


def error_response(req, version, code):
    return R(throttle_time_ms=0, error_code=code, config_resources=[])
