"""DescribeClientQuotas (key 48), versions 0-1 (KIP-546): the client quotas of the metadata image.

Answered from this broker's image as Kafka's ``ClientQuotasImage.describe``
(:func:`kcompat.kraft.quota_control.describe_client_quotas`): filter components match an entity
type exactly, its default or any name; ``strict`` excludes entities with other types. A bad filter
is INVALID_REQUEST (UNSUPPORTED_VERSION for an unknown entity type) with Kafka's message.
``kafka-configs.sh --describe --entity-type users|clients`` sends it. Needs DESCRIBE_CONFIGS on
the cluster.
"""

from __future__ import annotations

from kcompat.broker.authz import Op
from kcompat.kraft import quota_control
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.describe_client_quotas import DescribeClientQuotasResponse as R

API_KEY = 48
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx, req):
    if not ctx.authorize_cluster(Op.DESCRIBE_CONFIGS):   # KafkaApis: DESCRIBE_CONFIGS on CLUSTER
        return error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return quota_control.describe_client_quotas(ctx.services.image.client_quotas, req)


def error_response(req, version, code):
    return R(error_code=code, error_message=None, entries=None)
