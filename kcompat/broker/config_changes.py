"""Changing topic, broker and group configs: the step shared by AlterConfigs and
IncrementalAlterConfigs.

Both APIs end in "the resource's dynamic configs become exactly this set": for a TOPIC, its
overrides (validated, INVALID_CONFIG on bad names/values); for a BROKER, the dynamic configs of
this broker (``"<id>"``) or of the cluster default (``""``), refusing read-only keys with Kafka's
message; for a GROUP (32, KIP-848/KIP-932), the group's configs, validated as a whole against
this (controller) node's broker bounds (``kcompat.config.group.validate_group_configs``); for a
CLIENT_METRICS resource (16, KIP-714), the subscription's configs, validated as a whole with
``kcompat.config.client_metrics.validate_client_metrics_configs`` and stored as sent. Raises
KafkaError or kcompat.config.ConfigError.
"""

from __future__ import annotations

from typing import Callable

from kcompat.broker.api_services import ApiServices
from kcompat.config import ConfigError
from kcompat.config.client_metrics import validate_client_metrics_configs
from kcompat.config.cordoned import CORDONED_LOG_DIRS, check_cordoned_update
from kcompat.config.group import validate_group_configs
from kcompat.protocol.errors import ErrorCode, KafkaError

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32


def current_configs(services: ApiServices, resource_type: int, resource_name: str) -> dict[str, str]:
    """The dynamic configs a resource has now. Raises KafkaError for unknown resources."""
    if resource_type == TOPIC:
        if resource_name not in services.image.topics:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {resource_name} does not exist.")
        return services.image.topic_configs(resource_name)
    if resource_type == BROKER:
        if resource_name not in ("", str(services.node_id)) and \
                not (resource_name.isdigit() and int(resource_name) in services.image.brokers):
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Unexpected broker id, expected {services.node_id} or empty string, "
                             f"but received {resource_name}")
        return services.image.broker_configs(resource_name)
    if resource_type == GROUP:
        if not resource_name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
        return services.image.group_config(resource_name)
    if resource_type == CLIENT_METRICS:
        return services.image.resource_configs(CLIENT_METRICS, resource_name)
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")


def replace_configs(services: ApiServices, resource_type: int, resource_name: str, new: dict[str, str], *,
                    validate_only: bool) -> None:
    """Make ``new`` the resource's complete set of dynamic configs (committed as ConfigRecords)."""
    current = current_configs(services, resource_type, resource_name)
    now = services.now_ms()
    if resource_type == TOPIC:
        services.controller.alter_topic_configs(resource_name, new, validate_only=validate_only, now_ms=now)
        return
    if resource_type == GROUP:
        normalized = validate_group_configs(new, services.config)
        services.controller.alter_group_configs(resource_name, normalized, validate_only=validate_only, now_ms=now)
        return
    if resource_type == CLIENT_METRICS:
        validate_client_metrics_configs(resource_name, new)
        services.controller.alter_client_metrics_configs(resource_name, new, validate_only=validate_only, now_ms=now)
        return
    updates = {k: v for k, v in new.items() if current.get(k) != v}
    updates.update({k: None for k in current if k not in new})
    try:
        services.config.validate_dynamic_update(updates, per_broker=resource_name != "")
    except ConfigError as e:
        # ConfigAdminManager.validateBrokerConfigChange: what the validation throws (ConfigException)
        # reaches the client as InvalidRequestException, with its message
        raise ConfigError(e.key, e.message, error="INVALID_REQUEST") from e
    services.controller.alter_broker_configs(resource_name, new, validate_only=validate_only, now_ms=now)


def refused_before_forwarding(ctx, resources, new_configs: Callable[[object], dict[str, str | None]]) -> list[tuple]:
    """``(resource, error code, message)`` for the BROKER resources of an (Incremental)AlterConfigs
    request that this broker refuses before it forwards the request to the controller (Kafka's
    ``ConfigAdminManager.preprocess``): a broker takes changes for the cluster default (``""``)
    and for its own id only (INVALID_REQUEST "Node id must be an integer, but it is: x" /
    "Unexpected broker id, expected 1, but received 2": Kafka's admin client sends a broker's
    resource to that broker), and a change of its own ``cordoned.log.dirs`` must name its log
    dirs (KIP-1066; checked here, where the paths are known). ``new_configs(resource)`` is the
    resource's configs after the change; a ConfigError it raises refuses the resource too, a
    KafkaError leaves it to the controller's answer. On a controller listener nothing is refused
    here: the controller takes any broker's resource, and brokers forward there."""
    services = ctx.services
    if ctx.on_controller_listener:
        return []
    refused = []
    for res in resources:
        if res.resource_type != BROKER or res.resource_name == "":
            continue
        if not res.resource_name.lstrip("-").isdigit():
            refused.append((res, ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {res.resource_name}"))
            continue
        if int(res.resource_name) != services.node_id:
            refused.append((res, ErrorCode.INVALID_REQUEST,
                            f"Unexpected broker id, expected {services.node_id}, but received {res.resource_name}"))
            continue
        if not any(c.name == CORDONED_LOG_DIRS for c in res.configs):
            continue
        try:
            check_cordoned_update(services.config, new_configs(res).get(CORDONED_LOG_DIRS))
        except ConfigError as e:
            refused.append((res, ErrorCode[e.error], e.message))
        except KafkaError:
            pass   # the controller answers it
    return refused


def alter_each(resources, change: Callable[[object], None]) -> list[tuple[object, ErrorCode, str | None]]:
    """Apply ``change(resource)`` to every resource of an (Incremental)AlterConfigs request,
    each on its own: a resource naming a config twice is INVALID_REQUEST; KafkaError and
    ConfigError become that resource's error code and message. Returns (resource, code, message)."""
    results = []
    for res in resources:
        code, message = ErrorCode.NONE, None
        try:
            names = [c.name for c in res.configs]
            if len(set(names)) != len(names):
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
            change(res)
        except KafkaError as e:
            code, message = e.code, e.message
        except ConfigError as e:
            code, message = ErrorCode[e.error], e.message
        results.append((res, code, message))
    return results
