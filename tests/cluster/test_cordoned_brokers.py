"""Cordoned brokers (KIP-1066) in real kcompat clusters.

- Three nodes: Kafka 4.3.1's ``kafka-configs.sh --alter --entity-type brokers --entity-name 3
  --add-config cordoned.log.dirs=*`` cordons broker 3 (a path that is not one of its log dirs is
  refused with Kafka's message, by broker 3 before the change reaches the controller): new topics get no replica on it while the
  partitions it already has stay (and stay in sync); a replication factor of 3 is refused with
  Kafka 4.3.1's message; a restart of node 3 keeps it cordoned (the config is in the metadata log
  and the broker reports it again once it has caught up); ``--delete-config`` uncordons.
- BrokerHeartbeat v2 on the wire, to the controller listener of a one-node cluster, for a broker
  registered by the test (BrokerRegistration v4 with two directory ids): ``CordonedLogDirs`` with
  one of its dirs leaves it usable, with both keeps new replicas off it (CreateTopics
  validate_only refused), a v1 heartbeat (no such field) or a v2 one with null changes nothing,
  the empty list uncordons; the state survives a restart of the node (BrokerRegistrationChangeRecord
  v3 replayed from the metadata log).
"""

from __future__ import annotations

import uuid

import pytest

from conformance import maven
from conformance.clients import tool_server
from conformance.procs import Completed
from conformance.reference import java_command
from kcompat.protocol.errors import ErrorCode as E
from kcompat.protocol.messages.broker_heartbeat import BrokerHeartbeatRequest as HQ
from kcompat.protocol.messages.broker_registration import BrokerRegistrationRequest as RQ
from kcompat.protocol.messages.create_topics import CreateTopicsRequest as CQ
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.testing import wire
from kcompat.testing.cluster import Cluster, wait_until

RF3_REFUSED = ("Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached "
               "because only 2 broker(s) are registered or some brokers have all their log directories cordoned.")
RF2_REFUSED = ("Unable to replicate the partition 2 time(s): The target replication factor of 2 cannot be reached "
               "because only 1 broker(s) are registered or some brokers have all their log directories cordoned.")


@pytest.fixture(scope="module")
def lib():
    return maven.resolve_kafka("4.3.1")


def create(bootstrap: str, topic: str, partitions: int, rf: int, *, validate_only: bool = False):
    """CreateTopics v7: (error code, message)."""
    resp = wire.call(bootstrap, CQ(timeout_ms=30000, validate_only=validate_only, topics=[CQ.CreatableTopic(
        name=topic, num_partitions=partitions, replication_factor=rf)]), 7)
    return resp.topics[0].error_code, resp.topics[0].error_message


def replicas(bootstrap: str, topic: str) -> dict[int, tuple[list[int], list[int]]]:
    """{partition: (replicas, isr)} from Metadata v9, once the node asked knows the topic (a topic
    created through the controller reaches the other nodes' metadata a moment later)."""
    def known():
        resp = wire.call(bootstrap, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                                    allow_auto_topic_creation=False), 9)
        (t,) = resp.topics
        return t if t.error_code == E.NONE else None
    t = wait_until(known, 30, f"{topic} in Metadata")
    return {p.partition_index: (sorted(p.replica_nodes), sorted(p.isr_nodes)) for p in t.partitions}


def configs(lib, bootstrap: str, *args: str) -> Completed:
    cmd = java_command(lib, "kafka.admin.ConfigCommand", ["--bootstrap-server", bootstrap, "--alter",
                                                          "--entity-type", "brokers", "--entity-name", "3", *args],
                       heap="256m")
    return tool_server.run_command(cmd, timeout=120)


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
def test_kafka_configs_cordons_a_broker_new_topics_avoid_it_existing_ones_stay_until_uncordoned(tmp_path, lib):
    with Cluster(tmp_path, 3) as c:
        bs = c.bootstrap.split(",")[0]   # node 1: the wire calls and the tools' bootstrap
        assert create(bs, "before", 3, 3) == (E.NONE, None)
        wait_until(lambda: all(isr == [1, 2, 3] for _, isr in replicas(bs, "before").values()), 30, "before in sync")

        bad = configs(lib, bs, "--add-config", "cordoned.log.dirs=/nope")   # checked by broker 3 itself
        assert bad.returncode != 0 and ("InvalidRequestException: requirement failed: All entries in cordoned.log.dirs "
                                        "must be present in log.dirs or log.dir. Missing entries : /nope") in bad.stdout + bad.stderr, \
            (bad.stdout + bad.stderr)[-2000:]
        out = configs(lib, bs, "--add-config", "cordoned.log.dirs=*")
        assert out.returncode == 0 and "Completed updating config for broker 3." in out.stdout, out.stderr[-2000:]
        wait_until(lambda: create(bs, "rf3", 1, 3, validate_only=True) == (E.INVALID_REPLICATION_FACTOR, RF3_REFUSED),
                   30, "replication factor 3 refused once broker 3 is cordoned")
        assert create(bs, "after", 6, 2) == (E.NONE, None)
        after = replicas(bs, "after")
        assert len(after) == 6 and all(r == [1, 2] for r, _ in after.values()), after
        assert all(r == isr == [1, 2, 3] for r, isr in replicas(bs, "before").values())   # existing ones stay

        c.restart(3)
        c.wait_for_brokers(60)
        # registered again, broker 3 reports its cordoned dirs once it has caught up
        wait_until(lambda: create(bs, "rf3", 1, 3, validate_only=True) == (E.INVALID_REPLICATION_FACTOR, RF3_REFUSED),
                   60, "broker 3 still cordoned after its restart")
        assert create(bs, "after-restart", 4, 2) == (E.NONE, None)
        assert all(r == [1, 2] for r, _ in replicas(bs, "after-restart").values())

        out = configs(lib, bs, "--delete-config", "cordoned.log.dirs")
        assert out.returncode == 0, out.stderr[-2000:]
        wait_until(lambda: create(bs, "rf3", 1, 3, validate_only=True) == (E.NONE, None), 30, "broker 3 uncordoned")
        assert create(bs, "uncordoned", 3, 3) == (E.NONE, None)
        assert all(r == [1, 2, 3] for r, _ in replicas(bs, "uncordoned").values())


def test_broker_heartbeat_v2_cordoned_log_dirs_on_the_wire_and_after_a_restart(tmp_path):
    with Cluster(tmp_path, 1) as c:
        ctrl, bs = f"127.0.0.1:{c.controller_ports[0]}", c.bootstrap
        u1, u2 = uuid.uuid4(), uuid.uuid4()
        reg = wire.call(ctrl, RQ(
            broker_id=2, cluster_id=c.cluster_id, incarnation_id=uuid.uuid4(),
            listeners=[RQ.Listener(name="PLAINTEXT", host="127.0.0.1", port=1, security_protocol=0)],
            features=[RQ.Feature(name="metadata.version", min_supported_version=1, max_supported_version=20)],
            rack=None, log_dirs=[u1, u2]), 4)
        assert reg.error_code == E.NONE, reg
        epoch = reg.broker_epoch

        def heartbeat(version: int, cordoned=None):
            resp = wire.call(ctrl, HQ(broker_id=2, broker_epoch=epoch, current_metadata_offset=2**40,
                                      want_fence=False, want_shut_down=False, cordoned_log_dirs=cordoned), version)
            assert resp.error_code == E.NONE, resp

        def rf2():
            return create(bs, "two", 1, 2, validate_only=True)

        heartbeat(2)   # null: not yet known, the broker is usable
        assert rf2() == (E.NONE, None)
        heartbeat(2, [u1])   # one of its two dirs: still room
        wait_until(lambda: rf2() == (E.NONE, None), 10, "usable with one dir cordoned")
        heartbeat(2, [u2, u1])
        wait_until(lambda: rf2() == (E.INVALID_REPLICATION_FACTOR, RF2_REFUSED), 10, "every dir cordoned")
        heartbeat(1)
        heartbeat(2, None)
        assert rf2() == (E.INVALID_REPLICATION_FACTOR, RF2_REFUSED)   # null and v1 change nothing

        c.restart(1)
        wait_until(lambda: rf2() == (E.INVALID_REPLICATION_FACTOR, RF2_REFUSED), 60,
                   "still cordoned after the controller's restart (replayed from the metadata log)")
        reg_again = wire.call(ctrl, HQ(broker_id=2, broker_epoch=epoch, current_metadata_offset=2**40,
                                       want_fence=False, want_shut_down=False, cordoned_log_dirs=[]), 2)
        assert reg_again.error_code == E.NONE, reg_again
        wait_until(lambda: rf2() == (E.NONE, None), 10, "uncordoned by an empty list")
