"""The share coordinator in real kcompat brokers and its client, the share persister (Kafka's
DefaultStatePersister): FindCoordinator for SHARE keys, the five share-state APIs over the wire,
state that survives a restart and a ``kill -9``, pruning of ``__share_group_state``, and a 3-node
cluster (replication factor 3) where the coordinator of a key is killed and the persister finds
the new one, with the state intact."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest

from kcompat.broker.broker_context import BrokerContext
from kcompat.broker.node_client import NodeClients
from kcompat.broker.share_persister import SharePersister
from kcompat.protocol.errors import ErrorCode as E
from kcompat.protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest as DelQ
from kcompat.protocol.messages.find_coordinator import FindCoordinatorRequest
from kcompat.protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest as InitQ
from kcompat.protocol.messages.list_offsets import ListOffsetsRequest
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.protocol.messages.read_share_group_state import ReadShareGroupStateRequest as ReadQ
from kcompat.protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryRequest as SumQ
from kcompat.protocol.messages.write_share_group_state import WriteShareGroupStateRequest as WriteQ
from kcompat.share.state_batches import PersistedStateBatch as B
from kcompat.share.state_records import ShareKey, coordinator_key, kafka_uuid_str
from kcompat.testing import admin, wire
from kcompat.testing.process import BrokerProcess, wait_for
from tests.support.cluster import Cluster, wait_until

G = "sg"
STATE_TOPIC = "__share_group_state"
FAST_STATE = {"share.coordinator.state.topic.num.partitions": "3",
              "share.coordinator.state.topic.replication.factor": "1"}


# ----------------------------------------------------------------------------------------------
# wire helpers
# ----------------------------------------------------------------------------------------------

def topic_id(bootstrap: str, name: str) -> uuid.UUID:
    resp = wire.call(bootstrap, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                                allow_auto_topic_creation=False), 12)
    return resp.topics[0].topic_id


def find_share_coordinator(bootstrap: str, key: str, version: int = 6):
    r = wire.call(bootstrap, FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), version)
    c = r.coordinators[0]
    return c.error_code, c.node_id


def wait_share_coordinator(bootstrap: str, key: str, timeout: float = 60.0) -> int:
    def found():
        code, node = find_share_coordinator(bootstrap, key)
        return node if code == 0 else None
    return wait_for(found, timeout, 0.2, f"a share coordinator for {key}")


def one(resp):
    [t] = resp.results
    [p] = t.partitions
    return p


def init(bootstrap, tid, partition=0, state_epoch=0, start_offset=-1):
    return one(wire.call(bootstrap, InitQ(group_id=G, topics=[InitQ.InitializeStateData(topic_id=tid, partitions=[
        InitQ.PartitionData(partition=partition, state_epoch=state_epoch, start_offset=start_offset)])]), 0))


def write(bootstrap, tid, batches, partition=0, start_offset=0, state_epoch=0, leader_epoch=0, dcc=0):
    return one(wire.call(bootstrap, WriteQ(group_id=G, topics=[WriteQ.WriteStateData(topic_id=tid, partitions=[
        WriteQ.PartitionData(partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch,
                             start_offset=start_offset, delivery_complete_count=dcc,
                             state_batches=[WriteQ.StateBatch(first_offset=b[0], last_offset=b[1], delivery_state=b[2],
                                                              delivery_count=b[3]) for b in batches])])]), 1))


def read(bootstrap, tid, partition=0, leader_epoch=0):
    return one(wire.call(bootstrap, ReadQ(group_id=G, topics=[ReadQ.ReadStateData(topic_id=tid, partitions=[
        ReadQ.PartitionData(partition=partition, leader_epoch=leader_epoch)])]), 0))


def summary(bootstrap, tid, partition=0):
    return one(wire.call(bootstrap, SumQ(group_id=G, topics=[SumQ.ReadStateSummaryData(topic_id=tid, partitions=[
        SumQ.PartitionData(partition=partition, leader_epoch=0)])]), 1))


def delete(bootstrap, tid, *partitions):
    resp = wire.call(bootstrap, DelQ(group_id=G, topics=[DelQ.DeleteStateData(topic_id=tid, partitions=[
        DelQ.PartitionData(partition=p) for p in partitions])]), 0)
    return [p.error_code for p in resp.results[0].partitions]


def batches(pr):
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in pr.state_batches]


def earliest_offset(bootstrap: str, partition: int) -> int:
    Q = ListOffsetsRequest
    r = wire.call(bootstrap, Q(replica_id=-1, isolation_level=0, topics=[Q.ListOffsetsTopic(
        name=STATE_TOPIC, partitions=[Q.ListOffsetsPartition(partition_index=partition, timestamp=-2)])]), 7)
    return r.topics[0].partitions[0].offset


# ----------------------------------------------------------------------------------------------
# one node over the wire: the APIs, restarts, kill -9
# ----------------------------------------------------------------------------------------------

def test_share_state_apis_on_one_node_and_across_restarts(tmp_path):
    b = BrokerProcess(tmp_path / "data", dict(FAST_STATE))
    b.start()
    try:
        boot = b.bootstrap
        admin.create_topic(boot, "t", 2, 1)
        tid = topic_id(boot, "t")
        key = coordinator_key(G, tid, 0)
        assert find_share_coordinator(boot, key, 5)[0] == E.INVALID_REQUEST   # SHARE keys need v6
        assert find_share_coordinator(boot, f"{G}:{tid}:0")[0] == E.INVALID_REQUEST  # not Kafka's Uuid form
        assert find_share_coordinator(boot, "nocolons")[0] == E.INVALID_REQUEST
        assert wait_share_coordinator(boot, key) == 1
        assert STATE_TOPIC in admin.list_topics(boot, internal=True)

        assert write(boot, tid, [(0, 4, 2, 1)]).error_code == E.INVALID_REQUEST      # not initialized
        assert read(boot, tid).error_code == E.INVALID_REQUEST
        assert init(boot, uuid.UUID(int=5)).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert init(boot, tid, partition=7).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert init(boot, tid, state_epoch=1).error_code == 0
        assert init(boot, tid, partition=1, state_epoch=1, start_offset=0).error_code == 0
        pr = read(boot, tid, leader_epoch=3)
        assert (pr.error_code, pr.state_epoch, pr.start_offset, batches(pr)) == (0, 1, -1, [])
        assert write(boot, tid, [(0, 4, 2, 1)], leader_epoch=2, state_epoch=1).error_code == E.FENCED_LEADER_EPOCH
        assert write(boot, tid, [(0, 4, 2, 1)], leader_epoch=3, state_epoch=0).error_code == E.FENCED_STATE_EPOCH
        for i in range(5):
            pr = write(boot, tid, [(i * 10, i * 10 + 9, 2, 1), (i * 10 + 10, i * 10 + 14, 0, 1)], start_offset=i * 10,
                       leader_epoch=3, state_epoch=1, dcc=10)
            assert pr.error_code == 0
        pr = read(boot, tid, leader_epoch=3)
        assert (pr.start_offset, batches(pr)) == (40, [(40, 49, 2, 1), (50, 54, 0, 1)])
        s = summary(boot, tid)
        assert (s.error_code, s.start_offset, s.state_epoch, s.leader_epoch, s.delivery_complete_count) == \
            (0, 40, 1, 3, 10)
        assert delete(boot, tid, 1) == [0]
        assert read(boot, tid, partition=1).error_code == E.INVALID_REQUEST
        assert summary(boot, tid, partition=1).start_offset == -1

        expected = [(40, 49, 2, 1), (50, 54, 0, 1)]
        for i, how in enumerate(("restart", "kill9")):
            if how == "restart":
                b.stop()
            else:
                b.kill9()
            b.start()
            wait_share_coordinator(boot, key)
            pr = wait_for(lambda: (lambda r: r if r.error_code != E.COORDINATOR_LOAD_IN_PROGRESS else None)(
                read(boot, tid, leader_epoch=3)), 30, 0.1, "the state loaded")
            assert (pr.error_code, pr.state_epoch, pr.start_offset, batches(pr)) == (0, 1, 40, expected)
            assert read(boot, tid, partition=1).error_code == E.INVALID_REQUEST   # the tombstone too
            assert write(boot, tid, [(55 + 2 * i, 55 + 2 * i, 4, 5)], start_offset=40, leader_epoch=3,
                         state_epoch=1).error_code == 0
            expected.append((55 + 2 * i, 55 + 2 * i, 4, 5))
        assert batches(read(boot, tid, leader_epoch=3)) == expected
    finally:
        b.kill9()


# ----------------------------------------------------------------------------------------------
# the persister inside a broker (local coordinator), pruning
# ----------------------------------------------------------------------------------------------

class InProcessBroker:
    """A kcompat broker on an event loop thread of this process, to call its SharePersister."""

    def __init__(self, data_dir, overrides: dict[str, str], port: int) -> None:
        self.props = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(data_dir), "http.listeners": "",
                      **overrides}
        self.port = port
        self.broker = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> "InProcessBroker":
        from kcompat.broker.broker import Broker
        from kcompat.config import BrokerConfig

        config = BrokerConfig.load(None, [f"{k}={v}" for k, v in self.props.items()])
        started = threading.Event()

        def run():
            loop = asyncio.new_event_loop()
            self.loop = loop

            async def serve():
                self.broker = Broker(config)
                await self.broker.start()
                started.set()
                await self.broker.stopped.wait()

            loop.run_until_complete(serve())
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert started.wait(120), "the in-process broker did not start"
        return self

    def call(self, coro, timeout: float = 60.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        if self.broker is not None and self.thread.is_alive():
            self.call(self.broker.stop())
            self.thread.join(30)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


def test_persister_on_the_coordinator_broker_and_pruning(tmp_path):
    from kcompat.testing.ports import free_ports

    overrides = {**FAST_STATE, "share.coordinator.snapshot.update.records.per.snapshot": "1",
                 "share.coordinator.state.topic.prune.interval.ms": "200",
                 "share.coordinator.state.topic.segment.bytes": "1048576"}
    port = free_ports(1)[0]
    node = InProcessBroker(tmp_path / "data", overrides, port).start()
    try:
        admin.create_topic(node.bootstrap, "t", 3, 1)
        tid = topic_id(node.bootstrap, "t")
        p: SharePersister = node.broker.share_persister
        assert node.call(p.initialize_state(G, tid, 0, 2, -1)) == E.NONE    # creates __share_group_state
        assert node.call(p.initialize_state(G, tid, 1, 2, 100)) == E.NONE
        assert node.call(p.read_state(G, tid, 0, 4))[:4] == (E.NONE, 2, -1, [])
        for i in range(60):
            code = node.call(p.write_state(G, tid, 0, 2, 4, i * 10, [B(i * 10, i * 10 + 9, 2, 1)],
                                           delivery_complete_count=10))
            assert code == E.NONE
        r = node.call(p.read_state(G, tid, 0, 4))
        assert (r.error, r.state_epoch, r.start_offset, r.batches) == (E.NONE, 2, 590, [B(590, 599, 2, 1)])
        s = node.call(p.read_summary(G, tid, 0))
        assert s[:5] == (E.NONE, 2, 590, 4, 10)
        assert node.call(p.write_state(G, tid, 0, 2, 3, 600, [])) == E.FENCED_LEADER_EPOCH
        assert node.call(p.write_state(G, tid, 0, 1, 4, 600, [])) == E.FENCED_STATE_EPOCH
        assert node.call(p.write_state(G, tid, 2, 2, 4, 600, [])) == E.INVALID_REQUEST   # not initialized
        assert node.call(p.read_state(G, uuid.UUID(int=9), 0, 0)).error == E.INVALID_REQUEST  # checked first
        assert node.call(p.initialize_state(G, uuid.UUID(int=9), 0, 0, 0)) == E.UNKNOWN_TOPIC_OR_PARTITION
        assert node.call(p.delete_state(G, tid, [1, 2])) == {1: E.NONE, 2: E.NONE}
        assert node.call(p.read_summary(G, tid, 1))[:3] == (E.NONE, 0, -1)

        # pruning: the keys' latest snapshots are recent, everything before the oldest is deleted
        runtime = node.broker.share_state
        state_partition = runtime.coordinator.partition_for(ShareKey(G, tid, 0))
        redundant = runtime.coordinator.last_redundant_offset(state_partition)
        assert redundant > 40   # a snapshot every other write (one update per snapshot): the rest is redundant
        wait_for(lambda: earliest_offset(node.bootstrap, state_partition) == redundant, 20, 0.1, "pruned records")
    finally:
        node.stop()
    node = InProcessBroker(tmp_path / "data", overrides, port).start()   # reloaded from what pruning left
    try:
        p = node.broker.share_persister
        r = wait_for(lambda: (lambda r: r if r.error != E.COORDINATOR_LOAD_IN_PROGRESS else None)(
            node.call(p.read_state(G, tid, 0, 4))), 30, 0.1, "the state")
        assert (r.error, r.state_epoch, r.start_offset, r.batches) == (E.NONE, 2, 590, [B(590, 599, 2, 1)])
        assert node.call(p.read_state(G, tid, 1, 0)).error == E.INVALID_REQUEST
    finally:
        node.stop()


# ----------------------------------------------------------------------------------------------
# three nodes: the coordinator killed, the persister finds the next one
# ----------------------------------------------------------------------------------------------

class _WireCoordinators:
    """The share coordinators as a persister in the test process sees them: it is no node (every
    coordinator is remote) and finds coordinators with FindCoordinator through ``via`` nodes, as
    Kafka's PersisterStateManager does."""

    def __init__(self, cluster: Cluster, via: list[int]) -> None:
        self.cluster = cluster
        self.via = via

    def coordinator_node(self, key: ShareKey) -> int | None:
        for node_id in self.via:
            if self.cluster.node(node_id).proc is None:
                continue
            try:
                code, node = find_share_coordinator(f"127.0.0.1:{self.cluster.client_ports[node_id - 1]}",
                                                    coordinator_key(*key))
            except OSError:
                continue
            if code == 0:
                return node
        return None


class WirePersister(SharePersister):
    """A SharePersister in the test process (node id -100, no metadata image), reaching the
    cluster's nodes at their client ports."""

    def __init__(self, cluster: Cluster, via: list[int]) -> None:
        context = BrokerContext(node_id=-100, config={"request.timeout.ms": 60_000}, image=None,
                                now_ms=lambda: int(time.time() * 1000), is_shutting_down=lambda: False)
        super().__init__(context, _WireCoordinators(cluster, via))
        self.cluster = cluster

    def _node_clients(self) -> NodeClients:
        if self._clients is None:
            ports = self.cluster.client_ports
            self._clients = NodeClients(lambda n: ("127.0.0.1", ports[n - 1]), "test-share-persister")
        return self._clients


def test_state_survives_a_kill9_of_its_coordinator_in_a_three_node_cluster(tmp_path):
    overrides = {"share.coordinator.state.topic.num.partitions": "3",
                 "share.coordinator.state.topic.replication.factor": "3",
                 "offsets.topic.replication.factor": "3", "min.insync.replicas": "2"}
    with Cluster(tmp_path, 3, overrides=overrides) as c:
        admin.create_topic(c.bootstrap, "t", 1, 3)
        boot1 = f"127.0.0.1:{c.client_ports[0]}"
        tid = topic_id(boot1, "t")
        key = ShareKey(G, tid, 0)
        coordinator = wait_share_coordinator(boot1, coordinator_key(*key))
        other = next(n for n in (1, 2, 3) if n != coordinator)
        other_boot = f"127.0.0.1:{c.client_ports[other - 1]}"
        # a broker that is not the key's coordinator refuses the key, as Kafka's
        assert init(other_boot, tid, state_epoch=1).error_code == E.NOT_COORDINATOR

        persister = WirePersister(c, via=[other])

        async def scenario_before():
            assert await persister.initialize_state(G, tid, 0, 1, 0) == E.NONE
            r = await persister.read_state(G, tid, 0, 1)
            assert r[:4] == (E.NONE, 1, 0, [])
            for i in range(20):
                assert await persister.write_state(G, tid, 0, 1, 1, i * 5, [B(i * 5, i * 5 + 4, 2, 2),
                                                                            B(i * 5 + 5, i * 5 + 9, 0, 1)], 5) == E.NONE
            try:
                return await persister.read_state(G, tid, 0, 1)
            finally:
                persister.close()

        before = asyncio.run(scenario_before())
        assert before.batches == [B(95, 99, 2, 2), B(100, 104, 0, 1)]

        c.kill9(coordinator)
        t0 = time.monotonic()

        async def scenario_after():
            r = await persister.read_state(G, tid, 0, 1)    # retried until the new coordinator answers
            w = await persister.write_state(G, tid, 0, 1, 1, 105, [B(105, 109, 4, 5)], 10)
            try:
                return r, w, await persister.read_summary(G, tid, 0), await persister.read_state(G, tid, 0, 1)
            finally:
                persister.close()

        persister = WirePersister(c, via=[other])
        after, written, summ, final = asyncio.run(scenario_after())
        assert (after.error, after.state_epoch, after.start_offset, after.batches) == \
            (E.NONE, before.state_epoch, before.start_offset, before.batches)
        assert written == E.NONE and summ[:5] == (E.NONE, 1, 105, 1, 10)
        assert final.batches == [B(105, 109, 4, 5)]
        new_coordinator = wait_share_coordinator(other_boot, coordinator_key(*key))
        assert new_coordinator != coordinator
        assert time.monotonic() - t0 < 60
        # the killed node comes back (as a follower or, after a preferred election, the leader
        # again): the state is the same, loaded from the replicated log
        c.restart(coordinator)
        persister = WirePersister(c, via=[1, 2, 3])

        async def read_back():
            try:
                return await persister.read_state(G, tid, 0, 1)
            finally:
                persister.close()

        back = asyncio.run(read_back())
        assert (back.error, back.start_offset, back.batches) == (E.NONE, 105, [B(105, 109, 4, 5)])
