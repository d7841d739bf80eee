"""AllocateProducerIds (key 67), version 0: a broker gets the next block of producer ids from the
active controller (KIP-730); a ProducerIdsRecord makes the block durable so no id is handed out
twice. STALE_BROKER_EPOCH / BROKER_ID_NOT_REGISTERED for a broker that is not registered with
that epoch.
"""

from __future__ import annotations

from kcompat.broker.api_services import ApiServices
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.allocate_producer_ids import AllocateProducerIdsResponse as R

API_KEY = 67
MIN_VERSION = 0
MAX_VERSION = 0


def local(services: ApiServices, req) -> R:
    """Allocate on this node, the active controller (inside ControllerService.run)."""
    b = services.image.brokers.get(req.broker_id)
    if b is None:
        return error_response(req, 0, ErrorCode.BROKER_ID_NOT_REGISTERED)
    if b.epoch != req.broker_epoch:
        return error_response(req, 0, ErrorCode.STALE_BROKER_EPOCH)
    start, length = services.controller.allocate_producer_ids(req.broker_id, services.now_ms(), req.broker_epoch)
    return R(error_code=0, producer_id_start=start, producer_id_len=length)


def handle(ctx, req):
    return ctx.services.controller_service.handle(ctx, req, lambda: local(ctx.services, req), error_response)


def error_response(req, version, code):
    return R(error_code=code, producer_id_start=-1, producer_id_len=0)
