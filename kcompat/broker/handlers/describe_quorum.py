"""DescribeQuorum (key 55), versions 0-2: the metadata quorum's leader, epoch, high watermark and
each voter's and observer's log end offset and fetch times (KIP-595, KIP-836) — what
``kafka-metadata-quorum describe --status / --replication`` prints.

Answered by the quorum leader; on any other node (and on broker listeners) the request is
forwarded to the active controller, as Kafka's brokers do.

With an authorizer DESCRIBE on the cluster is required on broker listeners (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kcompat.broker.authz import Op
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.describe_quorum import DescribeQuorumResponse

API_KEY = 55
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, req):
    if not ctx.authorize_cluster(Op.DESCRIBE):
        return error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    services = ctx.services
    if services.quorum.is_leader:
        return services.quorum.handle_request(req)
    return services.controller_service.forward(req, ctx.api_version, error_response)


def error_response(req, version, code):
    return DescribeQuorumResponse(error_code=code, error_message=ErrorCode(code).name)
