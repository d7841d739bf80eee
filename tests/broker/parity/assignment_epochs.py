"""KIP-1251 assignment epochs side by side with Apache Kafka 4.3.1, over the wire: two KIP-848
members share a topic after a rebalance (the first keeps one partition it got at its first epoch,
the second gets the other at a later one), then OffsetCommit v9 and TxnOffsetCommit v3 with
current, older and newer member epochs. Kafka 4.3.1 takes an older epoch for a partition the
member has had since that epoch, and refuses it for a partition that has moved or came later
(STALE_MEMBER_EPOCH; ILLEGAL_GENERATION in a transaction). The members' epochs differ between the
brokers (Kafka 4.3's target assignment is asynchronous), so the scenario records error codes of
requests built from each broker's own epochs."""

from __future__ import annotations

import time

from kcompat.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kcompat.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest as HB
from kcompat.protocol.messages.end_txn import EndTxnRequest
from kcompat.protocol.messages.find_coordinator import FindCoordinatorRequest
from kcompat.protocol.messages.init_producer_id import InitProducerIdRequest
from kcompat.protocol.messages.offset_commit import OffsetCommitRequest
from kcompat.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from kcompat.testing import admin, wire
from tests.broker.parity import COORDINATOR_RETRIABLE, until

TOPIC, GROUP, TXN_ID = "ae-t", "ae-g", "ae-txn"
NONE, ILLEGAL_GENERATION, STALE_MEMBER_EPOCH = 0, 22, 113
RETRIABLE = COORDINATOR_RETRIABLE | {51}   # and CONCURRENT_TRANSACTIONS


def _until(call, what: str):
    """:func:`until` an answer whose error code is not RETRIABLE."""
    return until(call, what, ok=lambda answer: answer.error_code not in RETRIABLE)


class Member:
    """A KIP-848 consumer that revokes and takes partitions at once: it reports as owned the
    last assignment it was sent."""

    def __init__(self, bootstrap: str, member_id: str) -> None:
        self.bootstrap, self.member_id = bootstrap, member_id
        self.epoch = 0
        self.owned: list[HB.TopicPartitions] = []

    def heartbeat(self) -> None:
        first = self.epoch == 0
        req = HB(group_id=GROUP, member_id=self.member_id, member_epoch=self.epoch,
                 rebalance_timeout_ms=30000 if first else -1,
                 subscribed_topic_names=[TOPIC] if first else None, topic_partitions=self.owned)
        resp = _until(lambda: wire.call(self.bootstrap, req, 1), "ConsumerGroupHeartbeat")
        assert resp.error_code == NONE, (resp.error_code, resp.error_message)
        self.epoch = resp.member_epoch
        if resp.assignment is not None:
            self.owned = [HB.TopicPartitions(topic_id=tp.topic_id, partitions=sorted(tp.partitions))
                          for tp in resp.assignment.topic_partitions]

    @property
    def partitions(self) -> set[int]:
        return {p for tp in self.owned for p in tp.partitions}


def _heartbeat_until(members: list[Member], done, what: str) -> None:
    deadline = time.monotonic() + 60
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: {[(m.member_id, m.epoch, m.partitions) for m in members]}")
        for m in members:
            m.heartbeat()
        time.sleep(0.05)


def _commit(bootstrap: str, member: Member, epoch: int, partition: int) -> int:
    req = OffsetCommitRequest(group_id=GROUP, generation_id_or_member_epoch=epoch, member_id=member.member_id,
                              group_instance_id=None, retention_time_ms=-1, topics=[
                                  OffsetCommitRequest.OffsetCommitRequestTopic(name=TOPIC, partitions=[
                                      OffsetCommitRequest.OffsetCommitRequestPartition(
                                          partition_index=partition, committed_offset=1, committed_leader_epoch=-1,
                                          committed_metadata="")])])
    resp = _until(lambda: _first_partition(wire.call(bootstrap, req, 9)), "OffsetCommit")
    return resp.error_code


def _first_partition(resp):
    return resp.topics[0].partitions[0]


def _txn_commits(bootstrap: str, member: Member, tries: list[tuple[int, int]]) -> list[int]:
    """Open a transaction, TxnOffsetCommit v3 each ``(member epoch, partition)`` of ``tries`` in it,
    abort it; the error codes."""
    _find_coordinator(bootstrap, TXN_ID, 1)
    pid = _until(lambda: wire.call(bootstrap, InitProducerIdRequest(
        transactional_id=TXN_ID, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1), 4),
        "InitProducerId")
    ids = dict(transactional_id=TXN_ID, producer_id=pid.producer_id, producer_epoch=pid.producer_epoch)
    added = _until(lambda: wire.call(bootstrap, AddOffsetsToTxnRequest(group_id=GROUP, **ids), 3), "AddOffsetsToTxn")
    assert added.error_code == NONE
    codes = []
    for epoch, partition in tries:
        req = TxnOffsetCommitRequest(group_id=GROUP, generation_id=epoch, member_id=member.member_id,
                                     group_instance_id=None, topics=[
                                         TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=[
                                             TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                                                 partition_index=partition, committed_offset=1,
                                                 committed_leader_epoch=-1, committed_metadata="")])], **ids)
        codes.append(_until(lambda: _first_partition(wire.call(bootstrap, req, 3)), "TxnOffsetCommit").error_code)
    ended = _until(lambda: wire.call(bootstrap, EndTxnRequest(committed=False, **ids), 3), "EndTxn")
    assert ended.error_code == NONE
    return codes


def _find_coordinator(bootstrap: str, key: str, key_type: int) -> None:
    """FindCoordinator until it answers (Kafka creates ``__consumer_offsets`` or
    ``__transaction_state`` at the first one)."""
    _until(lambda: wire.call(bootstrap, FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]), 4)
           .coordinators[0], f"FindCoordinator {key}")


def scenario(bootstrap: str) -> dict:
    admin.create_topic(bootstrap, TOPIC, 2, 1)
    _find_coordinator(bootstrap, GROUP, 0)
    a, b = Member(bootstrap, "member-a"), Member(bootstrap, "member-b")
    _heartbeat_until([a], lambda: a.partitions == {0, 1}, "the first member gets both partitions")
    first_epoch = a.epoch
    b.heartbeat()
    _heartbeat_until([a, b], lambda: len(a.partitions) == len(b.partitions) == 1 and a.epoch == b.epoch
                     and a.epoch > first_epoch, "the second member gets a partition")
    [kept], [moved] = a.partitions, b.partitions
    return {
        "a: first epoch, kept partition": _commit(bootstrap, a, first_epoch, kept),
        "a: first epoch, moved partition": _commit(bootstrap, a, first_epoch, moved),
        "a: current epoch": _commit(bootstrap, a, a.epoch, kept),
        "a: newer epoch": _commit(bootstrap, a, a.epoch + 1, kept),
        "b: epoch before its partition": _commit(bootstrap, b, b.epoch - 1, moved),
        "a: txn first epoch, kept / moved partition; newer epoch": _txn_commits(
            bootstrap, a, [(first_epoch, kept), (first_epoch, moved), (a.epoch + 1, kept)]),
    }


EXPECTED = {
    "a: first epoch, kept partition": NONE,
    "a: first epoch, moved partition": STALE_MEMBER_EPOCH,
    "a: current epoch": NONE,
    "a: newer epoch": STALE_MEMBER_EPOCH,
    "b: epoch before its partition": STALE_MEMBER_EPOCH,
    "a: txn first epoch, kept / moved partition; newer epoch": [NONE, ILLEGAL_GENERATION, ILLEGAL_GENERATION],
}


def check(ours, theirs) -> None:
    """Kafka 4.3.1's answers are the expected ones and kcompat's the same."""
    assert theirs == EXPECTED
    assert ours == theirs
