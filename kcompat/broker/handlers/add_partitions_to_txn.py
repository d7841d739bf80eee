"""AddPartitionsToTxn (key 24), versions 0-5: add partitions to a producer's open transaction.

v0-3 are the client's form; v4-5 are the batched broker form of KIP-890 (several transactional
ids, ``verify_only`` checks). Answered by the transaction coordinator (:mod:`kcompat.txn`).

With an authorizer (v0-3) WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on
every topic (TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED); v4+ (brokers verifying)
CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

from kcompat.broker.authz import Op, TOPIC, TRANSACTIONAL_ID
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnResponse as R

API_KEY = 24
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx, req):
    version = ctx.api_version
    if version >= 4:
        if not ctx.authorize_cluster(Op.CLUSTER_ACTION):   # brokers' batched verification (KIP-890)
            return error_response(req, version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return ctx.services.txn.add_partitions_to_txn(ctx, req)
    if not ctx.authorize(Op.WRITE, TRANSACTIONAL_ID, req.v3_and_below_transactional_id):
        return error_response(req, version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    denied = {t.name for t in req.v3_and_below_topics if not ctx.authorize(Op.WRITE, TOPIC, t.name)}
    if denied:   # Kafka fails the whole request: the others are OPERATION_NOT_ATTEMPTED
        return R(throttle_time_ms=0, results_by_topic_v3_and_below=[
            *_topics([t for t in req.v3_and_below_topics if t.name in denied], ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            *_topics([t for t in req.v3_and_below_topics if t.name not in denied],
                     ErrorCode.OPERATION_NOT_ATTEMPTED)])
    return ctx.services.txn.add_partitions_to_txn(ctx, req)


def _topics(topics, code):
    return [R.AddPartitionsToTxnTopicResult(name=t.name, results_by_partition=[
        R.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code) for p in t.partitions])
        for t in topics]


def error_response(req, version, code):
    if version >= 4:
        return R(error_code=code, results_by_transaction=[
            R.AddPartitionsToTxnResult(transactional_id=t.transactional_id, topic_results=_topics(t.topics, code))
            for t in req.transactions])
    return R(results_by_topic_v3_and_below=_topics(req.v3_and_below_topics, code))
