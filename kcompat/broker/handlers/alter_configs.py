"""AlterConfigs (key 33), versions 0-2: replace a resource's whole set of dynamic configs.

The pre-KIP-339 API that confluent-kafka's ``AdminClient.alter_configs`` and older tools use:
configs not named in the request are removed (Kafka's semantics, which is why
IncrementalAlterConfigs exists). TOPIC, BROKER, GROUP and CLIENT_METRICS (KIP-714) resources, as
IncrementalAlterConfigs, with its authorization (ALTER_CONFIGS); Kafka 4.3.1's legacy path takes
client metrics too (``ConfigAdminManager.preprocess``). A change of this broker's
``cordoned.log.dirs`` (KIP-1066) is checked against its log dirs before it is forwarded
(``config_changes.refused_before_forwarding``).
"""

from __future__ import annotations

from kcompat.broker.config_changes import alter_each, refused_before_forwarding, replace_configs
from kcompat.broker.authz import Op, answer_denied, config_resource_check
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.alter_configs import AlterConfigsResponse as R

API_KEY = 33
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, req):
    denied = config_resource_check(ctx, Op.ALTER_CONFIGS, req.resources)
    return answer_denied(ctx, req, "resources", denied, error_response, "responses", lambda: _permitted(ctx, req))


def _permitted(ctx, req):
    refused = refused_before_forwarding(ctx, req.resources, lambda res: {c.name: c.value for c in res.configs})
    return answer_denied(ctx, req, "resources", refused, error_response, "responses", lambda:
                         ctx.services.controller_service.handle(ctx, req, lambda: _local(ctx, req), error_response))


def _local(ctx, req):
    def change(res) -> None:
        new = {c.name: c.value for c in res.configs}
        if any(v is None for v in new.values()):
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Null value not supported for AlterConfigs")
        replace_configs(ctx.services, res.resource_type, res.resource_name, new, validate_only=req.validate_only)

    return R(throttle_time_ms=0, responses=[
        R.AlterConfigsResourceResponse(error_code=code, error_message=message, resource_type=res.resource_type,
                                       resource_name=res.resource_name)
        for res, code, message in alter_each(req.resources, change)])


def error_response(req, version, code):
    return R(responses=[R.AlterConfigsResourceResponse(error_code=code, resource_type=res.resource_type,
                                                       resource_name=res.resource_name) for res in req.resources])
