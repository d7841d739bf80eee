"""Transaction version 2 side by side with Apache Kafka 4.3.1: a node formatted at 3.8-IV0 (the
level kcompat finalizes for a new cluster) accepts ``kafka-features.sh upgrade --feature
transaction.version=2``, and then the same raw requests get the same answers from it and from
kcompat: Produce v12 adding a partition the client never added, EndTxn v5 bumping the epoch and
answering it (retries, an empty abort, a commit of nothing), a zombie's batch with the old epoch,
an EndTxn v4 ending a transaction a v12 produce opened (TV1 semantics), TxnOffsetCommit v5 adding
the group's offsets partition, the offsets readable once committed, DescribeTransactions and
DescribeProducers along the way. Producer ids are compared relative to the first one handed out,
topic names are replaced and the offsets partition of the (randomly named) group left out; error
messages are left out too."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from conformance import maven
from conformance.clients.java import JavaTools
from conformance.reference import ReferenceKafka
from kcompat.protocol import records
from kcompat.protocol.messages.create_topics import CreateTopicsRequest as CTQ
from kcompat.protocol.messages.describe_producers import DescribeProducersRequest as DPQ
from kcompat.protocol.messages.describe_transactions import DescribeTransactionsRequest as DTQ
from kcompat.protocol.messages.end_txn import EndTxnRequest as EQ
from kcompat.protocol.messages.find_coordinator import FindCoordinatorRequest as FCQ
from kcompat.protocol.messages.init_producer_id import InitProducerIdRequest as IPQ
from kcompat.protocol.messages.offset_fetch import OffsetFetchRequest as OFQ
from kcompat.protocol.messages.produce import ProduceRequest as PQ
from kcompat.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest as TOQ
from kcompat.testing import wire
from tests.support.broker_process import BrokerProcess

RECS = [(1000, b"k0", b"v0", ())]
RETRIABLE = (14, 15, 16)   # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


class _Kafka38(ReferenceKafka):
    """Kafka 4.3.1 formatted at 3.8-IV0 (``kafka-storage.sh format --release-version 3.8-IV0``)."""

    def _java(self, main: str, args: list[str], **kw) -> list[str]:
        if main == "kafka.tools.StorageTool" and args and args[0] == "format":
            args = [*args, "--release-version", "3.8-IV0"]
        return super()._java(main, args, **kw)


def upgrade_tv2(lib, bootstrap: str, workdir: Path) -> str:
    out = JavaTools(str(lib), workdir).run("org.apache.kafka.tools.FeatureCommand",
                                           ["--bootstrap-server", bootstrap, "upgrade", "--feature",
                                            "transaction.version=2"], check=False, timeout=120, heap="256m")
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]
    return out.stdout.strip()


def scenario(addr: str) -> list:
    """The requests, each answer normalized: [(step, answer)]."""
    out: list = []
    topic = f"tv2-{uuid.uuid4().hex[:8]}"
    resp = wire.call(addr, CTQ(topics=[CTQ.CreatableTopic(name=topic, num_partitions=1, replication_factor=1)],
                               timeout_ms=10000), 7)
    assert resp.topics[0].error_code == 0, resp
    tid, group = f"tv2-{uuid.uuid4().hex[:6]}", f"tv2-g-{uuid.uuid4().hex[:6]}"

    def until(call, ok=lambda r: r not in RETRIABLE):
        deadline = time.monotonic() + 60
        while not ok(answer := call()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return answer

    def init():
        wire.call(addr, FCQ(key_type=1, coordinator_keys=[tid]), 4)
        r = wire.call(addr, IPQ(transactional_id=tid, transaction_timeout_ms=60000, producer_id=-1,
                                producer_epoch=-1), 5)
        return r.error_code, r.producer_id, r.producer_epoch

    error, pid, epoch = until(init, lambda r: r[0] not in RETRIABLE)
    out.append(("init", (error, epoch)))

    def rel(p: int) -> int:
        return p - pid if p >= 0 else p

    def produce(epoch_: int, seq: int, version: int = 12):
        batch = records.build_batch(RECS, producer_id=pid, producer_epoch=epoch_, base_sequence=seq, transactional=True)
        r = wire.call(addr, PQ(transactional_id=tid, acks=-1, timeout_ms=10000, topic_data=[PQ.TopicProduceData(
            name=topic, partition_data=[PQ.PartitionProduceData(index=0, records=batch)])]), version)
        p = r.responses[0].partition_responses[0]
        return p.error_code, p.base_offset

    def end(epoch_: int, commit: bool, version: int = 5):
        r = wire.call(addr, EQ(transactional_id=tid, producer_id=pid, producer_epoch=epoch_, committed=commit), version)
        return r.error_code, rel(r.producer_id), r.producer_epoch

    def describe():
        deadline = time.monotonic() + 30
        while True:   # once the markers are written
            s = wire.call(addr, DTQ(transactional_ids=[tid]), 0).transaction_states[0]
            if not s.transaction_state.startswith("Prepare") or time.monotonic() > deadline:
                # the group's offsets partition depends on its (random) name: only their number counts
                return (s.error_code, s.transaction_state, rel(s.producer_id), s.producer_epoch,
                        sorted((t.topic.replace(topic, "T"), sorted(t.partitions) if t.topic == topic
                                else len(t.partitions)) for t in s.topics))

    def producers():
        r = wire.call(addr, DPQ(topics=[DPQ.TopicRequest(name=topic, partition_indexes=[0])]), 0)
        return [(rel(a.producer_id), a.producer_epoch, a.last_sequence, a.current_txn_start_offset)
                for a in r.topics[0].partitions[0].active_producers]

    def txn_offset_commit(epoch_: int, version: int = 5):
        r = wire.call(addr, TOQ(transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch_,
                                generation_id=-1, member_id="", group_instance_id=None, topics=[
                                    TOQ.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                                        TOQ.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=5,
                                                                            committed_leader_epoch=-1,
                                                                            committed_metadata="m")])]), version)
        return r.topics[0].partitions[0].error_code

    def offsets():
        r = wire.call(addr, OFQ(group_id=group, topics=[OFQ.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])],
                                require_stable=True), 7)
        return r.error_code, [(p.committed_offset, p.error_code) for t in r.topics for p in t.partitions]

    out.append(("produce v12, partition never added", produce(epoch, 0)))
    out.append(("describe", describe()))
    out.append(("produce v12 again", produce(epoch, 1)))
    out.append(("end v5 commit", end(epoch, True)))
    out.append(("describe", describe()))
    out.append(("producers", producers()))
    out.append(("end v5 retry", end(epoch, True)))
    out.append(("end v5 commit of nothing", end(epoch + 1, True)))
    out.append(("end v5 abort of nothing", end(epoch + 1, False)))
    out.append(("describe", describe()))
    out.append(("zombie produce, old epoch", produce(epoch, 2)[0]))
    out.append(("produce, new epoch", produce(epoch + 2, 0)))
    out.append(("end v4 commit", end(epoch + 2, True, version=4)))
    out.append(("describe", describe()))
    out.append(("producers", producers()))
    until(lambda: wire.call(addr, FCQ(key_type=0, coordinator_keys=[group]), 4).coordinators[0].error_code)
    out.append(("txn offset commit v5", until(lambda: txn_offset_commit(epoch + 2))))
    out.append(("describe", describe()))
    out.append(("offsets while pending", offsets()))
    out.append(("end v5 commit", end(epoch + 2, True)))
    out.append(("describe", describe()))
    out.append(("offsets committed", until(offsets, lambda r: r[1] == [(5, 0)])))
    out.append(("txn offset commit v5, fenced epoch", txn_offset_commit(epoch + 2)))
    # KIP-890 part 1 below v12 / v5: verification only; the partition not in the transaction is
    # TRANSACTION_ABORTABLE from Produce v11 and TxnOffsetCommit v4 on, INVALID_TXN_STATE before
    for version in (11, 10, 9):
        out.append((f"produce v{version}, partition never added", produce(epoch + 3, 0, version)))
    group = f"tv2-g-{uuid.uuid4().hex[:6]}"
    until(lambda: wire.call(addr, FCQ(key_type=0, coordinator_keys=[group]), 4).coordinators[0].error_code)
    for version in (4, 3, 2):
        out.append((f"txn offset commit v{version}, partition never added",
                    until(lambda: txn_offset_commit(epoch + 3, version))))
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    lib = maven.resolve_kafka("4.3.1")
    kafka = _Kafka38(lib, "4.3.1", Path(tmp_path_factory.mktemp("kafka38")))
    kafka.start()
    try:
        upgraded = upgrade_tv2(lib, kafka.bootstrap, tmp_path_factory.mktemp("kafka38-tools"))
        yield upgraded, scenario(kafka.bootstrap)
    finally:
        kafka.stop()


@pytest.mark.timeout(1200)   # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
def test_kcompat_answers_tv2_requests_as_kafka_4_3_1(reference, tmp_path):
    upgraded, theirs = reference
    assert upgraded == "transaction.version was upgraded to 2."   # Kafka allows it at 3.8-IV0
    with BrokerProcess(tmp_path / "data") as b:
        assert upgrade_tv2(maven.resolve_kafka("4.3.1"), b.bootstrap, tmp_path) == upgraded
        ours = scenario(b.bootstrap)
    assert ours == theirs
