"""AddPartitionsToTxn (key 24), versions 0-5: add partitions to a producer's open transaction.

v0-3 are the client's form; v4-5 are the batched broker form of KIP-890 (several transactional
ids, ``verify_only`` checks). Answered by the transaction coordinator (:mod:`kcompat.txn`).
"""

from kcompat.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnResponse as R

API_KEY = 24
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx, req):
    return ctx.broker.txn.add_partitions_to_txn(ctx, req)


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
