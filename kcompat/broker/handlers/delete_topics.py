"""DeleteTopics (key 20), versions 1-6: by name, and from v6 by topic id.

UNKNOWN_TOPIC_OR_PARTITION for unknown names, UNKNOWN_TOPIC_ID for unknown ids,
TOPIC_DELETION_DISABLED when ``delete.topic.enable`` is false (Kafka's errors). Partition logs are
renamed to ``-delete`` directories and removed after ``log.segment.delete.delay.ms``. With an
authorizer a topic needs DELETE on the cluster or on the topic (TOPIC_AUTHORIZATION_FAILED), as
Kafka's ``ControllerApis.deleteTopics`` decides.
"""

from __future__ import annotations

from kcompat.broker.authz import DEFAULT_MESSAGE, TOPIC, Op, answer_denied, then
from kcompat.broker.quota.throttle import mutation_denied
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.delete_topics import DeleteTopicsResponse as R
from kcompat.protocol.primitives import ZERO_UUID

API_KEY = 20
MIN_VERSION = 1
MAX_VERSION = 6
STRICT_QUOTA_SINCE = 5   # controller_mutation_rate refuses topics from v5 (KIP-599), throttles before


def handle(ctx, req):
    image = ctx.services.image

    def name_of(item) -> str | None:
        if isinstance(item, str):
            return item
        if item.name is not None:
            return item.name
        t = image.topics_by_id.get(item.topic_id)
        return t.name if t is not None else None   # an unknown id: UNKNOWN_TOPIC_ID from the controller

    attr = "topics" if ctx.api_version >= 6 else "topic_names"
    cluster_delete = ctx.authorize_cluster(Op.DELETE)   # Kafka's ControllerApis: DELETE on the cluster is enough
    denied = [] if cluster_delete else [(item, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for item in getattr(req, attr)
              if name_of(item) is not None and not ctx.authorize(Op.DELETE, TOPIC, name_of(item))]
    denied = [(item, code, DEFAULT_MESSAGE) for item, code in denied]

    def partitions(item) -> int:   # what controller_mutation_rate counts
        t = image.topics.get(name_of(item))
        return len(t.partitions) if t is not None else 0
    throttled, finish = mutation_denied(ctx, getattr(req, attr), partitions, STRICT_QUOTA_SINCE, denied)
    return then(answer_denied(ctx, req, attr, denied + throttled, error_response, "responses",
                              lambda: ctx.services.controller_service.handle(ctx, req, lambda: _local(ctx, req),
                                                                           error_response)), finish)


def _local(ctx, req):
    services = ctx.services
    version = ctx.api_version
    if version >= 6:
        names = [t.name for t in req.topics if t.name is not None]
        ids = [t.topic_id for t in req.topics if t.name is None]
    else:
        names, ids = list(req.topic_names), []
    by_name, by_id = services.controller.delete_topics(names, ids, now_ms=services.now_ms())
    results = []
    for name, tid, code, message in by_name + by_id:
        results.append(R.DeletableTopicResult(name=name, topic_id=tid or ZERO_UUID, error_code=code,
                                              error_message=message if code != ErrorCode.NONE else None))
    return R(throttle_time_ms=0, responses=results)


def error_response(req, version, code):
    if version >= 6:
        items = [(t.name, t.topic_id) for t in req.topics]
    else:
        items = [(n, ZERO_UUID) for n in req.topic_names]
    return R(responses=[R.DeletableTopicResult(name=n, topic_id=i, error_code=code) for n, i in items])
