"""Cluster membership on the controller (Kafka's ClusterControlManager / BrokerHeartbeatManager
rules): registration and broker epochs, unfencing when caught up, fencing on missed heartbeats
with leadership moving to the next ISR member, controlled shutdown, and the errors."""

from __future__ import annotations

import uuid

import pytest

from kcompat.config import validate_topic_configs
from kcompat.kraft.cluster_control import ClusterControl, Listener
from kcompat.kraft.controller import Controller, NewTopic
from kcompat.kraft.image import MetadataImage
from kcompat.protocol.errors import ErrorCode, KafkaError

T0 = 1_700_000_000_000
SESSION = 9000


class Harness:
    """Controller + ClusterControl over an image; every change is committed (applied) at once."""

    def __init__(self) -> None:
        self.image = MetadataImage()
        self.records: list = []
        self.cc = ClusterControl(self.image, self.commit, cluster_id="c1", session_timeout_ms=lambda: SESSION)
        self.controller = Controller(self.image, self.commit, node_id=1, defaults=lambda: (1, 1),
                                     validate_topic_configs=validate_topic_configs,
                                     delete_topic_enable=lambda: True)
        self.incarnations: dict[int, uuid.UUID] = {}

    def commit(self, records: list, now_ms: int) -> None:
        for r in records:
            self.image.apply(r, self.image.offset + 1)
        self.records += records

    def register(self, b: int, now: int = T0, incarnation: uuid.UUID | None = None, previous: int = -1) -> int:
        inc = incarnation or self.incarnations.setdefault(b, uuid.uuid4())
        return self.cc.register(b, "c1", inc, [Listener("PLAINTEXT", f"h{b}", 9092)], None, previous, now)

    def join(self, b: int, now: int = T0) -> int:
        epoch = self.register(b, now)
        res = self.cc.heartbeat(b, epoch, self.image.offset, False, False, now)
        assert not res.is_fenced
        return epoch

    def topic(self, name: str, partitions: int, rf: int):
        (res,) = self.controller.create_topics([NewTopic(name, partitions, rf)], validate_only=False, now_ms=T0)
        assert res.error == 0, res
        return self.image.topics[name]


@pytest.fixture
def h():
    return Harness()


def test_a_registered_broker_is_fenced_until_its_heartbeat_shows_it_caught_up(h):
    epoch = h.register(1)
    b = h.image.brokers[1]
    assert b.fenced and b.epoch == epoch and b.endpoints["PLAINTEXT"].host == "h1"
    assert h.image.unfenced_brokers() == []
    behind = h.cc.heartbeat(1, epoch, epoch - 1, False, False, T0)
    assert (behind.is_caught_up, behind.is_fenced) == (False, True)
    ok = h.cc.heartbeat(1, epoch, h.image.offset, False, False, T0)
    assert (ok.is_caught_up, ok.is_fenced, ok.should_shut_down) == (True, False, False)
    assert h.image.unfenced_brokers() == [1]


def test_errors_for_unknown_brokers_stale_epochs_and_other_clusters(h):
    with pytest.raises(KafkaError) as e:
        h.cc.heartbeat(7, 0, 0, False, False, T0)
    assert e.value.code == ErrorCode.BROKER_ID_NOT_REGISTERED
    epoch = h.join(1)
    with pytest.raises(KafkaError) as e:
        h.cc.heartbeat(1, epoch - 1, 100, False, False, T0)
    assert e.value.code == ErrorCode.STALE_BROKER_EPOCH
    with pytest.raises(KafkaError) as e:
        h.cc.register(2, "other-cluster", uuid.uuid4(), [Listener("PLAINTEXT", "h", 1)], None, -1, T0)
    assert e.value.code == ErrorCode.INCONSISTENT_CLUSTER_ID


def test_a_live_broker_id_cannot_be_taken_by_another_incarnation_until_its_session_expires(h):
    first = h.join(1)
    with pytest.raises(KafkaError) as e:
        h.register(1, T0 + 1000, incarnation=uuid.uuid4())
    assert e.value.code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    # naming the previous epoch (a clean restart) is allowed at once (KIP-966)
    second = h.register(1, T0 + 1000, incarnation=uuid.uuid4(), previous=first)
    assert second > first
    # after the session expired, any incarnation may register; epochs only grow
    third = h.register(1, T0 + 1000 + SESSION, incarnation=uuid.uuid4())
    assert third > second
    # a controller that just took over has not heard from the broker: a restart registers at once
    h.cc.activate(T0 + 20_000)
    assert h.register(1, T0 + 20_001, incarnation=uuid.uuid4()) > third


def test_missed_heartbeats_fence_the_broker_and_move_leadership_within_the_isr(h):
    for b in (1, 2, 3):
        h.join(b)
    t = h.topic("t", 3, 3)
    led_by_2 = [p for p in t.partitions.values() if p.leader == 2]
    assert led_by_2
    for b in (1, 3):
        h.cc.heartbeat(b, h.image.brokers[b].epoch, h.image.offset, False, False, T0 + SESSION)
    assert h.cc.fence_stale_brokers(T0 + SESSION + 1) == [2]
    assert h.image.brokers[2].fenced and h.image.unfenced_brokers() == [1, 3]
    for p in t.partitions.values():
        assert p.leader in (1, 3) and 2 not in p.isr
        # a PartitionChangeRecord without replicas leaves them as they were (a null field)
        assert sorted(p.replicas) == [1, 2, 3]
    assert all(p.leader_epoch == 1 for p in led_by_2)
    # the broker comes back: unfenced on its next caught-up heartbeat (it rejoins the ISR only
    # through replication, the next issue)
    epoch = h.register(2, T0 + SESSION + 2)
    assert not h.cc.heartbeat(2, epoch, h.image.offset, False, False, T0 + SESSION + 3).is_fenced


def test_the_last_isr_member_fenced_leaves_the_partition_leaderless_until_it_returns(h):
    h.join(1)
    h.join(2)
    t = h.topic("single", 2, 1)
    lonely = next(p for p in t.partitions.values() if p.leader == 2)
    h.cc.heartbeat(1, h.image.brokers[1].epoch, h.image.offset, False, False, T0 + SESSION)
    assert h.cc.fence_stale_brokers(T0 + SESSION + 1) == [2]
    assert (lonely.leader, lonely.isr) == (-1, [2])
    epoch = h.register(2, T0 + SESSION + 2)
    h.cc.heartbeat(2, epoch, h.image.offset, False, False, T0 + SESSION + 3)
    assert lonely.leader == 2 and lonely.leader_epoch == 2


def test_controlled_shutdown_moves_leadership_then_says_shut_down(h):
    for b in (1, 2):
        h.join(b)
    t = h.topic("cs", 4, 2)
    epoch = h.image.brokers[1].epoch
    res = h.cc.heartbeat(1, epoch, h.image.offset, False, True, T0 + 10)
    assert res.should_shut_down and res.is_fenced
    assert all(p.leader == 2 for p in t.partitions.values())
    assert h.image.brokers[1].fenced and h.image.brokers[1].in_controlled_shutdown


def test_new_replicas_prefer_unfenced_brokers_and_reach_fenced_ones_only_as_followers(h):
    """Kafka's placer sees every registered broker not in controlled shutdown: a fenced one
    counts for the replication factor and may hold a follower (outside the ISR), never a leader."""
    (res,) = h.controller.create_topics([NewTopic("none", 1, 1)], validate_only=False, now_ms=T0)
    assert (res.error, res.message) == (ErrorCode.INVALID_REPLICATION_FACTOR,
                                        "Unable to replicate the partition 1 time(s): All brokers are currently fenced, or have all their log directories cordoned.")
    h.join(1)
    h.register(2)  # registered, still fenced
    assert all(p.replicas == [1] for p in h.topic("y", 4, 1).partitions.values())   # unfenced first
    x = h.topic("x", 3, 2)
    assert all((p.replicas, p.isr, p.leader) == ([1, 2], [1], 1) for p in x.partitions.values())
    (res,) = h.controller.create_topics([NewTopic("z", 1, 3)], validate_only=False, now_ms=T0)
    assert (res.error, res.message) == (
        ErrorCode.INVALID_REPLICATION_FACTOR, "Unable to replicate the partition 3 time(s): The target "
        "replication factor of 3 cannot be reached because only 2 broker(s) are registered or some brokers have all their log directories cordoned.")
    h.join(3)
    h.cc.heartbeat(3, h.image.brokers[3].epoch, h.image.offset, False, True, T0 + 10)  # controlled shutdown
    assert h.image.brokers[3].in_controlled_shutdown
    (res,) = h.controller.create_topics([NewTopic("z", 1, 3)], validate_only=False, now_ms=T0)
    assert res.error == ErrorCode.INVALID_REPLICATION_FACTOR and "only 2 broker(s)" in res.message


def test_the_image_round_trips_through_snapshot_records(h):
    for b in (1, 2):
        h.join(b)
    h.topic("snap", 3, 2)
    h.controller.alter_topic_configs("snap", {"retention.ms": "1000"}, validate_only=False, now_ms=T0)
    h.controller.allocate_producer_ids(1, T0)
    copy = MetadataImage()
    for i, r in enumerate(h.image.to_records()):
        copy.apply(r, i)
    assert copy.brokers == h.image.brokers
    assert {n: {p: vars(x) for p, x in t.partitions.items()} for n, t in copy.topics.items()} == \
        {n: {p: vars(x) for p, x in t.partitions.items()} for n, t in h.image.topics.items()}
    assert copy.configs == h.image.configs and copy.features == h.image.features
    assert copy.next_producer_id == h.image.next_producer_id


def test_unregister_removes_the_registration_and_the_broker_from_every_isr(h):
    """Kafka's ReplicationControlManager.unregisterBroker, plus kcompat's last-ISR guard."""
    from kcompat.protocol.metadata_records import UnregisterBrokerRecord
    for b in (1, 2, 3):
        h.join(b)
    t = h.topic("t", 3, 3)
    with pytest.raises(KafkaError) as e:
        h.cc.unregister(7, T0)
    assert (e.value.code, e.value.message) == (ErrorCode.BROKER_ID_NOT_REGISTERED,
                                               "Broker ID 7 is not currently registered")
    epoch = h.image.brokers[2].epoch
    h.records.clear()
    h.cc.unregister(2, T0)      # a running broker too, as Kafka allows: it leaves leadership and the ISR
    assert 2 not in h.image.brokers and h.image.unfenced_brokers() == [1, 3]
    assert h.records[-1] == UnregisterBrokerRecord(broker_id=2, broker_epoch=epoch)
    assert all(p.leader in (1, 3) and sorted(p.isr) == [1, 3] for p in t.partitions.values())
    with pytest.raises(KafkaError) as e:
        h.cc.unregister(2, T0)
    assert e.value.code == ErrorCode.BROKER_ID_NOT_REGISTERED


def test_unregister_is_refused_while_the_broker_is_the_last_in_sync_replica(h):
    h.join(1)
    h.join(2)
    t = h.topic("single", 2, 1)
    lonely = next(p for p in t.partitions.values() if p.leader == 2)
    h.cc.heartbeat(1, h.image.brokers[1].epoch, h.image.offset, False, False, T0 + SESSION)
    assert h.cc.fence_stale_brokers(T0 + SESSION + 1) == [2]
    before = len(h.records)
    with pytest.raises(KafkaError) as e:
        h.cc.unregister(2, T0 + SESSION + 2)
    assert e.value.code == ErrorCode.INVALID_REQUEST and f"single-{lonely.partition_id}" in e.value.message
    assert 2 in h.image.brokers and len(h.records) == before
