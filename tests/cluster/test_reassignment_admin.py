"""Reassignments in progress, their listing and cancellation, and the errors of
AlterPartitionReassignments, on a 3-node cluster plus a fourth broker.

- ``kafka-reassign-partitions.sh --execute --throttle 1`` (Kafka 4.3.1) of a plan replacing broker 3
  by broker 4 for a partition holding 2 MB: the replication throttles (1 byte/s, measured over
  11 windows of 1 s; ``replica.fetch.max.bytes`` 64 KiB) let broker 4 copy at most one fetch per
  11 s, so the reassignment stays in progress for minutes, leaving the partition with replicas target + removing (``[1, 2, 4, 3]``), adding ``[4]`` and
  removing ``[3]``: in Metadata, in ListPartitionReassignments (sent to a broker, forwarded to the
  controller), in ``--list`` and in ``kafka-topics.sh --describe`` ("Adding Replicas: 4");
  acks=all produce keeps working on the old ISR.
- ``--cancel`` reverts to ``[1, 2, 3]``; nothing is listed any more.
- Errors, Kafka's codes and messages: an unknown topic or partition (UNKNOWN_TOPIC_OR_PARTITION),
  an unregistered broker, a broker twice or an empty list (INVALID_REPLICA_ASSIGNMENT), cancelling
  what is not in progress (NO_REASSIGNMENT_IN_PROGRESS); the other partitions of the same request
  succeed. ``--execute --disallow-replication-factor-change`` of a plan from 3 replicas to 2 is
  refused (AlterPartitionReassignments v1, INVALID_REPLICATION_FACTOR, KIP-860).
"""

from __future__ import annotations

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from conformance import maven
from conformance.clients.java import JavaTools
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest as A
from kcompat.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest as L
from kcompat.testing import wire
from kcompat.testing.cluster import Cluster, wait_until
from tests.support.reassign import AckedLoad, ReassignTool, assert_exactly_once, read_all, replicas_of

TOPIC = "moving"


@pytest.fixture(scope="module")
def kafka_lib():
    return maven.resolve_kafka("4.3.1")


def _alter(bootstrap: str, wanted: dict) -> dict:
    """AlterPartitionReassignments v0 of ``{(topic, partition): replicas or None}``:
    {(topic, partition): (error code, message)}."""
    topics: dict = {}
    for (t, p), r in wanted.items():
        topics.setdefault(t, []).append(A.ReassignablePartition(partition_index=p, replicas=r))
    resp = wire.call(bootstrap, A(timeout_ms=30000, topics=[A.ReassignableTopic(name=t, partitions=ps)
                                                           for t, ps in topics.items()]), 0)
    assert resp.error_code == ErrorCode.NONE, resp
    return {(t.name, p.partition_index): (p.error_code, p.error_message) for t in resp.responses for p in t.partitions}


def _listed(bootstrap: str, topics=None) -> dict:
    """ListPartitionReassignments v0: {(topic, partition): (replicas, adding, removing)}."""
    req = L(timeout_ms=30000, topics=None if topics is None else
            [L.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps) for t, ps in topics.items()])
    resp = wire.call(bootstrap, req, 0)
    assert resp.error_code == ErrorCode.NONE, resp
    return {(t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
            for t in resp.topics for p in t.partitions}


def test_list_cancel_and_errors(tmp_path, kafka_lib):
    tools = JavaTools(str(kafka_lib), tmp_path)
    # three voters and a broker-only fourth: with four voters the last two to stop have no quorum
    # and each waits out its controlled shutdown (10 s) and its in-flight requests (10 s)
    cluster = Cluster(tmp_path, n=4, overrides={"replica.fetch.max.bytes": "65536"},
                      roles=["broker,controller"] * 3 + ["broker"])
    cluster.start()
    load = None
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, replica_assignment=[[1, 2, 3], [2, 3, 1]])])[TOPIC].result(30)
        wait_until(lambda: all(len(i) == 3 for _r, i, _l in replicas_of(admin, TOPIC).values()), 30, "full ISRs")
        via = f"127.0.0.1:{cluster.client_ports[1]}"       # any broker: it forwards to the active controller
        big = ck.Producer({"bootstrap.servers": via, "acks": "all", "linger.ms": 20})
        for i in range(200):
            big.produce(TOPIC, b"big%05d" % i + b"x" * 10_000, partition=0)
        assert big.flush(60) == 0
        load = AckedLoad(via, TOPIC).start()
        load.wait_for(500)

        reassign = ReassignTool(tools, via, tmp_path)
        plan = {(TOPIC, 0): [1, 2, 4]}
        out = reassign.execute(plan, throttle=1).stdout
        assert "Successfully started partition reassignment" in out, out
        assert _listed(via) == {(TOPIC, 0): ([1, 2, 4, 3], [4], [3])}
        assert _listed(via, {TOPIC: [0, 1, 7], "nope": [0]}) == {(TOPIC, 0): ([1, 2, 4, 3], [4], [3])}
        wait_until(lambda: replicas_of(admin, TOPIC)[0][0] == [1, 2, 4, 3], 30, "replicas 1,2,4,3 in Metadata")
        assert sorted(replicas_of(admin, TOPIC)[0][1]) == [1, 2, 3]
        listing = reassign.list()
        assert f"{TOPIC}-0: replicas: 1,2,4,3. adding: 4. removing: 3." in listing, listing
        described = tools.run("org.apache.kafka.tools.TopicCommand",
                              ["--bootstrap-server", via, "--describe", "--topic", TOPIC], timeout=120).stdout
        row = next(line for line in described.splitlines() if "Partition: 0" in line)
        assert "Replicas: 1,2,4,3" in row and "Adding Replicas: 4" in row and "Removing Replicas: 3" in row, row
        load.wait_for(500)              # acks=all produce carries on with the old ISR

        # errors, with one partition of the same request that succeeds (a reorder: done at once)
        results = _alter(via, {
            (TOPIC, 1): [3, 2, 1], (TOPIC, 9): [1, 2, 3], ("nope", 0): [1, 2, 3],
        })
        assert results[(TOPIC, 1)] == (ErrorCode.NONE, None)
        assert results[(TOPIC, 9)] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {TOPIC}:9.")
        assert results[("nope", 0)] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named nope.")
        for bad, message in (([1, 2, 42], "The manual partition assignment includes broker 42, but no such broker "
                                          "is registered."),
                             ([1, 2, 2], "The manual partition assignment includes the broker 2 more than once."),
                             ([], "The manual partition assignment includes an empty replica list.")):
            assert _alter(via, {(TOPIC, 1): bad}) == {(TOPIC, 1): (ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)}
        assert _alter(via, {(TOPIC, 1): None}) == {
            (TOPIC, 1): (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)}
        refused = reassign.execute({(TOPIC, 1): [3, 2]}, check=False,
                                   extra=("--additional", "--disallow-replication-factor-change"))
        assert not refused.ok and "The replication factor is changed from 3 to 2" in refused.stdout + refused.stderr, \
            refused.summary(40)
        wait_until(lambda: replicas_of(admin, TOPIC)[1][0] == [3, 2, 1], 30, "partition 1 reordered")

        out = reassign.cancel(plan).stdout
        assert "Successfully cancelled partition reassignment" in out, out
        assert _listed(via) == {}
        wait_until(lambda: replicas_of(admin, TOPIC)[0][0] == [1, 2, 3], 30, "partition 0 back on 1,2,3")
        load.wait_for(500)
        load.stop()
        seen = read_all(via, TOPIC)
        assert sum(n for v, n in seen.items() if v.startswith(b"big")) == 200
        assert_exactly_once(load, seen)
    finally:
        if load is not None:
            load._stop.set()
        cluster.stop()
