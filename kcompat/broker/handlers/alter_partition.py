"""AlterPartition (key 56), versions 0-3: a partition leader asks the active controller to
shrink or expand the ISR (KIP-497; topic ids from v2, KIP-841 broker epochs per new ISR member
from v3). Served on the controller listener; see :mod:`kcompat.kraft.partition_control`.
"""

from __future__ import annotations

from kcompat.broker.api_services import ApiServices
from kcompat.kraft.partition_control import IsrChange, alter_partition
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.alter_partition import AlterPartitionResponse as R

API_KEY = 56
MIN_VERSION = 0
MAX_VERSION = 3


def local(services: ApiServices, version: int, req) -> R:
    """Run on the active controller (inside ControllerService.run), for a request of ``version``:
    from a broker, or from this node's own :class:`kcompat.broker.isr_updates.IsrUpdates`."""
    image = services.image
    out = []
    for t in req.topics:
        topic_id = t.topic_id if version >= 2 else getattr(image.topics.get(t.topic_name), "topic_id", None)
        changes = [IsrChange(topic_id, p.partition_index, p.leader_epoch,
                             [m.broker_id for m in p.new_isr_with_epochs] if version >= 3 else list(p.new_isr),
                             p.partition_epoch,
                             {m.broker_id: m.broker_epoch for m in p.new_isr_with_epochs} if version >= 3 else None)
                   for p in t.partitions]
        results = alter_partition(image, services.controller_service.sink, req.broker_id, req.broker_epoch, changes,
                                  services.now_ms(), version)
        if topic_id is None:
            results = [r.__class__(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for r in results]
        out.append(R.TopicData(topic_name=t.topic_name, topic_id=t.topic_id, partitions=[
            R.PartitionData(partition_index=p.partition_index, error_code=r.error, leader_id=r.leader,
                            leader_epoch=r.leader_epoch, isr=r.isr or [], leader_recovery_state=0,
                            partition_epoch=r.partition_epoch)
            for p, r in zip(t.partitions, results)]))
    return R(throttle_time_ms=0, error_code=0, topics=out)


def handle(ctx, req):
    return ctx.services.controller_service.handle(ctx, req, lambda: local(ctx.services, ctx.api_version, req), error_response)


def error_response(req, version, code):
    return R(error_code=code, topics=[])
