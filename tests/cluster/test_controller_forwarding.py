"""A broker forwards controller requests to the active controller and, while a new one is being
elected, keeps trying instead of failing them (Kafka's NodeToControllerRequestThread re-sends a
request to the new controller when the old one is gone or answers NOT_CONTROLLER).

The active controller is SIGSTOPped and a CreateTopics sent to another node at once: that node
still forwards to the stopped controller, the others elect a new one (about a second and a half
with the test timeouts), the forwarding connection to the old leader is closed, and the request
must then reach the new controller and create the topic — not come back NOT_CONTROLLER.
"""

from __future__ import annotations

import pytest

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.create_topics import CreateTopicsRequest
from kcompat.testing import wire
from tests.support.cluster import ProxiedCluster, wait_until
from tests.support.replication_load import partition_states


@pytest.fixture
def cluster(tmp_path):
    c = ProxiedCluster(tmp_path)
    try:
        c.start()
        yield c
    finally:
        c.close()


def test_a_request_forwarded_during_an_election_reaches_the_new_controller(cluster):
    old = wait_until(cluster.leader_id, 30, "a quorum leader")
    other = next(n for n in cluster.node_ids() if n != old)
    address = f"127.0.0.1:{cluster.client_ports[other - 1]}"
    C = CreateTopicsRequest
    req = C(topics=[C.CreatableTopic(name="during-election", num_partitions=1, replication_factor=2)],
            timeout_ms=30_000)
    cluster.pause(old)
    try:
        with wire.connect(address, timeout=60) as sock:
            wire.send_request(sock, req, 7)
            _corr, resp = wire.read_response(sock, 19, 7)
        assert (resp.topics[0].name, resp.topics[0].error_code) == ("during-election", ErrorCode.NONE), resp
        new = cluster.leader_id()
        assert new is not None and new != old
        assert wait_until(lambda: partition_states(address, "during-election").get(0), 30, "the new topic")
    finally:
        cluster.resume(old)
