"""What the clients actually send: the codec of the batches stored on disk.

A client may silently fall back to no compression when it thinks the broker is too old
(librdkafka disables LZ4 unless the broker advertises FindCoordinator). Consuming the records
back cannot notice that, so this test reads the segment files and checks each batch's codec.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer

from kcompat.protocol import compression, records as rb

CODECS = ["gzip", "snappy", "lz4", "zstd"]


def _stored_codecs(broker, topic: str) -> set[int]:
    codecs = set()
    for seg in sorted((broker.data_dir / f"{topic}-0").glob("*.log")):
        data = seg.read_bytes()
        codecs |= {h.compression for _, h in rb.iter_batches(data)}
    return codecs


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_batches_are_stored_with_the_requested_codec(broker, codec):
    topic = f"stored-{codec}-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.codec": codec, "linger.ms": 20})
    for i in range(200):
        p.produce(topic, key=b"k%d" % i, value=b"compressible " * 40)
    assert p.flush(20) == 0
    assert _stored_codecs(broker, topic) == {compression.BY_NAME[codec]}


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_are_stored_with_the_requested_codec(broker, codec):
    topic = f"stored-kp-{codec}-{uuid.uuid4().hex[:6]}"
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=20)
    for i in range(200):
        p.send(topic, key=b"k%d" % i, value=b"compressible " * 40)
    p.flush(20)
    p.close()
    assert _stored_codecs(broker, topic) == {compression.BY_NAME[codec]}
