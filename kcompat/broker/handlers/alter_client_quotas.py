"""AlterClientQuotas (key 49), versions 0-1 (KIP-546): client quotas in the metadata log.

Forwarded to the active controller like other admin writes; the controller validates and commits
``ClientQuotaRecord``s (:mod:`kcompat.kraft.quota_control` has the checks and Kafka's errors), and
every broker's quota managers follow the image (:mod:`kcompat.broker.quota`).
``kafka-configs.sh --alter --entity-type users|clients --add-config producer_byte_rate=...``
sends this request. Needs ALTER_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED per entity).
"""

from __future__ import annotations

from kcompat.broker.authz import Op
from kcompat.kraft import quota_control
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.alter_client_quotas import AlterClientQuotasResponse as R

API_KEY = 49
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx, req):
    if not ctx.authorize_cluster(Op.ALTER_CONFIGS):   # KafkaApis / ControllerApis: ALTER_CONFIGS on CLUSTER
        return error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return ctx.services.controller_service.handle(ctx, req, lambda: _local(ctx, req), error_response)


def _local(ctx, req):
    services = ctx.services
    records, response = quota_control.alter_client_quotas(services.image.client_quotas, req)
    services.controller.commit(records, services.now_ms())
    return response


def error_response(req, version, code):
    return R(entries=[R.EntryData(error_code=code, error_message=None,
                                  entity=[R.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                                          for e in entry.entity])
                      for entry in req.entries])
