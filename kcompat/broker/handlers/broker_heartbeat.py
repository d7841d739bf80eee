"""BrokerHeartbeat (key 63), versions 0-2: a registered broker keeps its session, reports its
metadata offset, its failed log dirs (v1, KIP-858) and its cordoned log dirs (v2, KIP-1066; null
until it has caught up), and asks to be unfenced, fenced or shut down (KIP-631). Answered by the active
controller; see :meth:`kcompat.kraft.cluster_control.ClusterControl.heartbeat`.
"""

from __future__ import annotations

from kcompat.broker.api_services import ApiServices
from kcompat.protocol.errors import KafkaError
from kcompat.protocol.messages.broker_heartbeat import BrokerHeartbeatResponse as R

API_KEY = 63
MIN_VERSION = 0
MAX_VERSION = 2


def local(services: ApiServices, req) -> R:
    """Handle on this node, the active controller (inside ControllerService.run)."""
    try:
        res = services.cluster_control.heartbeat(req.broker_id, req.broker_epoch, req.current_metadata_offset,
                                               req.want_fence, req.want_shut_down, services.now_ms(),
                                               offline_dirs=req.offline_log_dirs or (),
                                               cordoned_dirs=req.cordoned_log_dirs)
    except KafkaError as e:
        return error_response(req, 0, e.code)
    return R(error_code=0, is_caught_up=res.is_caught_up, is_fenced=res.is_fenced,
             should_shut_down=res.should_shut_down)


def touch_session(services: ApiServices, req) -> None:
    """On the active controller, the heartbeat keeps the broker's session from the moment it
    arrives, before it waits its turn behind earlier controller operations and their commits
    (:meth:`~kcompat.kraft.cluster_control.ClusterControl.touch`): on a loaded controller those can
    take longer than a session, and brokers that heartbeat on time must not be fenced for it."""
    if services.controller_service.active:
        services.cluster_control.touch(req.broker_id, req.broker_epoch, services.now_ms())


def handle(ctx, req):
    touch_session(ctx.services, req)
    return ctx.services.controller_service.handle(ctx, req, lambda: local(ctx.services, req), error_response)


def error_response(req, version, code):
    return R(error_code=code, is_caught_up=False, is_fenced=True, should_shut_down=False)
