"""DeleteShareGroupState (key 86), versions 0-0: tombstones for the state of a share group's
partitions (DeleteGroups, DeleteShareGroupOffsets).

An inter-broker API of KIP-932 answered by the share coordinator of each key, the leader of its
``__share_group_state`` partition (:mod:`kcompat.broker.share_state_runtime`); other keys of the
request get NOT_COORDINATOR per partition. Versions are those of Kafka 4.3.1's spec.

With an authorizer CLUSTER_ACTION on the cluster is required (CLUSTER_AUTHORIZATION_FAILED).
"""

from kcompat.broker.authz import Op
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.delete_share_group_state import DeleteShareGroupStateResponse as R
from kcompat.share.state_coordinator import error_response as _error_response

API_KEY = 86
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, req):
    if not ctx.authorize_cluster(Op.CLUSTER_ACTION):
        return error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return ctx.services.share_state.delete_state(req, ctx.api_version)


def error_response(req, version, code):
    return _error_response(R, req, code)
