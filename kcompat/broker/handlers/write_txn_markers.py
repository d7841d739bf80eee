"""WriteTxnMarkers (key 27), versions 0-2 (Kafka 4.0 dropped v0, a 3.x peer's; kcompat keeps
serving it, as it does the other versions Kafka 4 removed): write COMMIT/ABORT markers to
partitions this broker leads (sent by a transaction coordinator to partition leaders, KIP-98). On
a single node the coordinator writes its markers directly; this API serves coordinators on other
brokers. v2 carries each marker's
TransactionVersion (KIP-1228): a TV2 marker must have an epoch above the producer's in the
partition (its EndTxn bumped it), or the same epoch with no transaction open there (a marker sent
again); v1 markers (version 0) need an epoch no older than the producer's.

As Kafka's ``handleWriteTxnMarkersRequest`` (an acks=-1 append): only the partition's leader
writes (NOT_LEADER_OR_FOLLOWER elsewhere), and the answer waits until each marker is on the whole
ISR (the HW passed it), at most ``request.timeout.ms``; a replication failure is that partition's
error and the coordinator sends the marker again. On a single replica the answer is immediate.

With an authorizer CLUSTER_ACTION on the cluster is required (CLUSTER_AUTHORIZATION_FAILED).
"""

from kcompat.broker.authz import Op
import asyncio

from kcompat.broker.group_runtime import OFFSETS_TOPIC
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.write_txn_markers import WriteTxnMarkersResponse as R

API_KEY = 27
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, req):
    if not ctx.authorize_cluster(Op.CLUSTER_ACTION):
        return error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    services = ctx.services
    now = services.now_ms()
    timeout_ms = services.config.get("request.timeout.ms")
    results = []
    waits = []   # (partition result, awaitable ErrorCode)
    for m in req.markers:
        commit = bool(m.transaction_result)
        topics = []
        for t in m.topics:
            parts = []
            for index in t.partition_indexes:
                wait = None
                try:
                    if t.name == OFFSETS_TOPIC:
                        wait = services.groups.write_txn_marker(index, m.producer_id, m.producer_epoch,
                                                              m.coordinator_epoch, commit, m.transaction_version)
                    else:
                        p = services.replica_manager.get(t.name, index)
                        if p is None:
                            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                        if not p.is_leader:
                            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                        offset = p.append_marker(m.producer_id, m.producer_epoch, m.coordinator_epoch, commit, now,
                                                 m.transaction_version)
                        if p.high_watermark <= offset:
                            wait = p.wait_for_replication(offset + 1, timeout_ms)
                    code = ErrorCode.NONE
                except KafkaError as e:
                    code = e.code
                result = R.WritableTxnMarkerPartitionResult(partition_index=index, error_code=code)
                if wait is not None:
                    waits.append((result, wait))
                parts.append(result)
            topics.append(R.WritableTxnMarkerTopicResult(name=t.name, partitions=parts))
        results.append(R.WritableTxnMarkerResult(producer_id=m.producer_id, topics=topics))
    response = R(markers=results)
    if any(not (isinstance(w, asyncio.Future) and w.done()) for _, w in waits):
        return _after_replication(response, waits)
    for result, fut in waits:
        result.error_code = fut.result()
    return response


async def _after_replication(response, waits: list):
    """Answer once every marker is replicated (or failed to be)."""
    codes = await asyncio.gather(*(w for _, w in waits))
    for (result, _), code in zip(waits, codes):
        result.error_code = code
    return response


def error_response(req, version, code):
    return R(markers=[R.WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
        R.WritableTxnMarkerTopicResult(name=t.name, partitions=[
            R.WritableTxnMarkerPartitionResult(partition_index=i, error_code=code) for i in t.partition_indexes])
        for t in m.topics]) for m in req.markers])
