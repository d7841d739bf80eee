"""TxnOffsetCommit (key 28), versions 0-4: offsets committed in a transaction
(``send_offsets_to_transaction``, KIP-98; v3+ carry the consumer's generation, member id and
instance id for fencing, KIP-447). Sent to the group coordinator after AddOffsetsToTxn; the
offsets become visible when the transaction commits. The response follows the append."""

from kcompat.protocol.messages.txn_offset_commit import TxnOffsetCommitResponse as R

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx, req):
    return ctx.broker.groups.submit("txn_offset_commit", ctx, req)


def error_response(req, version, code):
    return R(topics=[R.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
        R.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code) for p in t.partitions])
        for t in req.topics])
