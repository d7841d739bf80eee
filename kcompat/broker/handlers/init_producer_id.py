"""InitProducerId (key 22), versions 0-5: a producer id and epoch.

Without a transactional id, Kafka's ``TransactionCoordinator.handleInitProducerId`` always hands
out a fresh producer id with epoch 0 — also when an idempotent producer asks to bump its epoch
after an error (KIP-360, v3+ with its current id and epoch). Ids come from controller-allocated
blocks and are never reused, also across restarts. With a transactional id the transaction
coordinator answers: a new id, or the same id with its epoch bumped, fencing older producers
(see :mod:`kcompat.txn.coordinator`).

With an authorizer a transactional producer needs WRITE on its transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), an idempotent one IDEMPOTENT_WRITE on the cluster or WRITE on
some topic (CLUSTER_AUTHORIZATION_FAILED), as Kafka checks.
"""

from __future__ import annotations

from kcompat.broker.authz import Op, TOPIC, TRANSACTIONAL_ID
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.init_producer_id import InitProducerIdResponse as R

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx, req):
    if req.transactional_id is not None and not ctx.authorize(Op.WRITE, TRANSACTIONAL_ID, req.transactional_id):
        return error_response(req, ctx.api_version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if req.transactional_id is None and not (ctx.authorize_cluster(Op.IDEMPOTENT_WRITE)
                                             or ctx.authorize_by_resource_type(Op.WRITE, TOPIC)):
        return error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if req.transactional_id is not None:
        return ctx.services.txn.init_producer_id(ctx, req)
    try:
        producer_id = ctx.services.producer_id_manager.generate()
    except KafkaError as e:  # no producer id block yet: COORDINATOR_LOAD_IN_PROGRESS, retried
        return error_response(req, ctx.api_version, e.code)
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0)


def error_response(req, version, code):
    return R(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
