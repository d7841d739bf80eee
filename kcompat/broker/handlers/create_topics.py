"""CreateTopics (key 19), versions 2-7.

Per topic, as Kafka's ``ReplicationControlManager.createTopics``: name validation
(INVALID_TOPIC_EXCEPTION), TOPIC_ALREADY_EXISTS, partition count and replication factor (-1 means
``num.partitions`` / ``default.replication.factor``), manual assignments, topic configs validated
(INVALID_CONFIG), ``validate_only``. From v5 the result carries the partition count, replication
factor and every config with its value and source (KIP-525); from v7 the topic id. With an
authorizer a topic needs CREATE on the cluster or on the topic (TOPIC_AUTHORIZATION_FAILED), and its
configs come back only with DESCRIBE_CONFIGS on it (else ``topic_config_error_code``).
"""

from __future__ import annotations

from kcompat.broker.authz import TOPIC, Op, answer_denied, then
from kcompat.broker.quota.throttle import mutation_denied
from kcompat.kraft.controller import NewTopic
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.create_topics import CreateTopicsResponse as R
from kcompat.protocol.primitives import ZERO_UUID

API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7
STRICT_QUOTA_SINCE = 6   # controller_mutation_rate refuses topics from v6 (KIP-599), throttles before


def handle(ctx, req):
    cluster_create = ctx.authorize_cluster(Op.CREATE)
    denied = [(t, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")   # ControllerApis' text
              for t in req.topics if not cluster_create and not ctx.authorize(Op.CREATE, TOPIC, t.name)]
    throttled, finish = mutation_denied(ctx, req.topics, lambda t: _partitions(ctx, t), STRICT_QUOTA_SINCE, denied)
    return then(answer_denied(ctx, req, "topics", denied + throttled, error_response, "topics",
                              lambda: ctx.services.controller_service.handle(ctx, req, lambda: _local(ctx, req),
                                                                           error_response)),
                lambda resp: finish(_configs_described(ctx, resp)))


def _partitions(ctx, t) -> int:
    """Partitions a new topic will have (what controller_mutation_rate counts)."""
    if t.assignments:
        return len(t.assignments)
    return ctx.services.config.get("num.partitions") if t.num_partitions == -1 else max(t.num_partitions, 0)


def _configs_described(ctx, resp):
    """v5+: a created topic's configs, partition count and replication factor only with
    DESCRIBE_CONFIGS on it, else ``topic_config_error_code`` TOPIC_AUTHORIZATION_FAILED
    (Kafka's ReplicationControlManager ``authorizedToReturnConfigs``)."""
    if ctx.api_version >= 5:
        for t in resp.topics:
            if t.error_code == ErrorCode.NONE and not ctx.authorize(Op.DESCRIBE_CONFIGS, TOPIC, t.name):
                t.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                t.configs, t.num_partitions, t.replication_factor = [], -1, -1
    return resp


def _local(ctx, req):
    services = ctx.services
    version = ctx.api_version
    new_topics = [NewTopic(name=t.name, num_partitions=t.num_partitions, replication_factor=t.replication_factor,
                           assignments={a.partition_index: list(a.broker_ids) for a in t.assignments},
                           configs={c.name: c.value for c in t.configs})
                  for t in req.topics]
    results = services.controller.create_topics(new_topics, validate_only=req.validate_only, now_ms=services.now_ms())
    out = []
    for res in results:
        r = R.CreatableTopicResult(name=res.name, topic_id=ZERO_UUID, error_code=res.error,
                                   error_message=res.message, num_partitions=-1, replication_factor=-1,
                                   configs=[])
        if res.error == ErrorCode.NONE:
            if not req.validate_only and res.topic_id is not None:
                r.topic_id = res.topic_id
            r.num_partitions = res.num_partitions
            r.replication_factor = res.replication_factor
            if version >= 5:
                r.configs = [R.CreatableTopicConfigs(name=e.name, value=e.value, read_only=e.read_only,
                                                     config_source=e.source, is_sensitive=e.is_sensitive)
                             for e in services.describe_topic_configs(res.configs)]
        out.append(r)
    return R(throttle_time_ms=0, topics=out)


def error_response(req, version, code):
    return R(topics=[R.CreatableTopicResult(name=t.name, error_code=code, num_partitions=-1,
                                            replication_factor=-1, configs=[]) for t in req.topics])
