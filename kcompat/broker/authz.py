"""Small helpers for the authorization checks handlers make (issue 19, Kafka's ``AuthHelper``).

Handlers call ``ctx.authorize(operation, resource_type, name)`` (True without an authorizer) and
use these for the recurring shapes: may a topic be created, keep the permitted items of a request
and answer the others with an error, and adjust a response that may still be on its way (a
handler may return an awaitable).
"""

from __future__ import annotations

from kcompat.isr.completion import Completion
from kcompat.protocol.errors import default_message
from kcompat.security.acl import AclOperation as Op
from kcompat.security.acl import ResourceType

TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
CLUSTER = ResourceType.CLUSTER
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID

__all__ = ["Op", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "may_create_topic", "then",
           "answer_denied", "config_resource_check"]


def may_create_topic(ctx, name: str) -> bool:
    """CREATE on the cluster or on the topic (Kafka's CreateTopics / auto-creation check)."""
    return ctx.authorize_cluster(Op.CREATE) or ctx.authorize(Op.CREATE, TOPIC, name)


def then(result, fn):
    """``fn(response)`` applied to a handler's result: now, or once an awaitable result is ready.
    A :class:`~kcompat.isr.completion.Completion` (a delayed fetch) stays one, so its response is
    still written as soon as it completes."""
    if isinstance(result, Completion):
        return result.map(fn)
    if hasattr(type(result), "__await__"):   # a coroutine, task or future (inspect.isawaitable's ABC check costs more)
        async def later():
            return fn(await result)
        return later()
    return fn(result)


DEFAULT_MESSAGE = object()


def answer_denied(ctx, req, attr: str, denied: list, error_response, resp_attr: str, call,
                  message=DEFAULT_MESSAGE, call_when_empty: bool = False):
    """Handle ``req`` with only the permitted items of ``req.<attr>``: ``denied`` lists
    ``(item, error code)`` pairs (or ``(item, code, message)``) answered with their error (entries
    built by the handler's ``error_response``, appended to ``response.<resp_attr>``); ``call()``
    handles the rest (it may forward the narrowed request to the controller). Entries that carry
    an ``error_message`` get ``message``: by default Kafka's text for the code ("Topic
    authorization failed."), or the one given (None, or e.g. CreateTopics' "Authorization
    failed."). With nothing denied, just ``call()``; with everything denied ``call()`` runs only
    if ``call_when_empty`` (a share fetch still moves its session epoch)."""
    if not denied:
        return call()
    version = ctx.api_version
    items = getattr(req, attr)
    denied = [d if len(d) == 3 else (d[0], d[1], message) for d in denied]
    errors = []
    for code in dict.fromkeys(d[1] for d in denied):
        group = [d for d in denied if d[1] == code]
        setattr(req, attr, [d[0] for d in group])
        entries = getattr(error_response(req, version, code), resp_attr)
        for e, (_, _, msg) in zip(entries, group):
            if "error_message" in getattr(type(e), "__slots__", ()):
                e.error_message = default_message(code) if msg is DEFAULT_MESSAGE else msg
        errors += entries
    denied_ids = {id(d[0]) for d in denied}
    setattr(req, attr, [item for item in items if id(item) not in denied_ids])
    if not getattr(req, attr) and not call_when_empty:
        resp = error_response(req, version, 0)
        getattr(resp, resp_attr).extend(errors)
        return resp

    def add(resp):
        entries = getattr(resp, resp_attr)
        if entries is None:
            setattr(resp, resp_attr, errors)
        else:
            entries.extend(errors)
        return resp
    return then(call(), add)


# ConfigResource types: what a config change / description needs (Kafka's AuthHelper for
# AlterConfigs, IncrementalAlterConfigs, DescribeConfigs)
_CONFIG_RESOURCES = {2: (TOPIC, 29), 4: (CLUSTER, 31), 8: (CLUSTER, 31), 16: (CLUSTER, 31), 32: (GROUP, 30)}


def config_resource_check(ctx, operation: Op, resources) -> list:
    """``(resource, error code)`` for each config resource ``operation`` (ALTER_CONFIGS or
    DESCRIBE_CONFIGS) is not allowed on: a topic on the topic (TOPIC_AUTHORIZATION_FAILED), a
    group on the group (GROUP_AUTHORIZATION_FAILED), a broker, broker logger or client metrics
    resource on the cluster (CLUSTER_AUTHORIZATION_FAILED)."""
    denied = []
    for res in resources:
        rtype, code = _CONFIG_RESOURCES.get(res.resource_type, (None, None))
        if rtype is None:
            continue   # unknown types get the handler's own error
        name = "kafka-cluster" if rtype == CLUSTER else res.resource_name
        if not ctx.authorize(operation, rtype, name):
            # Kafka's broker-logger refusal carries no message
            denied.append((res, code, None if res.resource_type == 8 else DEFAULT_MESSAGE))
    return denied
