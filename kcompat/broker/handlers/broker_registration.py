"""BrokerRegistration (key 62), versions 0-4: a broker joins the cluster and gets its broker
epoch (KIP-631). Answered by the active controller (forwarded there from any other node);
errors as :meth:`kcompat.kraft.cluster_control.ClusterControl.register`.
"""

from __future__ import annotations

from kcompat.broker.api_services import ApiServices
from kcompat.kraft.cluster_control import Listener
from kcompat.protocol.errors import KafkaError
from kcompat.protocol.messages.broker_registration import BrokerRegistrationResponse as R

API_KEY = 62
MIN_VERSION = 0
MAX_VERSION = 4


def local(services: ApiServices, req) -> R:
    """Register on this node, the active controller (inside ControllerService.run)."""
    try:
        epoch = services.cluster_control.register(
            req.broker_id, req.cluster_id, req.incarnation_id,
            [Listener(lst.name, lst.host, lst.port, lst.security_protocol) for lst in req.listeners],
            req.rack, req.previous_broker_epoch, services.now_ms(), log_dirs=req.log_dirs or [],
            features={f.name: (f.min_supported_version, f.max_supported_version) for f in req.features})
    except KafkaError as e:
        return R(error_code=e.code, broker_epoch=-1)
    return R(error_code=0, broker_epoch=epoch)


def handle(ctx, req):
    return ctx.services.controller_service.handle(ctx, req, lambda: local(ctx.services, req), error_response)


def error_response(req, version, code):
    return R(error_code=code, broker_epoch=-1)
