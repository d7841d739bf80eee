"""Feature flags in the controller (kcompat.kraft.feature_control): what a new cluster finalizes,
UpdateFeatures' rules and messages as Kafka 4.3.1's FeatureControlManager, and the image's replay
of FeatureLevelRecords and broker registrations. Expected values come from Kafka 4.3.1's classes
(MetadataVersion, Feature.defaultLevel, java.util.HashMap order)."""

from __future__ import annotations

import uuid

import pytest

from kcompat.kraft import feature_control as fc
from kcompat.kraft.feature_control import SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE, Update
from kcompat.kraft.image import MetadataImage
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.metadata_records import FeatureLevelRecord, RegisterBrokerRecord

LOCAL = fc.supported({"metadata.version": 20})


def update(finalized, *updates, local=LOCAL, brokers=None):
    return fc.update_features(dict(finalized), list(updates), node_id=1, local=local,
                              brokers={1: dict(LOCAL)} if brokers is None else brokers)


def refusal(finalized, *updates, **kw) -> str:
    with pytest.raises(KafkaError) as e:
        update(finalized, *updates, **kw)
    assert e.value.code == ErrorCode.INVALID_UPDATE_VERSION
    return e.value.message


def levels(records) -> list[tuple[str, int]]:
    return [(r.name, r.feature_level) for r in records]


def test_supported_levels_are_what_kcompat_implements():
    assert LOCAL == {"metadata.version": (7, 20), "group.version": (0, 1), "share.version": (0, 1),
                     "transaction.version": (0, 2), "kraft.version": (0, 0), "streams.version": (0, 1)}
    # a data dir already finalized higher keeps its level supported
    assert fc.supported({"metadata.version": 21})["metadata.version"] == (7, 21)


def test_a_new_cluster_finalizes_what_kafka_4_3_finalizes_at_its_metadata_version():
    """Feature.defaultLevel: at 3.8-IV0 every feature other than metadata.version is at 0; at
    4.3-IV0 Kafka finalizes group 1, share 1, transaction 2, ELR 1 (kcompat does not support it)
    and streams 1. kcompat finalizes streams.version 1 whatever the metadata.version, as a Kafka
    4.3.1 node formatted at its default release has it (KIP-1071 streams groups on by default)."""
    assert levels(fc.bootstrap_records()) == [("metadata.version", 20), ("streams.version", 1)]
    assert fc.default_levels(22) == {"metadata.version": 22, "group.version": 1, "streams.version": 1}
    assert fc.default_levels(30) == {"metadata.version": 30, "transaction.version": 2, "group.version": 1,
                                     "share.version": 1, "streams.version": 1}


def test_java_hash_map_order():
    names = ["transaction.version", "share.version", "group.version", "metadata.version", "foo",
             "kraft.version", "streams.version", "eligible.leader.replicas.version"]
    assert fc.java_hash_map_order(names) == [   # what Kafka 4.3.1's JVM iterates
        "group.version", "kraft.version", "share.version", "metadata.version", "foo", "streams.version",
        "transaction.version", "eligible.leader.replicas.version"]


def test_upgrades_downgrades_and_disabling():
    at20 = {"metadata.version": 20}
    assert levels(update(at20, Update("group.version", 1))) == [("group.version", 1)]
    assert levels(update({**at20, "group.version": 1}, Update("group.version", 0, SAFE_DOWNGRADE))) == \
        [("group.version", 0)]
    assert levels(update({**at20, "group.version": 1}, Update("group.version", 0, UNSAFE_DOWNGRADE))) == \
        [("group.version", 0)]
    # setting the current level needs no type; an unknown-to-kcompat feature Kafka knows may be set to 0
    assert levels(update(at20, Update("group.version", 0, SAFE_DOWNGRADE))) == [("group.version", 0)]
    assert levels(update(at20, Update("streams.version", 0))) == [("streams.version", 0)]
    # kraft.version stays with the Raft layer: no record
    assert update(at20, Update("kraft.version", 0)) == []
    assert levels(update(at20, Update("share.version", 1), Update("transaction.version", 1))) == \
        [("share.version", 1), ("transaction.version", 1)]
    # transaction.version 2 (KIP-890 part 2) has no dependency: Kafka 4.3.1 formatted at 3.8-IV0
    # upgrades to it (kafka-features.sh upgrade --feature transaction.version=2 succeeds there)
    assert levels(update(at20, Update("transaction.version", 2))) == [("transaction.version", 2)]


@pytest.mark.parametrize("finalized, upd, reason", [
    ({}, Update("transaction.version", 3), "Local controller 1 only supports versions 0-2"),
    ({}, Update("eligible.leader.replicas.version", 1), "Local controller 1 does not support this feature."),
    ({}, Update("streams.version", 2), "Local controller 1 only supports versions 0-1"),
    ({}, Update("foo", 1), "Local controller 1 does not support this feature."),
    ({}, Update("foo", 0), "Feature foo not found."),
    ({}, Update("kraft.version", 1), "Local controller 1 does not support this feature."),
    ({}, Update("group.version", -1), "A feature version cannot be less than 0."),
    ({}, Update("group.version", 1, 0), "The controller does not support the given upgrade type."),
    ({}, Update("group.version", 1, 4), "The controller does not support the given upgrade type."),
    ({}, Update("group.version", 1, SAFE_DOWNGRADE), "Can't downgrade to a newer version."),
    ({"group.version": 1}, Update("group.version", 0), "Can't downgrade the version of this feature without "
                                                        "setting the upgrade type to either safe or unsafe downgrade."),
    ({}, Update("metadata.version", 21), "Local controller 1 only supports versions 7-20"),
    ({}, Update("metadata.version", 6, SAFE_DOWNGRADE), "Local controller 1 only supports versions 7-20"),
])
def test_refusals_carry_kafkas_messages(finalized, upd, reason):
    finalized = {"metadata.version": 20, **finalized}
    assert refusal(finalized, upd) == f"Invalid update version {upd.level} for feature {upd.feature}. {reason}"


def test_every_registered_broker_must_support_the_level():
    old = {"metadata.version": (7, 20)}   # registered before it listed group.version
    assert refusal({"metadata.version": 20}, Update("group.version", 1), brokers={1: LOCAL, 2: old}) == \
        "Invalid update version 1 for feature group.version. Broker 2 does not support this feature."
    behind = {3: {"metadata.version": (7, 19)}}
    assert refusal({"metadata.version": 20}, Update("metadata.version", 20), brokers=behind) == \
        "Invalid update version 20 for feature metadata.version. Broker 3 only supports versions 7-19"


def test_metadata_version_downgrades_follow_did_metadata_change():
    """3.8-IV0 -> 3.7-IV2 crosses only versions that did not change the metadata; 3.7-IV2 itself
    did, so going below it is refused, whatever the downgrade type."""
    assert levels(update({"metadata.version": 20}, Update("metadata.version", 17, SAFE_DOWNGRADE))) == \
        [("metadata.version", 17)]
    lossy = "Refusing to perform the requested downgrade because it might delete metadata information."
    assert refusal({"metadata.version": 20}, Update("metadata.version", 16, SAFE_DOWNGRADE)) == \
        f"Unsupported metadata.version downgrade from 20 to 16. {lossy}"
    assert refusal({"metadata.version": 20}, Update("metadata.version", 16, UNSAFE_DOWNGRADE)) == \
        ("Unsupported metadata.version downgrade from 20 to 16. Unsafe metadata downgrade is not supported in this "
         "version.")
    assert levels(update({"metadata.version": 17}, Update("metadata.version", 20))) == [("metadata.version", 20)]


def test_dependencies_are_checked_against_the_proposed_levels():
    """ELR level 1 needs metadata.version 23 (4.0-IV1), in the same request or already."""
    local = {"metadata.version": (7, 30), "eligible.leader.replicas.version": (0, 1)}
    brokers = {1: local}
    assert refusal({"metadata.version": 20}, Update("eligible.leader.replicas.version", 1), local=local,
                   brokers=brokers) == ("Invalid update version 1 for feature eligible.leader.replicas.version. "
                                        "eligible.leader.replicas.version could not be set to 1 because it depends on "
                                        "metadata.version level 23")
    assert levels(update({"metadata.version": 20}, Update("eligible.leader.replicas.version", 1),
                         Update("metadata.version", 23), local=local, brokers=brokers)) == \
        [("metadata.version", 23), ("eligible.leader.replicas.version", 1)]


def test_the_first_failure_in_hash_map_order_fails_the_whole_request():
    """group.version comes before transaction.version in a Java HashMap, so its reason is the one."""
    assert refusal({"metadata.version": 20}, Update("transaction.version", 3), Update("group.version", 9)) == \
        "Invalid update version 9 for feature group.version. Local controller 1 only supports versions 0-1"
    # a repeated feature counts once, with its last level
    assert levels(update({"metadata.version": 20}, Update("group.version", 9), Update("group.version", 1))) == \
        [("group.version", 1)]


def test_the_image_replays_levels_and_broker_features():
    image = MetadataImage()
    for offset, rec in enumerate([
            FeatureLevelRecord(name="metadata.version", feature_level=20),
            FeatureLevelRecord(name="group.version", feature_level=1),
            FeatureLevelRecord(name="share.version", feature_level=1),
            FeatureLevelRecord(name="share.version", feature_level=0),   # disabled: gone
            FeatureLevelRecord(name="kraft.version", feature_level=1),   # the Raft layer's: skipped
            RegisterBrokerRecord(broker_id=1, incarnation_id=uuid.uuid4(), broker_epoch=5, features=[
                RegisterBrokerRecord.BrokerFeature(name="group.version", min_supported_version=0,
                                                   max_supported_version=1)])]):
        image.apply(rec, offset)
    assert image.features == {"metadata.version": 20, "group.version": 1}
    assert image.brokers[1].features == {"group.version": (0, 1)}
    again = MetadataImage()
    for offset, rec in enumerate(image.to_records()):
        again.apply(rec, offset)
    assert again.features == image.features and again.brokers[1].features == {"group.version": (0, 1)}
