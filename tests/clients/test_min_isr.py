"""acks=all against ``min.insync.replicas`` above the replication factor.

Kafka counts ``min(min.insync.replicas, assigned replicas)`` (``Partition.effectiveMinIsr``), so a
topic of replication factor 1 with ``min.insync.replicas=2`` takes acks=all produces: Kafka 3.9.2
and 4.3.1 both answered such a Produce with error 0 side by side (kcompat answered
NOT_ENOUGH_REPLICAS before). A single-node setup that copies a cluster's
``min.insync.replicas=2`` keeps working.
"""

from __future__ import annotations

import uuid

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic


def test_acks_all_on_a_single_replica_topic_with_min_insync_replicas_2(broker):
    topic = f"minisr-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"min.insync.replicas": "2"})])[topic].result(20)
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True,
                            "message.timeout.ms": 20000})
    reports = []
    for i in range(5):
        producer.produce(topic, value=b"v%d" % i, on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert producer.flush(30) == 0
    assert reports == [(None, i) for i in range(5)]
