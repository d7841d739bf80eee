"""The quota managers without a broker: Kafka's precedence of quota entities, its throttle time
``(O - T) / T * W`` over the sampled rate, request-time throttles capped at one window, and the
controller-mutation token bucket (KIP-599)."""

from __future__ import annotations

import pytest

from kcompat.broker.quota.client_quota import ClientQuotaManager, ControllerMutationQuotaManager
from kcompat.broker.quota.rate import Rate

U, C = "user", "client-id"
LEVELS = [  # Kafka's order, most specific first: (entity, tags of the rate it shares)
    (((U, "alice"), (C, "app")), ("alice", "app")),
    (((U, "alice"), (C, None)), ("alice", "app")),
    (((U, "alice"),), ("alice", "")),
    (((U, None), (C, "app")), ("alice", "app")),
    (((U, None), (C, None)), ("alice", "app")),
    (((U, None),), ("alice", "")),
    (((C, "app"),), ("", "app")),
    (((C, None),), ("", "app")),
]


def _manager(levels) -> ClientQuotaManager:
    m = ClientQuotaManager("producer_byte_rate", 11, 1000)
    m.update({tuple(sorted(entity)): {"producer_byte_rate": float(1000 * (i + 1))} for i, (entity, _t) in levels})
    return m


@pytest.mark.parametrize("first", range(len(LEVELS)))
def test_the_most_specific_quota_set_applies(first):
    m = _manager(list(enumerate(LEVELS))[first:])
    tags, bound = m.quota("alice", "app")
    assert (tags, bound) == (LEVELS[first][1], 1000.0 * (first + 1))


def test_no_quota_no_throttle_and_other_clients_are_not_affected():
    m = _manager([(0, LEVELS[6])])   # client-id "app" only
    assert m.quota("bob", "other") is None
    assert m.record("bob", "other", 10**9, 1_000) == 0
    assert m.record("bob", "app", 10**9, 1_000) > 0


def test_throttle_time_is_kafkas_over_the_measured_window():
    m = ClientQuotaManager("producer_byte_rate", 11, 1000)
    m.update({(("client-id", "c"),): {"producer_byte_rate": 1000.0}})
    assert m.record("u", "c", 10_000, 100_000) == 0      # 10 kB over at least 10 windows: exactly the quota
    # 15 kB over 10 s: O = 1500/s, T = 1000/s, W = 10 000 ms: (O - T) / T * W = 5000 ms
    assert m.record("u", "c", 5_000, 100_000) == 5000
    m.unrecord("u", "c", 5_000, 100_000)
    assert m.record("u", "c", 0, 100_000) == 0


def test_request_throttles_are_capped_at_one_window():
    m = ClientQuotaManager("request_percentage", 11, 1000, max_throttle_ms=1000)
    m.update({(("user", None),): {"request_percentage": 1.0}})
    assert m.record("u", "c", 500.0, 100_000) == 1000


def test_a_rate_forgets_samples_older_than_its_windows():
    r = Rate(2, 1000)
    r.record(2000, 0)
    assert r.measure(500) == pytest.approx(2000 / 1.5)  # 0.5 s elapsed plus the missing whole window
    assert r.measure(2500) == 0                          # every sample older than 2 windows


def test_controller_mutations_take_tokens_and_are_refused_once_the_bucket_is_empty():
    m = ControllerMutationQuotaManager(11, 1000)
    m.update({(("client-id", "admin"),): {"controller_mutation_rate": 10.0}})
    now = 1_000_000
    assert m.check("u", "admin", now) == 0
    assert m.record("u", "admin", 110, now) == 0          # the burst: 11 windows x 10/s
    assert m.record("u", "admin", 20, now) == 2000        # 20 tokens short at 10/s
    assert m.check("u", "admin", now + 1000) == 1000
    assert m.check("u", "admin", now + 2000) == 0


def test_idle_clients_are_forgotten_so_many_client_ids_do_not_grow_memory():
    m = ClientQuotaManager("producer_byte_rate", 2, 1000)
    m.update({(("client-id", None),): {"producer_byte_rate": 1000.0}})   # each client id its own rate
    for i in range(5000):
        m.record("u", f"c{i}", 10, i * 10)   # each idle after 2 windows: 200 ids apart
    assert len(m._sensors) < 1500
