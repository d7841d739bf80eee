"""ListGroups (key 16), versions 0-5: the groups this coordinator hosts (state filter v4+, KIP-518;
type filter v5, KIP-848).

With an authorizer, a principal without DESCRIBE on the cluster sees only the groups it may
DESCRIBE (Kafka's ListGroups).
"""

from kcompat.broker.authz import GROUP, Op, then
from kcompat.protocol.messages.list_groups import ListGroupsResponse as R

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx, req):
    if ctx.authorize_cluster(Op.DESCRIBE):
        return ctx.services.groups.list_groups(ctx, req)
    return then(ctx.services.groups.list_groups(ctx, req), lambda resp: _describable(ctx, resp))


def _describable(ctx, resp):
    """Without DESCRIBE on the cluster, only the groups the principal may DESCRIBE (Kafka)."""
    resp.groups = [g for g in resp.groups if ctx.authorize(Op.DESCRIBE, GROUP, g.group_id)]
    return resp


def error_response(req, version, code):
    return R(error_code=code, groups=[])
