"""A stand-in broker for the coordinator runtimes (GroupRuntime, TxnRuntime), which it builds from
the CoordinatorServices it gives them: real Partitions over
real logs in a temporary directory, a metadata image reduced to leaders and leader epochs, and a
follower that is simulated by calling ``read_for_follower`` (it advances the high watermark).

Each internal partition is solo (replication factor 1, the HW is the log end offset) unless made
replicated with :meth:`RuntimeBroker.replicate`, which makes it lead replicas [1, 2] so that a
write waits until :meth:`RuntimeBroker.catch_up` lets replica 2 fetch. Use inside a running event
loop (``asyncio.run``)."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from types import SimpleNamespace

from kcompat.broker.api_services import MetadataCache
from kcompat.broker.coordinator_runtime import CoordinatorServices
from kcompat.broker.group_runtime import OFFSETS_TOPIC, GroupRuntime
from kcompat.broker.txn_runtime import TRANSACTION_STATE_TOPIC, TxnRuntime
from kcompat.config.broker import BrokerConfig
from kcompat.isr.partition import Partition
from kcompat.kraft.image import MetadataImage, PartitionImage, TopicImage
from kcompat.log import Log, LogConfig

CFG = LogConfig(segment_bytes=1 << 20, index_interval_bytes=4096)
LOCAL, FOLLOWER = 1, 2


class _ReplicaManager:
    def __init__(self) -> None:
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.txn_verifier = None
        self.remote_txn_verification = None
        self.txn_partition_adder = None

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def topic_partitions(self, topic: str) -> list[Partition]:
        return [p for (t, _), p in sorted(self.partitions.items()) if t == topic]


class RuntimeBroker:
    node_id = LOCAL

    def __init__(self, path, *, offsets_partitions: int = 2, txn_partitions: int = 2, data: dict | None = None,
                 **config) -> None:
        self.path = path
        props = {"offsets.topic.num.partitions": str(offsets_partitions),
                 "transaction.state.log.num.partitions": str(txn_partitions),
                 "group.initial.rebalance.delay.ms": "0"}
        props.update({k.replace("_", "."): str(v) for k, v in config.items()})
        self.config = BrokerConfig(props)
        self.image = MetadataImage()   # topics filled in directly below, no records
        self.replica_manager = _ReplicaManager()
        self.producer_id_manager = SimpleNamespace(generate=itertools.count(1000).__next__)
        for topic, n in ((OFFSETS_TOPIC, offsets_partitions), (TRANSACTION_STATE_TOPIC, txn_partitions),
                         *(data or {}).items()):
            for i in range(n):
                self.add_partition(topic, i)
        services = CoordinatorServices(
            node_id=LOCAL, config=self.config, image=self.image, metadata_cache=MetadataCache(self.image),
            now_ms=self.now_ms, replica_manager=self.replica_manager, log_manager=None,
            producer_id_manager=self.producer_id_manager, live_broker_ids=self.live_broker_ids,
            voter_count=lambda: 1, create_topics=self._create_topics)
        self.groups = GroupRuntime(services)
        self.txn = TxnRuntime(services, self.groups)

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def live_broker_ids(self) -> list[int]:
        return [LOCAL]

    async def _create_topics(self, topics):
        raise AssertionError(f"the internal topics exist from the start; asked to create {topics}")

    # -- partitions ----------------------------------------------------------------------------

    def add_partition(self, topic: str, i: int) -> Partition:
        t = self.image.topics.setdefault(topic, TopicImage(topic, uuid.uuid4()))
        t.partitions[i] = PartitionImage(i, [LOCAL], [LOCAL], LOCAL, 0, 0)
        log_ = Log.open(self.path / f"{topic}-{i}", CFG, clean_shutdown=True, now_ms=self.now_ms())
        p = Partition(topic, i, t.topic_id, log_, local_id=LOCAL)
        self.replica_manager.partitions[(topic, i)] = p
        return p

    def partition(self, topic: str, i: int) -> Partition:
        return self.replica_manager.get(topic, i)

    def replicate(self, topic: str, i: int, *, isr=(LOCAL, FOLLOWER), min_isr: int = 1) -> Partition:
        """Lead replicas [1, 2] (ISR ``isr``) at the same leader epoch (as if it had always been
        replicated), replica 2 caught up to now."""
        p = self.partition(topic, i)
        ip = self.image.topics[topic].partitions[i]
        ip.replicas, ip.isr, ip.leader = [LOCAL, FOLLOWER], list(isr), LOCAL
        p.make_leader(leader_epoch=ip.leader_epoch, partition_epoch=ip.partition_epoch, replicas=ip.replicas,
                      isr=ip.isr, now_ms=self.now_ms(), min_insync_replicas=min_isr)
        if FOLLOWER in isr:
            self.catch_up(topic, i)
        return p

    def catch_up(self, topic: str, i: int) -> None:
        """Replica 2 fetches up to the leader's log end offset: the HW follows."""
        p = self.partition(topic, i)
        p.read_for_follower(FOLLOWER, fetch_offset=p.log_end_offset, log_start_offset=p.log_start_offset,
                            last_fetched_epoch=-1, max_bytes=1 << 20, now_ms=self.now_ms())

    def move_leadership(self, topic: str, i: int) -> None:
        """Replica 2 becomes leader (the metadata publisher's order: role first, then coordinator)."""
        p = self.partition(topic, i)
        ip = self.image.topics[topic].partitions[i]
        ip.leader = FOLLOWER
        ip.leader_epoch += 1
        p.make_follower(leader_id=FOLLOWER, leader_epoch=ip.leader_epoch, replicas=ip.replicas)
        self.runtime(topic).on_partition_unhosted(i)

    def take_leadership(self, topic: str, i: int, *, follower_caught_up: bool = False) -> None:
        """This broker leads again, at a new leader epoch, and loads the coordinator."""
        p = self.partition(topic, i)
        ip = self.image.topics[topic].partitions[i]
        ip.leader = LOCAL
        ip.leader_epoch += 1
        p.make_leader(leader_epoch=ip.leader_epoch, partition_epoch=ip.partition_epoch, replicas=ip.replicas,
                      isr=ip.isr, now_ms=self.now_ms(), min_insync_replicas=1)
        if follower_caught_up:
            self.catch_up(topic, i)
        self.runtime(topic).on_partition_hosted(i)

    def runtime(self, topic: str):
        return self.groups if topic == OFFSETS_TOPIC else self.txn

    async def start(self) -> None:
        self.groups.start()
        self.txn.start()
        await self.loaded()

    async def loaded(self) -> None:
        for _ in range(200):
            if not self.groups._loads and not self.txn._loads:
                return
            await asyncio.sleep(0.005)
        raise AssertionError("coordinators still loading")

    def stop(self) -> None:
        self.txn.stop()
        self.groups.stop()
        for p in self.replica_manager.partitions.values():
            p.log.close()

    # -- requests ------------------------------------------------------------------------------

    @staticmethod
    def ctx(version: int):
        return SimpleNamespace(api_version=version, peer="127.0.0.1:50000", client_id="client")


async def settle(fut: asyncio.Future, timeout: float = 2.0):
    return await asyncio.wait_for(asyncio.shield(fut), timeout)


async def tick(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)
