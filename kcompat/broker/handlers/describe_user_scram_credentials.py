"""DescribeUserScramCredentials (key 50), version 0 (KIP-554): mechanisms and iterations per user.

Answered from this broker's metadata image, as Kafka's ``ScramImage.describe``: all users when the
request names none, RESOURCE_NOT_FOUND for a user without credentials, DUPLICATE_RESOURCE for a
user named twice (:mod:`kcompat.kraft.scram_control`). Needs DESCRIBE on the cluster.
"""

from __future__ import annotations

from kcompat.broker.authz import Op
from kcompat.kraft import scram_control
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsResponse as R

API_KEY = 50
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, req):
    if not ctx.authorize_cluster(Op.DESCRIBE):   # KafkaApis: DESCRIBE on CLUSTER
        return error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return scram_control.describe_credentials(ctx.services.image, req)


def error_response(req, version, code):
    return R(error_code=code, error_message="", results=[])
