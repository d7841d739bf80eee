"""Record-level produce errors (KIP-467) against a real broker: one batch of 100 records to a
compacted topic, ten of them without a key. Kafka answers INVALID_RECORD with ``record_errors``
naming the ten batch indexes and the summary ``error_message``; librdkafka then fails exactly those
ten with INVALID_RECORD and the other ninety with ``_INVALID_DIFFERENT_RECORD``, and nothing of the
batch is stored."""

from __future__ import annotations

import confluent_kafka as ck
import pytest

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.records import build_batch
from tests.clients.common import now_ms, topic_name
from tests.robustness.util import create_topic, produce, read_records

KEYLESS = [3, 17, 29, 41, 50, 58, 66, 77, 88, 99]


def keyless_batch(ts: int) -> bytes:
    return build_batch([(ts, None if i in KEYLESS else b"key-%d" % i, b"value-%d" % i, ()) for i in range(100)])


@pytest.mark.parametrize("version", [8, 9, 11])
def test_produce_response_lists_every_keyless_record(broker, request, version):
    topic = topic_name(request)
    create_topic(broker.bootstrap, topic, configs={"cleanup.policy": "compact"})
    resp = produce(broker.bootstrap, topic, 0, keyless_batch(now_ms()), version=version)
    assert resp.error_code == ErrorCode.INVALID_RECORD
    msg = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    assert [(e.batch_index, e.batch_index_error_message) for e in resp.record_errors] == [(i, msg) for i in KEYLESS]
    assert resp.error_message == (
        "One or more records have been rejected due to 10 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=3, message='{msg}'), RecordError(batchIndex=17, "
        f"message='{msg}'), RecordError(batchIndex=29, message='{msg}')]")
    assert resp.base_offset == -1 and resp.log_start_offset == 0
    assert read_records(broker.bootstrap, topic, 0) == []


def test_librdkafka_fails_only_the_keyless_records_with_invalid_record(broker, request):
    topic = topic_name(request)
    create_topic(broker.bootstrap, topic, configs={"cleanup.policy": "compact"})
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2000,
                            "batch.num.messages": 1000, "enable.idempotence": False, "retries": 0})
    # the topic's leader known first: a record produced before librdkafka has the topic's metadata
    # waits on its unassigned queue and may leave in another batch than the records produced after
    # the metadata came (seen: some records appended, others failing without being keyless)
    producer.list_topics(topic, timeout=10)
    reports: dict[int, int] = {}

    def report(i):
        return lambda err, _msg: reports.__setitem__(i, err.code() if err is not None else 0)

    for i in range(100):
        producer.produce(topic, key=None if i in KEYLESS else b"key-%d" % i, value=b"value-%d" % i,
                         partition=0, on_delivery=report(i))
    assert producer.flush(30) == 0
    assert len(reports) == 100
    assert sorted(i for i, code in reports.items() if code == ck.KafkaError.INVALID_RECORD) == KEYLESS
    assert {code for i, code in reports.items() if i not in KEYLESS} == {ck.KafkaError._INVALID_DIFFERENT_RECORD}
    assert read_records(broker.bootstrap, topic, 0) == []
