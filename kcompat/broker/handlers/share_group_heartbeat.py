"""ShareGroupHeartbeat (key 76), version 1: membership and assignment of KIP-932 share groups
(``KafkaShareConsumer``), answered by the group coordinator (:mod:`kcompat.group.share_groups`).
Version 0 was Kafka 4.0's early access and was removed in 4.1, as here."""

from kcompat.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatResponse as R

API_KEY = 76
MIN_VERSION = 1
MAX_VERSION = 1


def handle(ctx, req):
    return ctx.broker.groups.share_group_heartbeat(ctx, req)


def error_response(req, version, code):
    return R(error_code=code, member_epoch=0, heartbeat_interval_ms=0)
