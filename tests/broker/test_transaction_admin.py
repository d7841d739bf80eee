"""DescribeTransactions, ListTransactions and DescribeProducers (KIP-664) on a live transaction."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer

from kcompat.protocol.messages.describe_producers import DescribeProducersRequest
from kcompat.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kcompat.protocol.messages.list_transactions import ListTransactionsRequest
from kcompat.testing import wire


def test_transaction_admin_apis_show_an_open_transaction(broker):
    topic = f"txn-admin-{uuid.uuid4().hex[:6]}"
    tid = f"tid-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "transaction.timeout.ms": 60000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"open")
    p.flush(10)

    listed = wire.call(broker.bootstrap, ListTransactionsRequest(state_filters=["Ongoing"], producer_id_filters=[],
                                                                 duration_filter=-1), 1)
    assert listed.error_code == 0
    mine = [t for t in listed.transaction_states if t.transactional_id == tid]
    assert len(mine) == 1 and mine[0].transaction_state == "Ongoing"
    pid = mine[0].producer_id

    described = wire.call(broker.bootstrap, DescribeTransactionsRequest(transactional_ids=[tid, "no-such-id"]), 0)
    d, missing = described.transaction_states
    assert (d.error_code, d.transaction_state, d.producer_id, d.transaction_timeout_ms) == (0, "Ongoing", pid, 60000)
    assert [(t.topic, t.partitions) for t in d.topics] == [(topic, [0])]
    assert missing.error_code == 105  # TRANSACTIONAL_ID_NOT_FOUND

    producers = wire.call(broker.bootstrap, DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0, 7])]), 0)
    part0, part7 = producers.topics[0].partitions
    assert part7.error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    (state,) = part0.active_producers
    assert (state.producer_id, state.last_sequence, state.current_txn_start_offset) == (pid, 0, 0)

    p.commit_transaction(30)
    after = wire.call(broker.bootstrap, DescribeTransactionsRequest(transactional_ids=[tid]), 0)
    assert after.transaction_states[0].transaction_state == "CompleteCommit"
