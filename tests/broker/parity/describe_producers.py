"""DescribeProducers' per-topic errors side by side with Apache Kafka 4.3.1
(KafkaApis.handleDescribeProducersRequest): a partition of an existing topic, one the topic does
not have, a topic that does not exist and an invalid topic name, with the error codes and texts
each gets."""

from __future__ import annotations

import time

from kcompat.protocol.messages.describe_producers import DescribeProducersRequest as DP
from kcompat.testing import admin, wire

NOT_LEADER_OR_FOLLOWER = 6


def scenario(bootstrap: str) -> list[tuple]:
    admin.create_topic(bootstrap, "dp", 1, 1)
    req = DP(topics=[DP.TopicRequest(name="dp", partition_indexes=[0, 3]),
                     DP.TopicRequest(name="missing", partition_indexes=[0]),
                     DP.TopicRequest(name="bad name!", partition_indexes=[1])])
    deadline = time.monotonic() + 30
    while True:   # Kafka answers NOT_LEADER_OR_FOLLOWER until its replica manager has the new partition
        resp = wire.call(bootstrap, req, 0)
        answers = [(t.name, p.partition_index, p.error_code, p.error_message, len(p.active_producers))
                   for t in resp.topics for p in t.partitions]
        if answers[0][2] != NOT_LEADER_OR_FOLLOWER or time.monotonic() > deadline:
            return answers
        time.sleep(0.1)


def check(ours, theirs) -> None:
    """Kafka 4.3.1's answers are the expected ones and kcompat's the same."""
    assert theirs[:3] == [("dp", 0, 0, None, 0), ("dp", 3, 3, None, 0),
                          ("missing", 0, 3, "This server does not host this topic-partition.", 0)]
    assert theirs[3][2] == 17   # INVALID_TOPIC_EXCEPTION
    assert ours == theirs
