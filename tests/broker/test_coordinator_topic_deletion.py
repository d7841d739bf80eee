"""Deleting ``__consumer_offsets`` / ``__transaction_state`` (``kafka-topics --delete`` allows it on
Kafka 4.3.1) takes their groups and transactions with them: Kafka's broker resigns the coordinator
of each deleted partition (``BrokerMetadataPublisher.updateCoordinator``, "Unloading group
metadata" in its log), so ListGroups / ListTransactions no longer show them and the recreated
topics start empty. kcompat had kept serving them from memory after their logs were gone."""

from __future__ import annotations

import time

import confluent_kafka as ck

from kcompat.protocol.messages.list_transactions import ListTransactionsRequest
from kcompat.testing import admin, wire
from tests.clients.common import ck_consumer, ck_producer, close_ck_producer
from tests.support.broker_process import BrokerProcess

INTERNAL = ["__consumer_offsets", "__transaction_state"]


def transactional_ids(bootstrap: str) -> list[str]:
    resp = wire.call(bootstrap, ListTransactionsRequest(), 1)
    assert resp.error_code == 0, resp
    return sorted(s.transactional_id for s in resp.transaction_states)


def eventually(fn, want, timeout_s: float = 30.0):
    """``fn()`` once it returns ``want`` (fails with the last value after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while (got := fn()) != want and time.monotonic() < deadline:
        time.sleep(0.1)
    assert got == want
    return got


def test_deleted_coordinator_topics_take_their_groups_and_transactions(tmp_path):
    with BrokerProcess(tmp_path / "data") as b:
        bs = b.bootstrap
        admin.create_topic(bs, "t")
        c = ck_consumer(bs, **{"group.id": "g"})
        try:
            c.commit(offsets=[ck.TopicPartition("t", 0, 1)], asynchronous=False)
        finally:
            c.close()
        p = ck_producer(bs, **{"transactional.id": "tid"})
        try:
            p.init_transactions(30)
            p.begin_transaction()
            p.produce("t", value=b"v", partition=0)
            p.commit_transaction(30)
        finally:
            close_ck_producer(p)
        assert admin.list_groups(bs) == ["g"] and transactional_ids(bs) == ["tid"]

        admin.delete_topics(bs, INTERNAL)
        eventually(lambda: [n for n in INTERNAL if n in admin.list_topics(bs, internal=True)], [])
        eventually(lambda: admin.list_groups(bs), [])
        assert transactional_ids(bs) == []
        # the group's coordinator (on a recreated __consumer_offsets) has no offsets for it
        c = ck_consumer(bs, **{"group.id": "g"})
        try:
            (got,) = c.committed([ck.TopicPartition("t", 0)], timeout=30)
            assert got.offset == ck.OFFSET_INVALID and got.error is None
        finally:
            c.close()
        assert admin.list_groups(bs) == []
