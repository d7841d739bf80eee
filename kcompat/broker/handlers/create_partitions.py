"""CreatePartitions (key 37), versions 0-3: add partitions to existing topics.

INVALID_PARTITIONS when the count does not grow, UNKNOWN_TOPIC_OR_PARTITION for unknown topics,
INVALID_REPLICA_ASSIGNMENT for bad manual assignments, INVALID_REQUEST for a topic named twice
(Kafka's ``ReplicationControlManager.createPartitions``). With an authorizer ALTER on the topic
(TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from collections import Counter

from kcompat.broker.authz import TOPIC, Op, answer_denied, then
from kcompat.broker.quota.throttle import mutation_denied
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.create_partitions import CreatePartitionsResponse as R

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3
STRICT_QUOTA_SINCE = 3   # controller_mutation_rate refuses topics from v3 (KIP-599), throttles before


def handle(ctx, req):
    denied = [(t, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for t in req.topics
              if not ctx.authorize(Op.ALTER, TOPIC, t.name)]
    denied = [(t, code, None) for t, code in denied]   # Kafka's refusal here carries no message
    throttled, finish = mutation_denied(ctx, req.topics, lambda t: _added(ctx, t), STRICT_QUOTA_SINCE, denied)
    return then(answer_denied(ctx, req, "topics", denied + throttled, error_response, "results",
                              lambda: ctx.services.controller_service.handle(ctx, req, lambda: _local(ctx, req),
                                                                           error_response)), finish)


def _added(ctx, t) -> int:
    """Partitions the request adds to the topic (what controller_mutation_rate counts)."""
    topic = ctx.services.image.topics.get(t.name)
    return max(0, t.count - len(topic.partitions)) if topic is not None else 0


def _local(ctx, req):
    services = ctx.services
    counts = Counter(t.name for t in req.topics)
    results = []
    for t in req.topics:
        code, message = ErrorCode.NONE, None
        if counts[t.name] > 1:
            code, message = ErrorCode.INVALID_REQUEST, "Duplicate topic in request."
        else:
            assignments = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
            try:
                services.controller.create_partitions(t.name, t.count, assignments, validate_only=req.validate_only,
                                                    now_ms=services.now_ms())
            except KafkaError as e:
                code, message = e.code, e.message
        results.append(R.CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message))
    return R(throttle_time_ms=0, results=results)


def error_response(req, version, code):
    return R(results=[R.CreatePartitionsTopicResult(name=t.name, error_code=code) for t in req.topics])
