"""AlterUserScramCredentials (key 51), version 0 (KIP-554): SCRAM credentials in the metadata log.

Forwarded to the active controller like other admin writes; the controller validates and commits
``UserScramCredentialRecord`` / ``RemoveUserScramCredentialRecord`` (:mod:`kcompat.kraft.scram_control`
has the checks and Kafka's errors). ``kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[...]'
--entity-type users`` sends this request. Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kcompat.broker.authz import Op
from kcompat.kraft import scram_control
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsResponse as R

API_KEY = 51
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, req):
    if not ctx.authorize_cluster(Op.ALTER):   # KafkaApis: ALTER on CLUSTER
        return error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return ctx.services.controller_service.handle(ctx, req, lambda: _local(ctx, req), error_response)


def _local(ctx, req):
    services = ctx.services
    records, response = scram_control.alter_credentials(services.image, req)
    services.controller.commit(records, services.now_ms())
    return response


def error_response(req, version, code):
    names = list(dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions]))
    return R(results=[R.AlterUserScramCredentialsResult(user=n, error_code=code, error_message=None) for n in names])
