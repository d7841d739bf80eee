"""The example tests from kcompat's README: the same check with kafka-python, confluent-kafka and
aiokafka, each against the session's kcompat broker and a fresh topic of its own."""

import pytest
from kafka import KafkaConsumer, KafkaProducer

from orders import encode, totals

ORDERS = [{"customer": "ada", "amount": 3}, {"customer": "bob", "amount": 5}, {"customer": "ada", "amount": 4}]


def test_totals_with_kafka_python(kafka_broker, kafka_topic):
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
    for order in ORDERS:
        key, value = encode(order)
        producer.send(kafka_topic, key=key, value=value)
    producer.flush()
    consumer = KafkaConsumer(kafka_topic, bootstrap_servers=kafka_broker.bootstrap_servers,
                             group_id="totals", auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    assert totals([m.value for m in consumer]) == {"ada": 7, "bob": 5}
    consumer.close()


def test_totals_with_confluent_kafka(kafka_broker, kafka_topic):
    from confluent_kafka import Consumer, Producer

    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for order in ORDERS:
        key, value = encode(order)
        producer.produce(kafka_topic, key=key, value=value)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "totals",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([kafka_topic])
    values = []
    while len(values) < len(ORDERS):
        message = consumer.poll(10)
        assert message is not None and message.error() is None
        values.append(message.value())
    consumer.close()
    assert totals(values) == {"ada": 7, "bob": 5}


@pytest.mark.asyncio
async def test_totals_with_aiokafka(kafka_broker, kafka_topic):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
    await producer.start()
    try:
        for order in ORDERS:
            key, value = encode(order)
            await producer.send_and_wait(kafka_topic, key=key, value=value)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(kafka_topic, bootstrap_servers=kafka_broker.bootstrap_servers,
                                group_id="totals", auto_offset_reset="earliest")
    await consumer.start()
    try:
        batches = await consumer.getmany(timeout_ms=10_000, max_records=len(ORDERS))
        values = [m.value for records in batches.values() for m in records]
        while len(values) < len(ORDERS):
            values.append((await consumer.getone()).value)
    finally:
        await consumer.stop()
    assert totals(values) == {"ada": 7, "bob": 5}


@pytest.mark.kafka_topic(partitions=1)
def test_an_acknowledged_order_survives_the_leaders_crash(kafka_cluster, kafka_topic):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": "all"})
    key, value = encode(ORDERS[0])
    producer.produce(kafka_topic, key=key, value=value)
    assert producer.flush(30) == 0
    kafka_cluster.kill(kafka_cluster.leader_of(kafka_topic))   # the cluster fixture heals after the test
    producer.produce(kafka_topic, key=key, value=value)
    assert producer.flush(60) == 0
