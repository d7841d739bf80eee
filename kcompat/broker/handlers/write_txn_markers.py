"""WriteTxnMarkers (key 27), versions 0-1: write COMMIT/ABORT markers to partitions this broker
leads (sent by a transaction coordinator to partition leaders, KIP-98). On a single node the
coordinator writes its markers directly; this API serves coordinators on other brokers."""

from kcompat.broker.group_runtime import OFFSETS_TOPIC
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.write_txn_markers import WriteTxnMarkersResponse as R

API_KEY = 27
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx, req):
    broker = ctx.broker
    now = broker.now_ms()
    results = []
    for m in req.markers:
        commit = bool(m.transaction_result)
        topics = []
        for t in m.topics:
            parts = []
            for index in t.partition_indexes:
                try:
                    if t.name == OFFSETS_TOPIC:
                        broker.groups.write_txn_marker(index, m.producer_id, m.producer_epoch, m.coordinator_epoch,
                                                       commit)
                    else:
                        p = broker.replica_manager.get(t.name, index)
                        if p is None:
                            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                        p.append_marker(m.producer_id, m.producer_epoch, m.coordinator_epoch, commit, now)
                    code = ErrorCode.NONE
                except KafkaError as e:
                    code = e.code
                parts.append(R.WritableTxnMarkerPartitionResult(partition_index=index, error_code=code))
            topics.append(R.WritableTxnMarkerTopicResult(name=t.name, partitions=parts))
        results.append(R.WritableTxnMarkerResult(producer_id=m.producer_id, topics=topics))
    return R(markers=results)


def error_response(req, version, code):
    return R(markers=[R.WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
        R.WritableTxnMarkerTopicResult(name=t.name, partitions=[
            R.WritableTxnMarkerPartitionResult(partition_index=i, error_code=code) for i in t.partition_indexes])
        for t in m.topics]) for m in req.markers])
