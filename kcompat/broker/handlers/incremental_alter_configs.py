"""IncrementalAlterConfigs (key 44), versions 0-1: SET / DELETE / APPEND / SUBTRACT (KIP-339).

TOPIC resources change the topic's overrides (ConfigRecords in the metadata log; the new values
reach the partition logs at once). BROKER resources change dynamic broker configs for this broker
(``"<id>"``) or cluster-wide (``""``); read-only keys are refused with Kafka's message
(``Cannot update these configs dynamically: Set(...)``); a change of this broker's
``cordoned.log.dirs`` (KIP-1066) is checked here against its log dirs before it is forwarded
(``config_changes.refused_before_forwarding``, as AlterConfigs). BROKER_LOGGER sets logger levels
of this process. GROUP resources (32) change a group's dynamic configs (Kafka 4.3's GroupConfig:
``share.auto.offset.reset``, ``share.record.lock.duration.ms``, ...; the group need not exist);
APPEND/SUBTRACT on them fail as no group config is a LIST. CLIENT_METRICS resources (16, KIP-714)
change a client metrics subscription (``metrics``, ``interval.ms``, ``match``; validated as Kafka's
ClientMetricsConfigs, APPEND/SUBTRACT refused as Kafka 4.3.1's controller does). Errors: INVALID_CONFIG,
INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION; with an authorizer ALTER_CONFIGS on the topic, group or
cluster (TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging

from kcompat.broker.api_services import ApiServices
from kcompat.broker.authz import Op, answer_denied, config_resource_check
from kcompat.broker.config_changes import (BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP, TOPIC, alter_each,
                                           current_configs, refused_before_forwarding, replace_configs)
from kcompat.config import apply_incremental
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsResponse as R

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1

_LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
           "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10}


def handle(ctx, req):
    denied = config_resource_check(ctx, Op.ALTER_CONFIGS, req.resources)
    return answer_denied(ctx, req, "resources", denied, error_response, "responses", lambda: _permitted(ctx, req))


def _permitted(ctx, req):
    if all(res.resource_type == BROKER_LOGGER for res in req.resources):
        return _local(ctx, req)  # logger levels belong to this process
    return answer_denied(ctx, req, "resources", _refused_here(ctx, req), error_response, "responses", lambda:
                         ctx.services.controller_service.handle(ctx, req, lambda: _local(ctx, req), error_response))


def _refused_here(ctx, req) -> list:
    services = ctx.services
    return refused_before_forwarding(ctx, req.resources, lambda res: apply_incremental(
        current_configs(services, BROKER, res.resource_name),
        [(c.name, c.config_operation, c.value) for c in res.configs], resource="broker"))


def _local(ctx, req):
    def change(res) -> None:
        ops = [(c.name, c.config_operation, c.value) for c in res.configs]
        _alter(ctx.services, res, ops, req.validate_only)

    return R(throttle_time_ms=0, responses=[
        R.AlterConfigsResourceResponse(error_code=code, error_message=message, resource_type=res.resource_type,
                                       resource_name=res.resource_name)
        for res, code, message in alter_each(req.resources, change)])


def _alter(services: ApiServices, res, ops, validate_only: bool) -> None:
    if res.resource_type == BROKER_LOGGER:
        _set_log_levels(ops, validate_only)
        return
    current = current_configs(services, res.resource_type, res.resource_name)
    kind = {TOPIC: "topic", GROUP: "group", CLIENT_METRICS: "client_metrics"}.get(res.resource_type, "broker")
    new = apply_incremental(current, ops, resource=kind, remote_storage_system_enabled=services.config.get(
        "remote.log.storage.system.enable"))
    replace_configs(services, res.resource_type, res.resource_name, new, validate_only=validate_only)


def _set_log_levels(ops, validate_only: bool) -> None:
    for logger_name, op, value in ops:
        level = _LEVELS.get((value or "").upper()) if op == 0 else logging.NOTSET
        if op not in (0, 1) or (op == 0 and level is None):
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Cannot set the log level of {logger_name} to {value}")
        if not validate_only:
            target = logging.getLogger() if logger_name == "root" else logging.getLogger(logger_name)
            target.setLevel(level)


def error_response(req, version, code):
    return R(responses=[R.AlterConfigsResourceResponse(error_code=code, resource_type=res.resource_type,
                                                       resource_name=res.resource_name) for res in req.resources])
