"""The transaction coordinator moves with the leader of its ``__transaction_state`` partition: a
three-node cluster (replication factor 3), a confluent-kafka transactional producer writing to a
topic whose partitions are led by different brokers (markers to other brokers go by
WriteTxnMarkers), the coordinator's process killed with SIGKILL between transactions. The
producer goes on with the new coordinator, and a read_committed consumer reads every committed
record and none of an aborted transaction. KIP-890 produce-path verification stays on (Kafka's
default): brokers that are not the coordinator accept the batches unverified."""

from __future__ import annotations

import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from tests.group.test_failover_cluster import coordinator
from tests.support.cluster import Cluster, wait_until

PARTITIONS = 3


def transaction(producer, i: int, n: int = 20, *, commit: bool = True) -> list[bytes]:
    producer.begin_transaction()
    values = [f"{i}-{k}".encode() for k in range(n)]
    for k, v in enumerate(values):
        producer.produce("t", value=v, partition=k % PARTITIONS)
    if commit:
        producer.commit_transaction(60)
    else:
        producer.abort_transaction(60)
    return values


def test_transactions_go_on_after_a_kill9_of_the_transaction_coordinator(tmp_path):
    overrides = {"offsets.topic.replication.factor": "3", "transaction.state.log.replication.factor": "3"}
    with Cluster(tmp_path, 3, overrides=overrides) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})  # alive until the result arrives
        admin.create_topics([NewTopic("t", PARTITIONS, 3)])["t"].result(15)
        producer = ck.Producer({"bootstrap.servers": c.bootstrap, "transactional.id": "tx"})
        producer.init_transactions(30)
        sent = []
        for i in range(3):
            sent += transaction(producer, i)
        killed = wait_until(lambda: coordinator(c, "tx", 1), 10, "a transaction coordinator")
        c.node(killed).kill9()
        for i in range(3, 6):
            sent += transaction(producer, i)
        assert coordinator(c, "tx", 1) not in (None, killed)
        aborted = transaction(producer, 6, commit=False)
        consumer = ck.Consumer({"bootstrap.servers": c.bootstrap, "group.id": "reader",
                                "isolation.level": "read_committed", "enable.auto.commit": False})
        try:
            consumer.assign([ck.TopicPartition("t", p, 0) for p in range(PARTITIONS)])
            got = []
            deadline = time.monotonic() + 30
            while len(got) < len(sent) and time.monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is not None and not m.error():
                    got.append(m.value())
            end = time.monotonic() + 1
            while time.monotonic() < end:  # nothing more may come: the aborted records stay hidden
                m = consumer.poll(0.2)
                if m is not None and not m.error():
                    got.append(m.value())
        finally:
            consumer.close()
        assert sorted(got) == sorted(sent)
        assert not set(aborted) & set(got)
