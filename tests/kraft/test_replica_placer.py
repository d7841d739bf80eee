"""Rack-aware replica placement (kcompat.kraft.replica_placer, Kafka's StripedReplicaPlacer) and
its use by the controller for CreateTopics and CreatePartitions.

Bounds proved by the properties below, for one placement of ``n`` partitions:
- a partition's replicas are on distinct racks whenever the usable brokers span at least RF racks;
  more generally, its replicas per rack differ by at most one when every rack has at least
  ceil(RF / racks) brokers;
- leaders are unfenced; a fenced broker holds a replica only when every unfenced broker of its
  rack is already a replica of that partition;
- leaders per rack (over the racks with an unfenced broker) differ by at most one, and are exactly
  n / racks each when n is a multiple of the number of such racks;
- leaders per unfenced broker within a rack differ by at most one; when those racks all have the
  same number of unfenced brokers, leaders per unfenced broker over the whole cluster differ by at
  most one, exactly n / (unfenced brokers) each when that divides n.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcompat.config import validate_topic_configs
from kcompat.kraft.cluster_control import ClusterControl, Listener
from kcompat.kraft.controller import Controller, NewTopic
from kcompat.kraft.image import MetadataImage
from kcompat.kraft.replica_placer import UsableBroker, place_replicas
from kcompat.protocol.errors import ErrorCode, KafkaError

T0 = 1_700_000_000_000


def place(brokers, count, rf, seed=0, first=0):
    return place_replicas(brokers, first, count, rf, random.Random(seed))


def error_of(brokers, rf) -> tuple[ErrorCode, str]:
    with pytest.raises(KafkaError) as e:
        place(brokers, 1, rf)
    return e.value.code, e.value.message


def racked(layout: dict[str | None, list[int]], fenced=()) -> list[UsableBroker]:
    return [UsableBroker(b, rack, b in fenced) for rack, ids in layout.items() for b in ids]


# -- errors (Kafka's messages, in Kafka's order) --------------------------------------------------

def test_errors_have_kafkas_messages_in_kafkas_order():
    two = racked({"1": [10, 11]})
    assert error_of(two, 0) == (ErrorCode.INVALID_REPLICATION_FACTOR,
                                "Invalid replication factor 0: the replication factor must be positive.")
    assert error_of(two, -1)[1] == "Invalid replication factor -1: the replication factor must be positive."
    assert error_of(two, 3) == (ErrorCode.INVALID_REPLICATION_FACTOR,
                                "The target replication factor of 3 cannot be reached because only 2 "
                                "broker(s) are registered or some brokers have all their log directories cordoned.")
    all_fenced = racked({"1": [10, 11]}, fenced={10, 11})
    assert error_of(all_fenced, 1) == (ErrorCode.INVALID_REPLICATION_FACTOR, "All brokers are currently fenced, or have all their log directories cordoned.")
    assert error_of(all_fenced, 3)[1] == "All brokers are currently fenced, or have all their log directories cordoned."   # before the count check
    assert error_of([], 1)[1] == "All brokers are currently fenced, or have all their log directories cordoned."
    assert error_of(all_fenced, 0)[1].startswith("Invalid replication factor 0")  # the first check


def test_fenced_brokers_count_as_registered_and_only_follow():
    brokers = racked({None: [1, 2, 3]}, fenced={2})
    out = place(brokers, 6, 3)
    assert all(r[0] != 2 and sorted(r) == [1, 2, 3] for r in out.values())
    # with enough unfenced brokers a fenced one gets nothing
    assert all(2 not in r for r in place(brokers, 6, 2).values())


def test_one_unfenced_broker_leads_every_partition():
    # Kafka's testMultiPartitionTopicPlacementOnSingleUnfencedBroker
    assert place(racked({None: [0, 1]}, fenced={1}), 3, 1) == {0: [0], 1: [0], 2: [0]}


# -- the stripes ----------------------------------------------------------------------------------

def test_without_racks_replicas_are_consecutive_stripes_from_a_random_start():
    ids = [4, 1, 3, 2, 0]
    s = sorted(ids)
    for seed in range(20):
        out = place(racked({None: ids}), 5, 3, seed=seed, first=7)
        assert sorted(out) == [7, 8, 9, 10, 11]
        start = s.index(out[7][0])
        # Kafka's "partition 1: A0, A1, A2; partition 2: A1, A2, A3; ..." within one cycle
        assert out == {7 + i: [s[(start + i + j) % 5] for j in range(3)] for i in range(5)}


def test_three_racks_of_three_brokers_every_broker_leads_once_per_nine_partitions():
    """Kafka's placer leads with 3 of the 9 brokers here (one rack cursor for leaders and
    followers, advancing 3 per round); our leader cursors give each broker one partition."""
    brokers = racked({"a": [1, 2, 3], "b": [4, 5, 6], "c": [7, 8, 9]})
    rack_of = {b.broker_id: b.rack for b in brokers}
    for seed in range(30):
        out = place(brokers, 9, 3, seed=seed)
        assert sorted(r[0] for r in out.values()) == list(range(1, 10))
        assert all(sorted(rack_of[b] for b in r) == ["a", "b", "c"] for r in out.values())


def test_brokers_without_a_rack_beside_racked_ones_form_one_more_rack():
    """KRaft does not refuse a mix (only ZooKeeper mode's AdminZkClient did): Kafka's RackList
    keys racks by Optional<String>, so "no rack" is a rack of its own, sorted first."""
    brokers = racked({None: [1, 2], "a": [3, 4], "b": [5, 6]})
    rack_of = {b.broker_id: b.rack for b in brokers}
    out = place(brokers, 30, 3)
    for r in out.values():
        assert sorted((rack_of[b] is not None, rack_of[b] or "") for b in r) == [(False, ""), (True, "a"), (True, "b")]
    assert set(Counter(r[0] for r in out.values()).values()) == {5}


def test_fenced_only_racks_get_followers_before_a_second_replica_in_a_rack():
    # the layout of Kafka's testRackListWithInvalidRacks
    brokers = racked({"1": [10, 11], "2": [20, 21], "3": [30, 31], "4": [40, 41]},
                     fenced={20, 21, 30, 31, 40})
    rack_of = {b.broker_id: b.rack for b in brokers}
    for seed in range(10):
        out = place(brokers, 12, 4, seed=seed)
        for r in out.values():
            assert r[0] in (10, 11, 41)
            assert sorted(rack_of[b] for b in r) == ["1", "2", "3", "4"]
            assert 41 in r and 40 not in r   # rack 4: unfenced first
        # leaders: racks 1 and 4 alternate (rack 4 has one unfenced broker, rack 1 two)
        assert Counter(r[0] for r in out.values()) == {41: 6, 10: 3, 11: 3}


def test_ten_thousand_partitions():
    brokers = racked({f"r{i}": list(range(i * 10, i * 10 + 10)) for i in range(3)})
    out = place(brokers, 10_000, 3)
    assert len(out) == 10_000
    counts = Counter(r[0] for r in out.values())
    assert max(counts.values()) - min(counts.values()) <= 1


# -- properties -----------------------------------------------------------------------------------

RACKS = [None, "a", "b", "c", "d"]


@st.composite
def clusters(draw, racks=st.sampled_from(RACKS)):
    """(usable brokers with at least one unfenced, replication factor within reach)."""
    n = draw(st.integers(1, 14))
    ids = draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n, unique=True))
    brokers = [UsableBroker(b, draw(racks), draw(st.booleans())) for b in ids]
    if all(b.fenced for b in brokers):
        brokers[0] = brokers[0]._replace(fenced=False)
    rf = draw(st.integers(1, len(brokers)))
    return brokers, rf


def leader_racks(brokers):
    return {b.rack for b in brokers if not b.fenced}


@settings(max_examples=400, deadline=None)
@given(clusters(), st.integers(1, 60), st.integers(0, 2**32), st.integers(0, 50))
def test_placement_properties(cluster, count, seed, first):
    brokers, rf = cluster
    out = place(brokers, count, rf, seed=seed, first=first)
    info = {b.broker_id: b for b in brokers}
    racks = {b.rack for b in brokers}
    assert sorted(out) == list(range(first, first + count))
    for r in out.values():
        assert len(r) == rf == len(set(r)) and all(b in info for b in r)
        assert not info[r[0]].fenced
        if len(racks) >= rf:
            assert len({info[b].rack for b in r}) == rf
        per_rack = Counter(info[b].rack for b in r)
        if all(sum(1 for b in brokers if b.rack == k) >= -(-rf // len(racks)) for k in racks):
            counts = [per_rack.get(k, 0) for k in racks]
            assert max(counts) - min(counts) <= 1
        for b in r:   # a fenced replica only once its rack's unfenced brokers are all used
            if info[b].fenced:
                assert all(u.broker_id in r for u in brokers if u.rack == info[b].rack and not u.fenced)
    # leaders
    eligible = leader_racks(brokers)
    by_rack = Counter(info[r[0]].rack for r in out.values())
    rack_counts = [by_rack.get(k, 0) for k in eligible]
    assert max(rack_counts) - min(rack_counts) <= 1
    if count % len(eligible) == 0:
        assert set(rack_counts) == {count // len(eligible)}
    by_broker = Counter(r[0] for r in out.values())
    for k in eligible:
        within = [by_broker.get(b.broker_id, 0) for b in brokers if b.rack == k and not b.fenced]
        assert max(within) - min(within) <= 1
    unfenced = [b.broker_id for b in brokers if not b.fenced]
    sizes = {sum(1 for b in brokers if b.rack == k and not b.fenced) for k in eligible}
    if len(sizes) == 1:
        overall = [by_broker.get(b, 0) for b in unfenced]
        assert max(overall) - min(overall) <= 1
        if count % len(unfenced) == 0:
            assert set(overall) == {count // len(unfenced)}


@settings(max_examples=200, deadline=None)
@given(clusters(), st.integers(1, 40), st.integers(0, 2**32), st.randoms(use_true_random=False))
def test_deterministic_for_a_seed_whatever_the_broker_order(cluster, count, seed, shuffler):
    brokers, rf = cluster
    again = list(brokers)
    shuffler.shuffle(again)
    assert place(brokers, count, rf, seed=seed) == place(again, count, rf, seed=seed)


@settings(max_examples=200, deadline=None)
@given(clusters(racks=st.just(None)), st.integers(1, 40), st.integers(0, 2**32))
def test_no_rack_at_all_is_one_rack_spread_over_every_broker(cluster, count, seed):
    """No broker has a rack: the same placement as if all shared one rack name, with leaders
    round-robin over the unfenced brokers (max - min <= 1)."""
    brokers, rf = cluster
    out = place(brokers, count, rf, seed=seed)
    assert out == place([b._replace(rack="one") for b in brokers], count, rf, seed=seed)
    leads = Counter(r[0] for r in out.values())
    counts = [leads.get(b.broker_id, 0) for b in brokers if not b.fenced]
    assert max(counts) - min(counts) <= 1


# -- through the controller -----------------------------------------------------------------------

class RackedCluster:
    """Controller + ClusterControl over an image; brokers register with a rack."""

    def __init__(self, seed: int | None = 1) -> None:
        self.image = MetadataImage()
        self.cc = ClusterControl(self.image, self.commit, cluster_id="c1", session_timeout_ms=lambda: 9000)
        self.controller = Controller(self.image, self.commit, node_id=1, defaults=lambda: (1, 1),
                                     validate_topic_configs=validate_topic_configs,
                                     delete_topic_enable=lambda: True, seed=seed)

    def commit(self, records: list, now_ms: int) -> None:
        for r in records:
            self.image.apply(r, self.image.offset + 1)

    def join(self, b: int, rack: str | None) -> None:
        epoch = self.cc.register(b, "c1", uuid.UUID(int=b), [Listener("PLAINTEXT", f"h{b}", 9092)], rack, -1, T0)
        assert not self.cc.heartbeat(b, epoch, self.image.offset, False, False, T0).is_fenced

    def assignments(self, topic: str) -> dict[int, list[int]]:
        return {p: x.replicas for p, x in sorted(self.image.topics[topic].partitions.items())}


SIX_ON_THREE = {1: "r1", 2: "r1", 3: "r2", 4: "r2", 5: "r3", 6: "r3"}


@pytest.mark.parametrize("seed", [1, 2, 3, None])
def test_create_topics_puts_one_replica_on_each_rack(seed):
    c = RackedCluster(seed)
    for b, rack in SIX_ON_THREE.items():
        c.join(b, rack)
    names = ["t1", "t2", "t3"]
    results = c.controller.create_topics([NewTopic(n, 12, 3) for n in names], validate_only=False, now_ms=T0)
    assert [r.error for r in results] == [ErrorCode.NONE] * 3
    for n in names:
        parts = c.image.topics[n].partitions
        assert sorted(parts) == list(range(12))
        for p in parts.values():
            assert sorted(SIX_ON_THREE[b] for b in p.replicas) == ["r1", "r2", "r3"]
            assert p.isr == p.replicas and p.leader == p.replicas[0]
        # 12 partitions over 3 racks x 2 brokers: every broker leads 2 of each topic
        assert Counter(p.leader for p in parts.values()) == {b: 2 for b in SIX_ON_THREE}
    # CreatePartitions keeps to the racks
    c.controller.create_partitions("t1", 18, None, validate_only=False, now_ms=T0)
    grown = c.assignments("t1")
    assert sorted(grown) == list(range(18))
    assert all(sorted(SIX_ON_THREE[b] for b in grown[p]) == ["r1", "r2", "r3"] for p in range(12, 18))


def test_the_controllers_placement_is_deterministic_for_a_seed():
    runs = []
    for _ in range(2):
        c = RackedCluster(seed=42)
        for b, rack in SIX_ON_THREE.items():
            c.join(b, rack)
        c.controller.create_topics([NewTopic("a", 5, 2), NewTopic("b", 7, 3)], validate_only=False, now_ms=T0)
        c.controller.create_partitions("a", 9, None, validate_only=False, now_ms=T0)
        runs.append((c.assignments("a"), c.assignments("b")))
    assert runs[0] == runs[1]


def test_create_partitions_reports_the_placers_message_as_kafka_does():
    usable = [UsableBroker(1, "r1", False), UsableBroker(2, "r2", False)]
    image = MetadataImage()

    def commit(records, now_ms):
        for r in records:
            image.apply(r, image.offset + 1)

    controller = Controller(image, commit, node_id=1, defaults=lambda: (1, 1), validate_topic_configs=dict,
                            delete_topic_enable=lambda: True, usable_brokers=lambda: list(usable), seed=7)
    (res,) = controller.create_topics([NewTopic("t", 2, 2)], validate_only=False, now_ms=T0)
    assert res.error == ErrorCode.NONE
    usable.pop()
    with pytest.raises(KafkaError) as e:
        controller.create_partitions("t", 3, None, validate_only=False, now_ms=T0)
    # no "Unable to replicate the partition" prefix: Kafka's createPartitionsForTopic adds none
    assert (e.value.code, e.value.message) == (
        ErrorCode.INVALID_REPLICATION_FACTOR,
        "The target replication factor of 2 cannot be reached because only 1 broker(s) are registered or some brokers have all their log directories cordoned.")
