"""Committed offsets survive a broker restart — a clean one (SIGTERM) and a crash (``kill -9``) —
with confluent-kafka and kafka-python against a real kcompat process: members commit (with a metadata
string and the leader epoch of the last record read), every consumer stops, more records arrive, the
broker restarts over the same data, and consumers of the same groups resume exactly at the committed
offsets (nothing committed is read again, nothing after it is skipped). committed() / OffsetFetch
return the offset, metadata and leader epoch that were committed.

The broker runs with group.initial.rebalance.delay.ms=0 (these tests are about offsets, not about
the join delay).
"""

from __future__ import annotations

import confluent_kafka as ck
import pytest
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from tests.clients.common import topic_name
from tests.clients.test_groups_common import (
    KINDS, Members, assert_exactly_once, broker_committed, create_topic, end_offsets, produce, unique,
    wait_balanced, wait_committed, wait_read,
)
from tests.support.broker_process import BrokerProcess

PARTITIONS = 6


def committed_via_client(kind: str, bootstrap: str, group: str, topic: str) -> dict[int, tuple[int, str, int]]:
    """The consumer's own committed() (OffsetFetch): partition -> (offset, metadata, leader epoch)."""
    if kind == "confluent":
        c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            tps = c.committed([ck.TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
        finally:
            c.close()
        assert all(tp.error is None for tp in tps), tps
        return {tp.partition: (tp.offset, tp.metadata or "", tp.leader_epoch if tp.leader_epoch is not None else -1)
                for tp in tps}
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        out = {}
        for p in range(PARTITIONS):
            om = c.committed(KpTopicPartition(topic, p), metadata=True, timeout_ms=20000)
            out[p] = (om.offset, om.metadata, om.leader_epoch if om.leader_epoch is not None else -1)
        return out
    finally:
        c.close()


@pytest.mark.parametrize("how", ["sigterm", "kill9"])
def test_members_resume_at_committed_offsets_after_broker_restart(tmp_path, request, how):
    b = BrokerProcess(tmp_path / "data", overrides={"group.initial.rebalance.delay.ms": "0"})
    b.start()
    try:
        topic = topic_name(request)
        create_topic(b.bootstrap, topic, PARTITIONS)
        groups = {kind: unique(f"restart-{kind}") for kind in KINDS}
        sent1 = produce(b.bootstrap, topic, 600, "first", partitions=PARTITIONS)
        ends1 = end_offsets(sent1)
        with Members() as ms:
            first = {kind: [ms.new(kind, f"{kind}-{i}", b.bootstrap, groups[kind], topic, metadata=f"{kind}:")
                            for i in range(2)] for kind in KINDS}
            for kind in KINDS:
                wait_balanced(first[kind], PARTITIONS)
                wait_read(sent1, first[kind])
                wait_committed(first[kind], ends1)
            ms.stop(*first["confluent"], *first["kafka-python"])
        expected = {}
        for kind in KINDS:
            expected[kind] = {}
            for m in first[kind]:
                expected[kind].update(m.last_commit)
            assert {p: c[0] for p, c in expected[kind].items()} == ends1
            assert all(c[1] == f"{kind}:p{p}@{c[0]}" for p, c in expected[kind].items())
            assert committed_via_client(kind, b.bootstrap, groups[kind], topic) == expected[kind]
            assert all(e >= 0 for _, _, e in expected[kind].values()), f"no leader epoch committed: {expected[kind]}"

        sent2 = produce(b.bootstrap, topic, 300, "second", partitions=PARTITIONS)  # written before the restart
        if how == "sigterm":
            b.restart()
        else:
            b.kill9()
            b.start()
        sent3 = produce(b.bootstrap, topic, 300, "third", partitions=PARTITIONS)

        for kind in KINDS:
            # offset, metadata string and leader epoch as committed, through the client and the admin API
            assert committed_via_client(kind, b.bootstrap, groups[kind], topic) == expected[kind], kind
            # (confluent-kafka sends the metadata string with a trailing NUL byte; other clients see it)
            nul = "\x00" if kind == "confluent" else ""
            assert broker_committed(b.bootstrap, groups[kind], topic, PARTITIONS) == {
                p: (o, m + nul, e) for p, (o, m, e) in expected[kind].items()}, kind
        with Members() as ms:
            again = {kind: [ms.new(kind, f"{kind}-{i}-again", b.bootstrap, groups[kind], topic) for i in range(2)]
                     for kind in KINDS}
            for kind in KINDS:
                wait_balanced(again[kind], PARTITIONS)
                wait_read(sent2 + sent3, again[kind])
                wait_committed(again[kind], end_offsets(sent1 + sent2 + sent3))
            ms.stop(*again["confluent"], *again["kafka-python"])
        for kind in KINDS:
            # exactly the records after the committed offsets: none read again, none skipped
            assert_exactly_once(sent2 + sent3, again[kind])
    finally:
        if b.proc is not None:
            b.stop()
