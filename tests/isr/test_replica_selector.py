"""kcompat/isr/replica_selector.py: the preferred read replica (KIP-392) as Kafka's
RackAwareReplicaSelector and ReplicaManager.findPreferredReadReplica choose it."""

from __future__ import annotations

from types import SimpleNamespace

from kcompat.isr.replica_selector import (NO_PREFERRED_REPLICA, RACK_AWARE_SELECTOR, ReplicaView,
                                          preferred_read_replica, select_rack_aware)

RACKS = {1: "a", 2: "b", 3: "c", 4: "b"}


def view(broker_id, leo=100, since=0, endpoint=True):
    return ReplicaView(broker_id, RACKS[broker_id], endpoint, leo, since)


def test_the_leader_unless_the_clients_rack_holds_another_replica():
    leader = view(1)
    others = [leader, view(2), view(3)]
    assert select_rack_aware(None, leader, others) is leader
    assert select_rack_aware("", leader, others) is leader
    assert select_rack_aware("a", leader, others) is leader          # the leader's own rack
    assert select_rack_aware("z", leader, others) is leader          # no replica there
    assert select_rack_aware("c", leader, others).broker_id == 3


def test_most_caught_up_of_the_rack_then_least_lag_time_then_highest_id():
    leader = view(1)
    assert select_rack_aware("b", leader, [leader, view(2, leo=90), view(4, leo=95)]).broker_id == 4
    assert select_rack_aware("b", leader, [leader, view(2, since=10), view(4, since=500)]).broker_id == 2
    assert select_rack_aware("b", leader, [leader, view(2), view(4)]).broker_id == 4


def partition(followers: dict[int, tuple[int, int, int]], isr=(1, 2, 3)):
    """A leader (broker 1, LEO 100) whose followers are id -> (log start, log end, last caught up ms)."""
    fs = {i: SimpleNamespace(log_start_offset=s, log_end_offset=e, last_caught_up_time_ms=t)
          for i, (s, e, t) in followers.items()}
    rs = SimpleNamespace(followers=fs, isr=frozenset(isr))
    return SimpleNamespace(local_id=1, log_end_offset=100, replica_state=rs)


def endpoints(b):
    return (True, RACKS[b])


def test_only_isr_followers_whose_log_holds_the_fetch_offset():
    p = partition({2: (0, 100, 1000), 3: (0, 100, 1000)})
    assert preferred_read_replica(RACK_AWARE_SELECTOR, p, "b", 50, 1000, endpoints) == 2
    out_of_isr = partition({2: (0, 100, 1000), 3: (0, 100, 1000)}, isr=(1, 3))
    assert preferred_read_replica(RACK_AWARE_SELECTOR, out_of_isr, "b", 50, 1000, endpoints) == NO_PREFERRED_REPLICA
    behind = partition({2: (0, 40, 1000)})
    assert preferred_read_replica(RACK_AWARE_SELECTOR, behind, "b", 50, 1000, endpoints) == NO_PREFERRED_REPLICA
    truncated = partition({2: (60, 100, 1000)})
    assert preferred_read_replica(RACK_AWARE_SELECTOR, truncated, "b", 50, 1000, endpoints) == NO_PREFERRED_REPLICA


def test_no_selector_no_rack_single_replica_or_no_endpoint_means_the_leader():
    p = partition({2: (0, 100, 1000)})
    assert preferred_read_replica(None, p, "b", 50, 1000, endpoints) == NO_PREFERRED_REPLICA
    assert preferred_read_replica(RACK_AWARE_SELECTOR, p, "", 50, 1000, endpoints) == NO_PREFERRED_REPLICA
    solo = SimpleNamespace(local_id=1, log_end_offset=100, replica_state=None)
    assert preferred_read_replica(RACK_AWARE_SELECTOR, solo, "b", 50, 1000, endpoints) == NO_PREFERRED_REPLICA
    assert preferred_read_replica(RACK_AWARE_SELECTOR, p, "b", 50, 1000,
                                  lambda b: (b == 1, RACKS[b])) == NO_PREFERRED_REPLICA
