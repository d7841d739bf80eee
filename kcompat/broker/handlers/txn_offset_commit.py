"""TxnOffsetCommit (key 28), versions 0-4: offsets committed in a transaction
(``send_offsets_to_transaction``, KIP-98; v3+ carry the consumer's generation, member id and
instance id for fencing, KIP-447). Sent to the group coordinator after AddOffsetsToTxn; the
offsets become visible when the transaction commits. The response follows the append.

KIP-890 part 1 (``transaction.partition.verification.enable``): before the transactional offsets
are written, the transaction coordinator must confirm that ``__consumer_offsets``-<partition of
the group> is in the producer's ongoing transaction, so that a TxnOffsetCommit arriving after its
transaction ended (aborted on timeout, say) cannot leave a hanging transaction of pending offsets
(Kafka's ``GroupCoordinator.handleTxnCommitOffsets`` /
``ReplicaManager.maybeStartTransactionVerificationForPartition``). The group coordinator asks
the transaction coordinator on this broker itself (:meth:`TxnRuntime.verify`); when the
transaction coordinator is another broker this handler first asks it with AddPartitionsToTxn v5
``verify_only`` (:meth:`TxnRuntime.verify_remote`, Kafka's ``AddPartitionsToTxnManager``). A
refusal answers every partition with the error Kafka's ``maybeConvertOffsetCommitError`` gives
(``TXN_VERIFY_ERRORS``, the same as the local check): INVALID_TXN_STATE when the partition is
not in the transaction (abortable for the producer), INVALID_PRODUCER_EPOCH when fenced,
COORDINATOR_NOT_AVAILABLE (retriable) for NOT_ENOUGH_REPLICAS, i.e. a coordinator that is busy,
loading, moved or unreachable.

With an authorizer WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the
group (GROUP_AUTHORIZATION_FAILED) and READ on each topic (TOPIC_AUTHORIZATION_FAILED) are required.
"""

from __future__ import annotations

from kcompat.broker.authz import GROUP, TOPIC, TRANSACTIONAL_ID, Op, answer_denied
from kcompat.group.coordinator_types import TXN_VERIFY_ERRORS
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.txn_offset_commit import TxnOffsetCommitResponse as R

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx, req):
    """Submit to the group coordinator; first, when verification is on, this broker coordinates
    the group and the transaction coordinator is another broker, verify with it."""
    if not ctx.authorize(Op.WRITE, TRANSACTIONAL_ID, req.transactional_id):
        return error_response(req, ctx.api_version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize(Op.READ, GROUP, req.group_id):
        return error_response(req, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    denied = [(t, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for t in req.topics if not ctx.authorize(Op.READ, TOPIC, t.name)]
    return answer_denied(ctx, req, "topics", denied, error_response, "topics", lambda: _permitted(ctx, req))


def _permitted(ctx, req):
    services = ctx.services
    groups = services.groups
    tid = req.transactional_id
    node = None
    if (tid and services.replica_manager.txn_verifier is not None  # transaction.partition.verification.enable
            and req.group_id and any(services.image.has_partition(t.name, p.partition_index)
                                     for t in req.topics for p in t.partitions)):
        partition = groups.coordinator.partition_for(req.group_id)
        # NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS answers need no round trip
        if groups.coordinator.owns(partition):
            node = services.txn.remote_coordinator(tid)
    if node is None:
        return groups.txn_offset_commit(ctx, req)
    return _commit_after_remote_verification(ctx, req, node, partition)


async def _commit_after_remote_verification(ctx, req, node: int, partition: int):
    services = ctx.services
    topic = services.groups.TOPIC
    timeout_s = services.config.get("request.timeout.ms") / 1000.0
    codes = await services.txn.verify_remote(node, req.transactional_id, req.producer_id, req.producer_epoch,
                                           [(topic, partition)], timeout_s)
    code = codes.get((topic, partition), 0)
    if not code:
        return await services.groups.txn_offset_commit(ctx, req)
    error = TXN_VERIFY_ERRORS.get(ErrorCode(code), ErrorCode(code))
    # partitions that do not exist are UNKNOWN_TOPIC_OR_PARTITION whatever the verification says,
    # as the coordinator answers them before verifying
    return R(throttle_time_ms=0, topics=[R.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
        R.TxnOffsetCommitResponsePartition(
            partition_index=p.partition_index,
            error_code=int(error if services.image.has_partition(t.name, p.partition_index)
                           else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        for p in t.partitions]) for t in req.topics])


def error_response(req, version, code):
    return R(topics=[R.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
        R.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code) for p in t.partitions])
        for t in req.topics])
