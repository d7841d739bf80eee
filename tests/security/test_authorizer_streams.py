"""Streams groups (KIP-1071) with the authorizer on, over the wire against a kcompat process, as
Kafka 4.3.1's KafkaApis.handleStreamsGroupHeartbeat / handleStreamsGroupDescribe: READ on the group
for StreamsGroupHeartbeat and DESCRIBE for StreamsGroupDescribe (GROUP_AUTHORIZATION_FAILED),
DESCRIBE on every topic of the topology (TOPIC_AUTHORIZATION_FAILED), and the internal topics
created only with CREATE on the cluster or on them (else the MISSING_INTERNAL_TOPICS status says
"Unauthorized to CREATE on topics ..." and none is created)."""

from __future__ import annotations

import time

import pytest

from kcompat.protocol.errors import ErrorCode as E
from kcompat.protocol.messages.streams_group_describe import StreamsGroupDescribeRequest
from kcompat.security.acl import AclOperation as Op, AclPermissionType as Perm, PatternType as PT, ResourceType as RT
from kcompat.testing import Broker, admin
from kcompat.testing.wire import call
from tests.broker.test_streams_group_wire import CHANGELOG, REPART, hb, status, topology
from tests.security.test_authorizer_broker import AUTH_CONFIGS, add_acl


@pytest.fixture(scope="module")
def broker():
    with Broker(AUTH_CONFIGS) as b:
        b.create_topic("wire-in", 2)
        b.create_topic("closed-in", 1)
        admin.wait_for_leaders(b.bootstrap_servers, ["wire-in", "closed-in"])
        yield b


def test_group_and_topic_acls(broker):
    b = broker.bootstrap_servers
    add_acl(broker, RT.GROUP, "sg-denied", Op.READ, Perm.DENY)
    add_acl(broker, RT.GROUP, "sg-denied", Op.DESCRIBE, Perm.DENY)
    add_acl(broker, RT.TOPIC, "closed-in", Op.DESCRIBE, Perm.DENY)
    assert hb(b, group="sg-denied").error_code == E.GROUP_AUTHORIZATION_FAILED
    assert hb(b, group="sg-open", top=topology(source="closed-in")).error_code == E.TOPIC_AUTHORIZATION_FAILED
    (g,) = call(b, StreamsGroupDescribeRequest(group_ids=["sg-denied"], include_authorized_operations=False),
                0).groups
    assert (g.group_id, g.error_code) == ("sg-denied", E.GROUP_AUTHORIZATION_FAILED)


def test_internal_topics_need_create(broker):
    b = broker.bootstrap_servers
    add_acl(broker, RT.TOPIC, "wc-KSTREAM", Op.CREATE, Perm.DENY, pattern=PT.PREFIXED)
    add_acl(broker, RT.TOPIC, "wc-KSTREAM", Op.DESCRIBE, pattern=PT.PREFIXED)   # the heartbeat needs it
    # last: with an ACL on the cluster, its other operations (ALTER for CreateAcls) need ACLs too
    add_acl(broker, RT.CLUSTER, "kafka-cluster", Op.CREATE, Perm.DENY)
    joined = hb(b, group="sg-create")
    assert joined.error_code == 0
    assert status(joined)[-1] == (3, f"Internal topics are missing: {CHANGELOG}, {REPART}; Unauthorized to CREATE "
                                     f"on topics {CHANGELOG}, {REPART}.")
    time.sleep(1.0)
    again = hb(b, "m1", joined.member_epoch, group="sg-create")
    assert status(again)[-1][0] == 3     # still missing: nothing was created
    assert not {CHANGELOG, REPART} & set(admin.list_topics(b))
