"""The bootstrap records of a new cluster (metadata.version) when the first active controller
loses the quorum before they commit (found by bench/nemesis.py under load: node 1 won epoch 1,
resigned it 3 s later without a fetch from a majority, and its start-up died of the
NOT_CONTROLLER raised by the commit). Kafka's QuorumController writes them on activation; a
controller that renounces first leaves them to the next active one. Here: the start-up step
survives the lost leadership, and the controller's periodic duties write them once a node is
active again."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from kcompat.broker.broker import Broker
from kcompat.protocol.errors import ErrorCode, KafkaError


class Service:
    """ControllerService.run: NOT_CONTROLLER while ``lose`` > 0, else runs the operation."""

    def __init__(self, lose: int) -> None:
        self.lose, self.runs = lose, 0

    async def run(self, op):
        self.runs += 1
        if self.lose > 0:
            self.lose -= 1
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "Lost leadership before the commit")
        return op()


def node(lose: int, active: bool = True):
    features: dict = {}
    n = SimpleNamespace(controller_active=active, image=SimpleNamespace(features=features),
                        controller_service=Service(lose), now_ms=lambda: 0,
                        controller=SimpleNamespace(bootstrap=lambda now: features.setdefault("metadata.version", 21)))
    return n


def write(n) -> None:
    asyncio.run(Broker._write_bootstrap_records(n))


def test_a_lost_leadership_before_the_bootstrap_commit_is_not_fatal_and_the_next_try_writes_them():
    n = node(lose=1)
    write(n)                                   # start-up: the commit fails with NOT_CONTROLLER
    assert "metadata.version" not in n.image.features
    write(n)                                   # periodic duty, active again
    assert n.image.features["metadata.version"] == 21 and n.controller_service.runs == 2
    write(n)                                   # written: nothing more to do
    assert n.controller_service.runs == 2


def test_only_the_active_controller_writes_them_and_other_errors_still_raise():
    n = node(lose=0, active=False)
    write(n)
    assert n.controller_service.runs == 0 and not n.image.features

    class Broken(Service):
        async def run(self, op):
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "disk")
    n = node(lose=0)
    n.controller_service = Broken(0)
    with pytest.raises(KafkaError):
        write(n)
