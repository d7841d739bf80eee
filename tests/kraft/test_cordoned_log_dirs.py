"""Cordoned log dirs (KIP-1066) in the metadata: the records, the image, the controller's rules.

- Records written before KIP-1066 (RegisterBrokerRecord v3, BrokerRegistrationChangeRecord v2,
  golden bytes of the generator's output before the 4.3.1 specs) still read, with no cordoned dirs
  (null: not reported yet); v4/v3 keep null, [] and a list apart.
- The image as Kafka's ``BrokerRegistration``: a change with null keeps the dirs, [] clears them;
  ``has_uncordoned_dirs`` false only when every registered dir is cordoned; snapshots keep them.
- ``ClusterControl.heartbeat`` (``ReplicationControlManager.handleDirectoriesCordoned``): a
  BrokerRegistrationChangeRecord only when the set changes; a new registration starts at null.
- The controller's placement leaves out brokers whose every dir is cordoned; a manual assignment
  may still name them.
- ``cordoned.log.dirs`` checks with Kafka's messages; the log manager's choice of dir.
"""

from __future__ import annotations

import uuid

import pytest

from kcompat.config import BrokerConfig, ConfigError
from kcompat.config.cordoned import check_cordoned, cordoned_entries
from kcompat.kraft.cluster_control import Listener
from kcompat.kraft.controller import NewTopic
from kcompat.kraft.image import MetadataImage
from kcompat.kraft.metadata_log import decode_record, encode_record
from kcompat.log import LogConfig, LogManager
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.framing import encode_framed
from kcompat.protocol.metadata_records import BrokerRegistrationChangeRecord, RegisterBrokerRecord
from tests.kraft.test_cluster_control import T0, Harness

U1, U2 = uuid.UUID(int=7), uuid.UUID(int=8)
# RegisterBrokerRecord v3 (broker 3, epoch 42, dirs U1 U2) and BrokerRegistrationChangeRecord v2
# (unfenced, dirs U2) as kcompat wrote them before the Kafka 4.3.1 specs
OLD_REGISTER = bytes.fromhex(
    "010003000000030000000000000000000000000000001234000000000000002a020a504c41494e54455854036833238400000001"
    "000100010021030000000000000000000000000000000700000000000000000000000000000008")
OLD_CHANGE = bytes.fromhex("01110200000003000000000000002a020001ff02110200000000000000000000000000000008")


def test_records_written_before_kip_1066_still_read_with_no_cordoned_dirs():
    register, change = decode_record(OLD_REGISTER), decode_record(OLD_CHANGE)
    assert (register.broker_id, register.broker_epoch, register.log_dirs, register.cordoned_log_dirs) == \
        (3, 42, [U1, U2], None)
    assert (change.fenced, change.log_dirs, change.cordoned_log_dirs) == (-1, [U2], None)
    image = MetadataImage()
    image.apply(register, 42)
    image.apply(change, 43)
    b = image.brokers[3]
    assert (b.log_dirs, b.cordoned_log_dirs, b.has_uncordoned_dirs()) == ([U2], None, True)
    # at their old versions they are still written byte for byte as before
    assert encode_framed(register, 3) == OLD_REGISTER and encode_framed(change, 2) == OLD_CHANGE


@pytest.mark.parametrize("dirs", [None, [], [U1], [U2, U1]])
def test_new_versions_keep_null_empty_and_lists_apart(dirs):
    r = RegisterBrokerRecord(broker_id=1, broker_epoch=5, log_dirs=[U1, U2], cordoned_log_dirs=dirs)
    assert decode_record(encode_record(r)).cordoned_log_dirs == dirs
    c = BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=5, cordoned_log_dirs=dirs)
    assert decode_record(encode_record(c)).cordoned_log_dirs == dirs


def test_image_follows_registration_changes_and_snapshots_keep_them():
    image = MetadataImage()
    image.apply(RegisterBrokerRecord(broker_id=1, broker_epoch=1, log_dirs=[U1, U2]), 1)
    b = image.brokers[1]
    assert b.cordoned_log_dirs is None and b.has_uncordoned_dirs()
    image.apply(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=1, cordoned_log_dirs=[U1]), 2)
    assert b.cordoned_log_dirs == [U1] and b.has_uncordoned_dirs()
    image.apply(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=1, cordoned_log_dirs=[U2, U1]), 3)
    assert not b.has_uncordoned_dirs()
    image.apply(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=1, fenced=-1), 4)   # null: no change
    assert b.cordoned_log_dirs == [U2, U1] and not b.fenced
    image.apply(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=0, cordoned_log_dirs=[]), 5)  # stale epoch
    assert b.cordoned_log_dirs == [U2, U1]

    copy = MetadataImage()
    for i, r in enumerate(image.to_records()):
        copy.apply(decode_record(encode_record(r)), i)
    assert copy.brokers[1].cordoned_log_dirs == [U2, U1] and not copy.brokers[1].has_uncordoned_dirs()
    image.apply(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=1, cordoned_log_dirs=[]), 6)
    assert b.cordoned_log_dirs == [] and b.has_uncordoned_dirs()
    image.apply(RegisterBrokerRecord(broker_id=2, broker_epoch=7), 7)   # no dirs registered: never full
    image.apply(BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=7, cordoned_log_dirs=[U1]), 8)
    assert image.brokers[2].has_uncordoned_dirs()


def test_heartbeats_write_a_registration_change_only_when_the_cordoned_set_changes():
    h = Harness()
    epoch = h.cc.register(1, "c1", uuid.uuid4(), [Listener("PLAINTEXT", "h1", 9092)], None, -1, T0, log_dirs=[U1, U2])

    def beat(dirs):
        before = len(h.records)
        h.cc.heartbeat(1, epoch, h.image.offset, False, False, T0, cordoned_dirs=dirs)
        return [r for r in h.records[before:] if isinstance(r, BrokerRegistrationChangeRecord)]

    assert beat(None) == []   # not caught up yet: nothing known
    # nothing cordoned: no record, the registration's list stays null (below metadata.version
    # 4.3-IV0 Kafka cannot represent a non-null one; tests/kraft/test_kafka_metadata_image.py)
    assert beat([]) == [] and h.image.brokers[1].cordoned_log_dirs is None
    (change,) = beat([U2, U1])
    assert change.cordoned_log_dirs == [U2, U1]
    assert beat([U1, U2]) == [] and beat(None) == []   # same set; null changes nothing
    epoch = h.cc.register(1, "c1", h.image.brokers[1].incarnation_id, [Listener("PLAINTEXT", "h1", 9092)], None,
                          epoch, T0, log_dirs=[U1, U2])
    assert h.image.brokers[1].cordoned_log_dirs is None   # a new registration starts unknown, as in Kafka


def test_placement_skips_brokers_whose_every_dir_is_cordoned_but_manual_assignments_may_name_them():
    h = Harness()
    for b in (1, 2, 3):
        epoch = h.cc.register(b, "c1", uuid.uuid4(), [Listener("PLAINTEXT", f"h{b}", 9092)], None, -1, T0,
                              log_dirs=[uuid.UUID(int=b * 10), uuid.UUID(int=b * 10 + 1)])
        h.cc.heartbeat(b, epoch, h.image.offset, False, False, T0, cordoned_dirs=[])
    b3 = h.image.brokers[3]
    h.cc.heartbeat(3, b3.epoch, h.image.offset, False, False, T0, cordoned_dirs=[uuid.UUID(int=30)])
    assert {r for p in h.topic("half", 9, 3).partitions.values() for r in p.replicas} == {1, 2, 3}
    h.cc.heartbeat(3, b3.epoch, h.image.offset, False, False, T0, cordoned_dirs=[uuid.UUID(int=31), uuid.UUID(int=30)])
    assert all(sorted(p.replicas) == [1, 2] for p in h.topic("drained", 9, 2).partitions.values())
    (res,) = h.controller.create_topics([NewTopic("rf3", 1, 3)], validate_only=True, now_ms=T0)
    assert (res.error, res.message) == (
        ErrorCode.INVALID_REPLICATION_FACTOR, "Unable to replicate the partition 3 time(s): The target replication "
        "factor of 3 cannot be reached because only 2 broker(s) are registered or some brokers have all their log "
        "directories cordoned.")
    (res,) = h.controller.create_topics([NewTopic("manual", -1, -1, assignments={0: [3, 1]})], validate_only=False,
                                        now_ms=T0)
    assert res.error == ErrorCode.NONE and h.image.topics["manual"].partitions[0].replicas == [3, 1]
    assert h.controller.create_partitions("drained", 12, None, validate_only=False, now_ms=T0) is None
    assert all(3 not in p.replicas for p in h.image.topics["drained"].partitions.values())


def _config(**props) -> BrokerConfig:
    return BrokerConfig({k.replace("_", "."): v for k, v in props.items()})


def test_the_config_as_kafka_defines_and_checks_it():
    from kcompat.config.definitions import BROKER_CONFIGS, PER_BROKER_CONFIGS
    key = BROKER_CONFIGS["cordoned.log.dirs"]
    assert (key.type.name, key.default_str, "cordoned.log.dirs" in PER_BROKER_CONFIGS) == ("LIST", "", True)
    with pytest.raises(ConfigError) as e:
        key.parse("/a,,/b")
    assert e.value.message == "Configuration 'cordoned.log.dirs' values must not be empty."
    cfg = _config(log_dirs="/a,/b", cordoned_log_dirs="*")
    assert cordoned_entries(cfg) == ["/a", "/b"]
    assert cordoned_entries(_config(log_dirs="/a,/b", cordoned_log_dirs="/b,/b")) == ["/b"]
    assert cordoned_entries(_config(log_dir="/only")) == []
    check_cordoned(["/a"], ["*", "*"])
    with pytest.raises(ConfigError) as e:
        check_cordoned(["/a"], ["*", "/a"])
    assert e.value.message == "requirement failed: When cordoned.log.dirs is set to *, it must not contain other values"
    with pytest.raises(ConfigError) as e:
        check_cordoned(["/a"], ["/b", "/a", "/c"], error="INVALID_REQUEST")
    assert (e.value.error, e.value.message) == ("INVALID_REQUEST", "requirement failed: All entries in cordoned.log."
                                                "dirs must be present in log.dirs or log.dir. Missing entries : /b, /c")


def test_new_logs_go_to_the_emptiest_dir_that_is_not_cordoned_else_the_first_online_one(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    lm = LogManager(dirs, lambda topic: LogConfig())
    lm.startup(T0, "cluster", 1)
    try:
        assert lm.set_cordoned({dirs[0]}) and not lm.set_cordoned({dirs[0]})
        for p in range(4):
            lm.create("t", p, LogConfig(), U1, T0)
        assert sorted(lm.log_dir_of("t", p) for p in range(4)) == [dirs[1], dirs[1], dirs[2], dirs[2]]
        lm.set_cordoned(set(dirs))
        lm.create("t", 4, LogConfig(), U1, T0)
        assert lm.log_dir_of("t", 4) == dirs[0]   # Kafka: every dir cordoned -> the first live one
        assert [d.is_cordoned for d in lm.describe_dirs()] == [True, True, True]
    finally:
        lm.shutdown()
