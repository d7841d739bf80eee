"""The metadata loader applies every committed record to the image at once but hands them to the
broker once per run of events (Kafka's loader publishes a delta): a restarting node that replays
its metadata log takes each partition's final role, not every historical leadership in turn."""

from __future__ import annotations

import uuid

from kcompat.broker.metadata_loader import MetadataLoader
from kcompat.kraft.image import MetadataImage
from kcompat.kraft.metadata_log import encode_record
from kcompat.kraft.raft import CommittedBatch, LeaderAndEpoch, LeaderChanged
from kcompat.protocol import records as rb
from kcompat.protocol.metadata_records import PartitionChangeRecord, PartitionRecord, TopicRecord

TID = uuid.uuid4()


class FakeBroker:
    """What the loader calls on a broker; records each call with the image's view of ``t-0``."""

    def __init__(self) -> None:
        self.image = MetadataImage()
        self.calls: list[tuple] = []

    def now_ms(self) -> int:
        return 0

    def _leader(self):
        t = self.image.topics.get("t")
        return None if t is None else (t.partitions[0].leader, t.partitions[0].leader_epoch)

    def on_metadata(self, records) -> None:
        self.calls.append(("metadata", [type(r).__name__ for r in records], self._leader()))

    def on_quorum_leader(self, leader_id: int, epoch: int) -> None:
        self.calls.append(("quorum leader", leader_id, epoch))

    def on_metadata_snapshot(self) -> None:
        self.calls.append(("snapshot",))


def loader_of(broker: FakeBroker) -> MetadataLoader:
    return MetadataLoader(broker.image, None, now_ms=broker.now_ms, on_metadata=broker.on_metadata,
                          on_metadata_snapshot=broker.on_metadata_snapshot, on_quorum_leader=broker.on_quorum_leader)


def batch(offset: int, *records) -> CommittedBatch:
    data = rb.build_batch([(0, None, encode_record(r), ()) for r in records], base_offset=offset)
    return CommittedBatch(offset, offset + len(records) - 1, 1, False, data)


def history() -> list[CommittedBatch]:
    """A topic whose leader moves 1 -> 2 -> 3 -> 1 (four leader epochs), one batch each."""
    return [batch(0, TopicRecord(name="t", topic_id=TID),
                  PartitionRecord(partition_id=0, topic_id=TID, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1,
                                  leader_epoch=0, partition_epoch=0)),
            *(batch(2 + i, PartitionChangeRecord(partition_id=0, topic_id=TID, leader=leader))
              for i, leader in enumerate((2, 3, 1)))]


def test_a_run_of_batches_is_published_once_with_the_final_state():
    broker = FakeBroker()
    loader = loader_of(broker)
    for event in history():
        loader.on_event(event)
    assert broker.calls == []                          # the image has them, the broker not yet
    assert broker._leader() == (1, 3) and broker.image.offset == 4
    loader.publish()
    assert broker.calls == [("metadata", ["TopicRecord", "PartitionRecord"] + ["PartitionChangeRecord"] * 3,
                             (1, 3))]
    loader.publish()                                   # nothing new: no call
    assert len(broker.calls) == 1


def test_a_leader_change_sees_every_record_before_it_published():
    broker = FakeBroker()
    loader = loader_of(broker)
    first, *rest = history()
    loader.on_event(first)
    loader.on_event(LeaderChanged(LeaderAndEpoch(2, 5)))
    for event in rest:
        loader.on_event(event)
    loader.publish()
    assert broker.calls == [("metadata", ["TopicRecord", "PartitionRecord"], (1, 0)),
                            ("quorum leader", 2, 5),
                            ("metadata", ["PartitionChangeRecord"] * 3, (1, 3))]
