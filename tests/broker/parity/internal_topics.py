"""Kafka's internal topics side by side with Apache Kafka 4.3.1: once the group, transaction and
share coordinators have made their topics (FindCoordinator creates them), Metadata flags all three
``is_internal`` (Kafka's ``Topic.INTERNAL_TOPICS``) and a user's topic not; so Admin's
``listTopics()`` without ``listInternal`` leaves ``__share_group_state`` out as Kafka does."""

from __future__ import annotations

import time

from kcompat.protocol.messages.find_coordinator import FindCoordinatorRequest
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.share.state_records import kafka_uuid_str
from kcompat.testing import admin, wire

INTERNAL = ("__consumer_offsets", "__transaction_state", "__share_group_state")


def scenario(bootstrap: str) -> dict[str, bool]:
    admin.create_topic(bootstrap, "plain", 1, 1)
    all_topics = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                 include_topic_authorized_operations=False)
    [plain] = [t for t in wire.call(bootstrap, all_topics, 12).topics if t.name == "plain"]
    keys = [(0, "g"), (1, "tid"), (2, f"g:{kafka_uuid_str(plain.topic_id)}:0")]
    deadline = time.monotonic() + 60
    while True:
        found = [wire.call(bootstrap, FindCoordinatorRequest(key_type=kind, coordinator_keys=[key]), 6)
                 .coordinators[0].error_code for kind, key in keys]
        listed = {t.name: t.is_internal for t in wire.call(bootstrap, all_topics, 12).topics}
        if found == [0, 0, 0] and all(name in listed for name in INTERNAL):
            return listed
        if time.monotonic() > deadline:
            raise TimeoutError(f"coordinators {found}, topics {sorted(listed)}")
        time.sleep(0.2)


def check(ours, theirs) -> None:
    """Kafka 4.3.1's answers are the expected ones and kcompat's the same."""
    assert theirs == {"plain": False, **{name: True for name in INTERNAL}}
    assert ours == theirs
