"""ControllerService runs controller operations one at a time, each validated against an image that
has every earlier operation's records applied (Kafka's QuorumController event queue). A caller that
goes away (its client closed the connection, cancelling the request handler) must not let the next
operation start before its records are committed and applied: that once created
``__consumer_offsets`` twice, with two topic ids, and left the cluster unable to change its ISR."""

from __future__ import annotations

import asyncio

from kcompat.broker.broker_context import BrokerContext
from kcompat.broker.controller_service import ControllerService
from kcompat.config import log_config_for
from kcompat.config.broker import BrokerConfig
from kcompat.kraft.cluster_control import ClusterControl
from kcompat.kraft.controller import Controller, NewTopic
from kcompat.kraft.image import MetadataImage
from kcompat.kraft.metadata_log import decode_record
from kcompat.kraft.replica_placer import UsableBroker
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.metadata_records import TopicRecord


class ManualQuorum:
    """A quorum whose commits complete only when the test says so; completing applies the records
    to the image, as the metadata loader does."""

    voters: dict = {}
    leader_id = 1
    is_leader = True

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.pending: list[tuple[bytes, asyncio.Future]] = []
        self.committed: list = []
        self.offset = 0

    def commit(self, batch: bytes) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self.pending.append((batch, fut))
        return fut

    def complete_next(self) -> None:
        batch, fut = self.pending.pop(0)
        for rec in rb.iter_records(batch):
            record = decode_record(rec.value)
            self.image.apply(record, self.offset)
            self.committed.append(record)
            self.offset += 1
        fut.set_result(self.offset - 1)


class FakeBroker:
    """The parts of an active controller node the tests use, and the handlers' services for the
    heartbeat: the ControllerService over a manual quorum, the KRaft controller and cluster
    control, and a clock the test moves (``clock[0]``, ms)."""

    node_id = 1

    def __init__(self) -> None:
        self.config = BrokerConfig({})   # plaintext listeners: no TLS or SASL on forwarding connections
        self.image = MetadataImage()
        self.clock = [1_700_000_000_000]
        self.quorum = ManualQuorum(self.image)
        context = BrokerContext(node_id=1, config=self.config, image=self.image, now_ms=self.now_ms,
                                is_shutting_down=lambda: False)
        self.controller_service = ControllerService(
            context, is_active=lambda: True,
            topic_values=lambda topic: log_config_for(self.image.topic_configs(topic), self.config),
            wait_for_topics=self.wait_for_topics)
        self.controller = Controller(self.image, self.controller_service.sink, node_id=1,
                                     defaults=lambda: (1, 1), validate_topic_configs=dict,
                                     delete_topic_enable=lambda: True,
                                     usable_brokers=lambda: [UsableBroker(1, None, False)])
        self.cluster_control = ClusterControl(self.image, self.controller_service.sink, cluster_id="c",
                                              session_timeout_ms=lambda: 3000)
        self.controller_service.attach(controller=self.controller, cluster_control=self.cluster_control,
                                       quorum=self.quorum)

    def now_ms(self) -> int:
        return self.clock[0]

    async def wait_for_topics(self, names: list[str]) -> None:
        """Topics reach the image through the manual quorum: the tests create them only here,
        on the active controller, which never waits for another's."""
        raise AssertionError("only a forwarded CreateTopics waits for the image")


async def _ticks(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_a_cancelled_caller_does_not_let_the_next_operation_see_an_image_without_its_records():
    async def scenario():
        broker = FakeBroker()
        svc = broker.controller_service

        def create():
            return broker.controller.create_topics([NewTopic("__consumer_offsets", 3, 1)], validate_only=False,
                                                   now_ms=broker.now_ms())
        first = asyncio.ensure_future(svc.run(create))
        await _ticks()
        assert len(broker.quorum.pending) == 1          # the first operation's records are in flight
        first.cancel()                                   # its client went away
        second = asyncio.ensure_future(svc.run(create))
        await _ticks()
        assert len(broker.quorum.pending) == 1, "the second operation ran before the first was applied"
        broker.quorum.complete_next()
        results = await asyncio.wait_for(second, 5)
        assert results[0].error == ErrorCode.TOPIC_ALREADY_EXISTS
        assert not broker.quorum.pending
        assert first.cancelled()
        topics = [r for r in broker.quorum.committed if isinstance(r, TopicRecord)]
        assert len(topics) == 1
        assert broker.image.topics["__consumer_offsets"].topic_id == topics[0].topic_id
    asyncio.run(scenario())


def test_a_heartbeat_keeps_the_session_while_it_waits_behind_a_commit():
    """Operations run one at a time, each until its records are committed; a broker's heartbeat
    that waits behind a slow commit still refreshes its session on arrival (Kafka's heartbeat
    manager touches it), so the broker is not fenced for the controller's slowness."""
    from types import SimpleNamespace

    from kcompat.broker.handlers import broker_heartbeat
    from kcompat.protocol.messages.broker_heartbeat import BrokerHeartbeatRequest
    from kcompat.protocol.metadata_records import RegisterBrokerRecord, UnfenceBrokerRecord

    async def scenario():
        broker = FakeBroker()
        clock = broker.clock
        broker.image.apply(RegisterBrokerRecord(broker_id=2, broker_epoch=7, fenced=True, end_points=[]), 7)
        broker.image.apply(UnfenceBrokerRecord(id=2, epoch=7), 8)
        broker.cluster_control.activate(clock[0])
        svc = broker.controller_service
        slow = asyncio.ensure_future(svc.run(lambda: broker.controller.create_topics(
            [NewTopic("t", 1, 1)], validate_only=False, now_ms=clock[0])))
        await _ticks()
        assert len(broker.quorum.pending) == 1               # the commit is slow
        clock[0] += 2500
        req = BrokerHeartbeatRequest(broker_id=2, broker_epoch=7, current_metadata_offset=8, want_fence=False,
                                     want_shut_down=False)
        heartbeat = asyncio.ensure_future(broker_heartbeat.handle(SimpleNamespace(services=broker, api_version=1), req))
        await _ticks()
        assert not heartbeat.done()                          # it waits its turn...
        assert broker.cluster_control.last_heartbeat[2] == clock[0]   # ...but its session runs from now
        clock[0] += 2000                                     # 4.5 s after activation, 2 s after the heartbeat
        fence = asyncio.ensure_future(svc.fence_stale_brokers())
        broker.quorum.complete_next()
        assert (await asyncio.wait_for(heartbeat, 5)).error_code == 0
        await asyncio.wait_for(fence, 5)
        assert not broker.image.brokers[2].fenced
        await slow
    asyncio.run(scenario())
