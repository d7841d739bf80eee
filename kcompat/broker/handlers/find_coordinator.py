"""FindCoordinator (key 10), versions 0-6: which broker coordinates a group, a transactional id
or a share partition.

Key types (KIP-98): 0 GROUP, 1 TRANSACTION (from v1), 2 SHARE (KIP-932, from v6); batched lookups
of several keys from v4 (KIP-699). A group's coordinator is the leader of its ``__consumer_offsets``
partition, a transactional id's the leader of its ``__transaction_state`` partition, a share
partition's (key ``groupId:topicId:partition``, Kafka's SharePartitionKey) the leader of its
``__share_group_state`` partition; the topics are created on the first lookup, as Kafka does: in
the background, the lookup answering COORDINATOR_NOT_AVAILABLE (which clients retry) until the
topic exists. An unknown key type, a SHARE key before v6 or a malformed SHARE key is
INVALID_REQUEST.

Advertising this API also matters to librdkafka beyond groups: it only enables LZ4 compression
for brokers that support FindCoordinator (its feature map uses it as the 0.9+ marker) and
otherwise sends LZ4-configured batches uncompressed.

With an authorizer DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED) is required, CLUSTER_ACTION for share-state keys.
"""

from __future__ import annotations

from kcompat.broker.authz import GROUP as GROUP_RESOURCE
from kcompat.broker.authz import TRANSACTIONAL_ID, Op
from kcompat.protocol.errors import ErrorCode, default_message
from kcompat.protocol.messages.find_coordinator import FindCoordinatorResponse as R
from kcompat.share.state_records import parse_share_key

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6

GROUP, TRANSACTION, SHARE = 0, 1, 2


def _located(ctx, leader: int | None) -> tuple[ErrorCode, str | None, int, str, int]:
    """The answer for a key whose internal partition ``leader`` leads (None: no leader yet, or
    the topic is being created): COORDINATOR_NOT_AVAILABLE also when the leader has no endpoint
    on the request's listener."""
    endpoint = None if leader is None else ctx.services.metadata_cache.endpoint_of(leader, ctx.listener_name)
    if endpoint is None:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return code, default_message(code), -1, "", -1
    host, port = endpoint
    return ErrorCode.NONE, None, leader, host, port


def _lookup(ctx, key: str, key_type: int) -> tuple[ErrorCode, str | None, int, str, int]:
    """(error, message, node id, host, port) for one key."""
    if key_type == GROUP and not ctx.authorize(Op.DESCRIBE, GROUP_RESOURCE, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None, -1, "", -1
    if key_type == TRANSACTION and not ctx.authorize(Op.DESCRIBE, TRANSACTIONAL_ID, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, -1, "", -1
    if key_type == SHARE and not ctx.authorize_cluster(Op.CLUSTER_ACTION):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, -1, "", -1
    if key_type == GROUP:
        if not key and ctx.api_version < 4:
            return ErrorCode.INVALID_REQUEST, "Invalid group id", -1, "", -1
        return _located(ctx, ctx.services.groups.coordinator_node(key))
    if key_type == TRANSACTION:
        if not key:
            return ErrorCode.INVALID_REQUEST, "Invalid transactional id", -1, "", -1
        return _located(ctx, ctx.services.txn.coordinator_node(key))
    if key_type == SHARE and ctx.api_version >= 6:
        try:
            parse_share_key(key)
        except ValueError as e:
            return ErrorCode.INVALID_REQUEST, str(e), -1, "", -1
        return _located(ctx, ctx.services.share_state.coordinator_node(key))
    return ErrorCode.INVALID_REQUEST, f"Invalid coordinator type {key_type}", -1, "", -1


def handle(ctx, req):
    version = ctx.api_version
    key_type = req.key_type if version >= 1 else GROUP
    if version >= 4:
        coordinators = []
        for key in req.coordinator_keys:
            code, message, node, host, port = _lookup(ctx, key, key_type)
            coordinators.append(R.Coordinator(key=key, node_id=node, host=host, port=port, error_code=code,
                                              error_message=message))
        return R(throttle_time_ms=0, coordinators=coordinators)
    code, message, node, host, port = _lookup(ctx, req.key, key_type)
    return R(throttle_time_ms=0, error_code=code, error_message=message, node_id=node, host=host, port=port)


def error_response(req, version, code):
    if version >= 4:
        return R(coordinators=[R.Coordinator(key=k, node_id=-1, host="", port=-1, error_code=code)
                               for k in req.coordinator_keys])
    return R(error_code=code, node_id=-1, host="", port=-1)
