"""FindCoordinator: this node coordinates groups and transactional ids."""

from __future__ import annotations

from kcompat.protocol.messages.find_coordinator import FindCoordinatorRequest
from tests.support import wire


def test_group_coordinator_is_this_broker_v0_to_v3(broker):
    host, port = broker.bootstrap.rsplit(":", 1)
    for version in range(0, 4):
        resp = wire.call(broker.bootstrap, FindCoordinatorRequest(key="g1", key_type=0), version)
        assert resp.error_code == 0
        assert (resp.node_id, resp.host, resp.port) == (1, host, int(port))


def test_batched_lookup_v4_plus_and_key_types(broker):
    resp = wire.call(broker.bootstrap, FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]), 4)
    assert [(c.key, c.error_code, c.node_id) for c in resp.coordinators] == [("a", 0, 1), ("b", 0, 1)]
    txn = wire.call(broker.bootstrap, FindCoordinatorRequest(key_type=1, coordinator_keys=["t"]), 6)
    assert [(c.error_code, c.node_id) for c in txn.coordinators] == [(0, 1)]
    empty = wire.call(broker.bootstrap, FindCoordinatorRequest(key="", key_type=1), 3)
    assert empty.error_code == 42  # INVALID_REQUEST for an empty transactional id
    bad = wire.call(broker.bootstrap, FindCoordinatorRequest(key="x", key_type=7), 3)
    assert bad.error_code == 42  # INVALID_REQUEST
