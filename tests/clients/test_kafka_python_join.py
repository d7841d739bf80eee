"""kafka-python 3.0.12 members get their partitions even when every poll() is short.

A kafka-python leader that assigned before it had the topic's metadata rejoins when the metadata
arrives, and if a poll() times out during that rejoin's SyncGroup the client drops the finished
join and holds no partitions for good (see ``conformance.clients.kafka_python.subscribe_when_known``,
which the group tests subscribe with). Polling every 5 ms makes that window likely: without the
wait for metadata a lone member got stuck 14 times in 15. This test fails if the workaround stops
working (a kafka-python upgrade that renames the private state it reads, for example).
"""

from __future__ import annotations

import time

from kafka import KafkaConsumer

from conformance.clients.kafka_python import subscribe_when_known
from tests.clients.common import topic_name
from tests.clients.test_groups_common import create_topic, unique

ROUNDS = 6


def test_a_lone_member_polling_every_5_ms_gets_its_partitions(broker, request):
    stuck = []
    for i in range(ROUNDS):
        topic = topic_name(request, f"-{i}")
        create_topic(broker.bootstrap, topic, 2)
        c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=unique("kp-join"), enable_auto_commit=False)
        try:
            subscribe_when_known(c, [topic])
            deadline = time.monotonic() + 20
            while not c.assignment() and time.monotonic() < deadline:
                c.poll(timeout_ms=5)
            if {tp.partition for tp in c.assignment()} != {0, 1}:
                stuck.append((i, sorted(tp.partition for tp in c.assignment())))
        finally:
            c.close()
    assert not stuck, f"rounds whose member held no partitions after 20 s: {stuck}"
