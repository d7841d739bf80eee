"""Replication throttles (Kafka's ReplicationQuotaManager, KIP-73): the throttled-replicas config
values, and the leader's and follower's decisions over the sampled rate."""

from __future__ import annotations

from kcompat.broker.quota.replication import ALL, ReplicationQuota, parse_throttled_replicas


def test_throttled_replicas_values():
    assert parse_throttled_replicas("*", 1) == ALL
    assert parse_throttled_replicas("0:1,1:2,2:1", 1) == {0, 2}
    assert parse_throttled_replicas("0:2", 1) == frozenset()
    assert parse_throttled_replicas("", 1) == frozenset()


def test_leader_and_follower_decisions():
    bound = [100]
    q = ReplicationQuota(1, lambda: bound[0], samples=11, window_ms=1000)
    q.update_topic("t", "0:1,1:2")
    assert q.is_throttled("t", 0) and not q.is_throttled("t", 1) and not q.is_throttled("u", 0)
    assert q.leader_records("t", 0, False, b"x" * 2000, 0) == b"x" * 2000   # under the rate: sent and measured
    assert q.is_exceeded(0)                                                    # 2000 B / 10 s > 100 B/s
    assert q.leader_records("t", 0, False, b"y" * 10, 0) == b""              # out of sync: held back
    assert q.leader_records("t", 0, True, b"y" * 10, 0) == b"y" * 10         # in sync: never held back
    assert q.leader_records("t", 1, False, b"z", 0) == b"z"                  # not throttled
    assert q.should_throttle("t", 0, False, 0) and not q.should_throttle("t", 0, True, 0)
    bound[0] = 10_000                                                          # the dynamic rate raised
    assert not q.should_throttle("t", 0, False, 0)
    q.update_topic("t", None)
    assert not q.is_throttled("t", 0)
