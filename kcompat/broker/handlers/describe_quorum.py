"""DescribeQuorum (key 55), versions 0-2: the metadata quorum's leader, epoch, high watermark and
each voter's and observer's log end offset and fetch times (KIP-595, KIP-836) — what
``kafka-metadata-quorum describe --status / --replication`` prints.

Answered by the quorum leader; on any other node (and on broker listeners) the request is
forwarded to the active controller, as Kafka's brokers do. From v2 the answer lists each voter's
endpoint (``Nodes``, KIP-853): with static voters, Kafka's leader names every voter of
``controller.quorum.voters`` at its host and port on the first of ``controller.listener.names``
(``CurrentVoters: [{"id": 1, "endpoints": ["CONTROLLER://host:port"]}]`` in the tool); a node with
no controller listener names none.

With an authorizer DESCRIBE on the cluster is required on broker listeners (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kcompat.broker.authz import Op
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.describe_quorum import DescribeQuorumResponse

API_KEY = 55
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, req):
    if not ctx.authorize_cluster(Op.DESCRIBE):
        return error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    services = ctx.services
    if services.quorum.is_leader:
        return _with_voter_endpoints(services.quorum.handle_request(req), services.config)
    return services.controller_service.forward(req, ctx.api_version, error_response)


async def _with_voter_endpoints(reply, config) -> DescribeQuorumResponse:
    """The Raft core's answer with ``nodes`` (written from v2 only): Kafka's
    ``LeaderState.nodes`` for static voters, each voter's endpoint on the first controller listener."""
    resp = await reply
    names = config.controller_listener_names
    ok = resp.error_code == ErrorCode.NONE and all(p.error_code == ErrorCode.NONE for t in resp.topics
                                                   for p in t.partitions)
    if ok and names:
        R = DescribeQuorumResponse
        resp.nodes = [R.Node(node_id=v.node_id, listeners=[R.Listener(name=names[0], host=v.host, port=v.port)])
                      for v in config.controller_quorum_voters]
    return resp


def error_response(req, version, code):
    return DescribeQuorumResponse(error_code=code, error_message=ErrorCode(code).name)
