"""DescribeConfigs (key 32), versions 1-4: topic and broker configs with value, source, synonyms.

Every config Kafka has for the resource, with its effective value and source (KIP-226 sources:
topic override, dynamic broker, dynamic cluster default, static broker, default), synonyms when
asked (v1+), type and documentation (v3+, KIP-569). Kafka Connect and admin tools depend on the
full list (KAFKA-9216). BROKER resources accept ``""`` (cluster-wide dynamic defaults) or this
broker's id; BROKER_LOGGER lists this process's loggers and their levels. GROUP resources (32)
list Kafka 4.3's group configs with the group's overrides (source GROUP_CONFIG, 8) and the
broker-derived rest; any non-empty group id is accepted, existing or not (as Kafka). CLIENT_METRICS
resources (16, KIP-714) list ``interval.ms``, ``match`` and ``metrics`` of a client metrics
subscription (source CLIENT_METRICS_CONFIG, 7, where set; defaults for any other name). With an
authorizer DESCRIBE_CONFIGS on the topic, group or cluster (TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED).
A resource of any other type fails the whole request: every resource INVALID_REQUEST with Kafka's
default text (ConfigHelper's InvalidRequestException, answered by getErrorResponse).
"""

from __future__ import annotations

import logging

from kcompat.broker.api_services import ApiServices
from kcompat.broker.authz import Op, answer_denied, config_resource_check
from kcompat.broker.config_changes import BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP, TOPIC
from kcompat.config import ConfigError, describe_broker, describe_group
from kcompat.config.client_metrics import describe_client_metrics
from kcompat.log.checkpoint import java_int
from kcompat.protocol.topic_names import validate_topic_name
from kcompat.protocol.errors import ErrorCode, KafkaError, default_message
from kcompat.protocol.messages.describe_configs import DescribeConfigsResponse as R

API_KEY = 32
MIN_VERSION = 1
MAX_VERSION = 4

KNOWN_TYPES = frozenset({TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP})   # ConfigResource.Type
LOGGER_SOURCE = 6  # DYNAMIC_BROKER_LOGGER_CONFIG
STRING_TYPE = 2


def handle(ctx, req):
    if any(res.resource_type not in KNOWN_TYPES for res in req.resources):
        # ConfigHelper throws InvalidRequestException("Unexpected resource type ...") while it
        # authorizes; DescribeConfigsRequest.getErrorResponse answers every resource with it and
        # Errors.INVALID_REQUEST's own text
        invalid = ErrorCode.INVALID_REQUEST
        return R(throttle_time_ms=0, results=[_error(res, invalid, default_message(invalid)) for res in req.resources])
    denied = config_resource_check(ctx, Op.DESCRIBE_CONFIGS, req.resources)
    return answer_denied(ctx, req, "resources", denied, error_response, "results", lambda: _permitted(ctx, req))


def _permitted(ctx, req):
    services = ctx.services
    version = ctx.api_version
    results = []
    for res in req.resources:
        try:
            entries = _describe(services, res, req.include_synonyms, version >= 3 and req.include_documentation)
        except KafkaError as e:
            results.append(_error(res, e.code, e.message))
            continue
        except ConfigError as e:
            results.append(_error(res, ErrorCode[e.error], e.message))
            continue
        configs = []
        for e in entries:
            c = R.DescribeConfigsResourceResult(
                name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                is_sensitive=e.is_sensitive, config_type=e.config_type,
                documentation=e.documentation if version >= 3 and req.include_documentation else None)
            if req.include_synonyms:
                c.synonyms = [R.DescribeConfigsSynonym(name=s.name, value=s.value, source=s.source)
                              for s in e.synonyms]
            configs.append(c)
        results.append(R.DescribeConfigsResult(error_code=ErrorCode.NONE, error_message="",
                                               resource_type=res.resource_type, resource_name=res.resource_name,
                                               configs=configs))
    return R(throttle_time_ms=0, results=results)


def _describe(services: ApiServices, res, synonyms: bool, documentation: bool):
    keys = res.configuration_keys
    if res.resource_type == TOPIC:
        name = res.resource_name
        validate_topic_name(name)
        if name not in services.image.topics:   # Kafka's result has the default, empty, message
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "")
        return services.describe_topic_configs(services.image.topic_configs(name), keys=keys,
                                             include_synonyms=synonyms, include_documentation=documentation)
    if res.resource_type == BROKER:
        name = res.resource_name
        if name and _broker_id(name) != services.node_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Unexpected broker id, expected {services.node_id} or empty string, but received {name}")
        return describe_broker(services.config, "" if not name else str(services.node_id), include_synonyms=synonyms,
                               keys=keys, include_documentation=documentation)
    if res.resource_type == BROKER_LOGGER:
        name = res.resource_name
        if not name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
        if _broker_id(name) != services.node_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Unexpected broker id, expected {services.node_id} but received {name}")
        return _loggers(keys)
    if res.resource_type == GROUP:
        if not res.resource_name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
        return describe_group(services.image.group_config(res.resource_name), services.config, include_synonyms=synonyms,
                              keys=keys, include_documentation=documentation)
    # CLIENT_METRICS, the last of KNOWN_TYPES (handle() answered any other type for the whole request)
    if not res.resource_name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty")
    return describe_client_metrics(services.image.resource_configs(CLIENT_METRICS, res.resource_name),
                                   include_synonyms=synonyms, keys=keys, include_documentation=documentation)


def _broker_id(name: str) -> int:
    """A BROKER or BROKER_LOGGER resource name as the broker id it names (ConfigHelper's
    resourceNameToBrokerId: "01" is broker 1); INVALID_REQUEST if it is not an integer."""
    try:
        return java_int(name, 32)
    except ValueError:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None


class _LoggerEntry:
    __slots__ = ("name", "value", "source", "read_only", "is_sensitive", "config_type", "documentation", "synonyms")

    def __init__(self, name: str, level: str) -> None:
        self.name, self.value, self.source = name, level, LOGGER_SOURCE
        self.read_only, self.is_sensitive, self.config_type = False, False, STRING_TYPE
        self.documentation, self.synonyms = None, []


def _loggers(keys):
    names = ["root"] + sorted(n for n in logging.root.manager.loggerDict if n.startswith("kcompat"))
    out = []
    for n in names:
        if keys is not None and n not in keys:
            continue
        lg = logging.getLogger() if n == "root" else logging.getLogger(n)
        out.append(_LoggerEntry(n, logging.getLevelName(lg.getEffectiveLevel()).replace("WARNING", "WARN")))
    return out


def _error(res, code: ErrorCode, message: str | None):
    return R.DescribeConfigsResult(error_code=code, error_message=message, resource_type=res.resource_type,
                                   resource_name=res.resource_name, configs=[])


def error_response(req, version, code):
    return R(results=[_error(res, code, None) for res in req.resources])
