"""DeleteGroups (key 42), versions 0-2: delete empty groups and their offsets (NON_EMPTY_GROUP,
GROUP_ID_NOT_FOUND otherwise).

With an authorizer DELETE on each group is required (GROUP_AUTHORIZATION_FAILED).
"""

from kcompat.broker.authz import GROUP, Op, answer_denied
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.delete_groups import DeleteGroupsResponse as R

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, req):
    denied = [(g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in req.groups_names
              if not ctx.authorize(Op.DELETE, GROUP, g)]
    return answer_denied(ctx, req, "groups_names", denied, error_response, "results",
                         lambda: ctx.services.groups.delete_groups(ctx, req))


def error_response(req, version, code):
    return R(results=[R.DeletableGroupResult(group_id=g, error_code=code) for g in req.groups_names])
