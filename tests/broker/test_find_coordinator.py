"""FindCoordinator: this node coordinates groups and transactional ids. As in Kafka, the first lookup
of a kind starts creating its internal topic in the background and answers
COORDINATOR_NOT_AVAILABLE (15), which clients retry, until the topic has leaders."""

from __future__ import annotations

from kcompat.protocol.messages.find_coordinator import FindCoordinatorRequest
from kcompat.testing import wire
from tests.support.broker_process import wait_for

COORDINATOR_NOT_AVAILABLE = 15


def lookup(bootstrap: str, request, version: int):
    """The answer once the coordinator is available (retrying 15, as clients do)."""
    def answered():
        resp = wire.call(bootstrap, request, version)
        codes = [c.error_code for c in resp.coordinators] if version >= 4 else [resp.error_code]
        return None if COORDINATOR_NOT_AVAILABLE in codes else resp
    return wait_for(answered, 60, what="the coordinator to be available")


def test_group_coordinator_is_this_broker_v0_to_v3(broker):
    host, port = broker.bootstrap.rsplit(":", 1)
    for version in range(0, 4):
        resp = lookup(broker.bootstrap, FindCoordinatorRequest(key="g1", key_type=0), version)
        assert resp.error_code == 0
        assert (resp.node_id, resp.host, resp.port) == (1, host, int(port))


def test_batched_lookup_v4_plus_and_key_types(broker):
    resp = lookup(broker.bootstrap, FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]), 4)
    assert [(c.key, c.error_code, c.node_id) for c in resp.coordinators] == [("a", 0, 1), ("b", 0, 1)]
    txn = lookup(broker.bootstrap, FindCoordinatorRequest(key_type=1, coordinator_keys=["t"]), 6)
    assert [(c.error_code, c.node_id) for c in txn.coordinators] == [(0, 1)]
    empty = wire.call(broker.bootstrap, FindCoordinatorRequest(key="", key_type=1), 3)
    assert empty.error_code == 42  # INVALID_REQUEST for an empty transactional id
    bad = wire.call(broker.bootstrap, FindCoordinatorRequest(key="x", key_type=7), 3)
    assert bad.error_code == 42  # INVALID_REQUEST


def test_the_first_lookup_answers_at_once_and_creates_the_topic_in_the_background(fresh_broker):
    first = wire.call(fresh_broker.bootstrap, FindCoordinatorRequest(key="g", key_type=0), 3)
    assert first.error_code == COORDINATOR_NOT_AVAILABLE
    assert lookup(fresh_broker.bootstrap, FindCoordinatorRequest(key="g", key_type=0), 3).error_code == 0
