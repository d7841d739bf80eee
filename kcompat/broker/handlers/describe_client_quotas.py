"""DescribeClientQuotas (key 48), versions 0-1 (KIP-546): kcompat sets no client quotas, so no entity
has any and the answer lists none.

``kafka-configs.sh --describe --entity-type users`` sends it before describing SCRAM credentials
(``ConfigCommand.describeClientQuotaAndUserScramCredentialConfigs``); without it the tool fails.
The filter is checked as Kafka's ``ClientQuotaFilterComponent``: match type 0 (exact) needs a
name, 1 (default) and 2 (any) take none; an unknown match type is INVALID_REQUEST.
"""

from __future__ import annotations

from kcompat.broker.authz import Op
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.describe_client_quotas import DescribeClientQuotasResponse as R

API_KEY = 48
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx, req):
    if not ctx.authorize_cluster(Op.DESCRIBE_CONFIGS):   # KafkaApis: DESCRIBE_CONFIGS on CLUSTER
        return error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    for c in req.components:
        if c.match_type not in (0, 1, 2):
            return R(error_code=ErrorCode.INVALID_REQUEST, error_message=f"Unexpected match type: {c.match_type}",
                     entries=None)
        if c.match_type == 0 and c.match is None:
            return R(error_code=ErrorCode.INVALID_REQUEST,
                     error_message=f"Exact match for entity type {c.entity_type} requires a name", entries=None)
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, entries=[])


def error_response(req, version, code):
    return R(error_code=code, error_message=None, entries=None)
