"""TxnOffsetCommit (key 28), versions 0-5: offsets committed in a transaction
(``send_offsets_to_transaction``, KIP-98; v3+ carry the consumer's generation, member id and
instance id for fencing, KIP-447). Sent to the group coordinator after AddOffsetsToTxn; the
offsets become visible when the transaction commits. The response follows the append.

v5 is a transaction.version 2 client's (KIP-890 part 2), which sends no AddOffsetsToTxn: the group
coordinator first has the transaction coordinator add the group's ``__consumer_offsets``
partition to the transaction (AddPartitionsToTxn v5 without ``verify_only`` when it is another
broker; Kafka's ``txnOffsetCommitRequestVersionToTransactionSupportedOperation`` ->
``addPartition``), its refusals mapped as below.

KIP-890 part 1 (``transaction.partition.verification.enable``): before the transactional offsets
are written, the transaction coordinator must confirm that ``__consumer_offsets``-<partition of
the group> is in the producer's ongoing transaction, so that a TxnOffsetCommit arriving after its
transaction ended (aborted on timeout, say) cannot leave a hanging transaction of pending offsets
(Kafka's ``GroupCoordinator.handleTxnCommitOffsets`` /
``ReplicaManager.maybeStartTransactionVerificationForPartition``). The group coordinator asks
the transaction coordinator on this broker itself (:meth:`TxnRuntime.verify`); when the
transaction coordinator is another broker the group runtime first asks it with AddPartitionsToTxn v5
``verify_only`` (:meth:`TxnRuntime.verify_remote`, Kafka's ``AddPartitionsToTxnManager``). A
refusal answers every partition with the error Kafka's ``maybeConvertOffsetCommitError`` gives
(``TXN_VERIFY_ERRORS``, the same as the local check): TRANSACTION_ABORTABLE when the partition
is not in the transaction (v4+, Kafka 4.3.1's ``genericErrorSupported``; INVALID_TXN_STATE before,
abortable for the producer either way), INVALID_PRODUCER_EPOCH when fenced,
COORDINATOR_NOT_AVAILABLE (retriable) for NOT_ENOUGH_REPLICAS, i.e. a coordinator that is busy,
loading, moved or unreachable.

With an authorizer WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the
group (GROUP_AUTHORIZATION_FAILED) and READ on each topic (TOPIC_AUTHORIZATION_FAILED) are required.
"""

from __future__ import annotations

from kcompat.broker.authz import GROUP, TOPIC, TRANSACTIONAL_ID, Op, answer_denied
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.txn_offset_commit import TxnOffsetCommitResponse as R

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx, req):
    """Authorize, then the group coordinator (:meth:`GroupRuntime.txn_offset_commit`, which verifies
    with a remote transaction coordinator first where KIP-890 asks it)."""
    if not ctx.authorize(Op.WRITE, TRANSACTIONAL_ID, req.transactional_id):
        return error_response(req, ctx.api_version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize(Op.READ, GROUP, req.group_id):
        return error_response(req, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    denied = [(t, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for t in req.topics if not ctx.authorize(Op.READ, TOPIC, t.name)]
    return answer_denied(ctx, req, "topics", denied, error_response, "topics",
                         lambda: ctx.services.groups.txn_offset_commit(ctx, req))


def error_response(req, version, code):
    return R(topics=[R.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
        R.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code) for p in t.partitions])
        for t in req.topics])
