"""Authorization on controller listeners (Kafka's ``ControllerApis``).

What arrives on a controller listener is the cluster's own traffic: Raft (Fetch of
``__cluster_metadata``, Vote, BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot), brokers'
registration and heartbeats, AllocateProducerIds, AlterPartition, and the admin requests brokers
forward after checking them against the client's principal (kcompat forwards the request itself,
where Kafka wraps it in an Envelope). Kafka requires CLUSTER_ACTION on the cluster for all of
these (the Envelope included) and DESCRIBE for DescribeQuorum; with an authorizer configured,
this gate answers CLUSTER_AUTHORIZATION_FAILED to a principal without it, so a client cannot reach
the controller behind the brokers' checks. ApiVersions, the SASL handshake and DescribeCluster
stay open, as in Kafka. Brokers' own principal needs CLUSTER_ACTION (or ``super.users``).
"""

from __future__ import annotations

from kcompat.broker.context import NO_RESPONSE
from kcompat.protocol.errors import ErrorCode
from kcompat.security.acl import CLUSTER_NAME, AclOperation, ResourceType

OPEN_APIS = frozenset({17, 18, 36, 60})   # SaslHandshake, ApiVersions, SaslAuthenticate, DescribeCluster
OPERATIONS = {55: AclOperation.DESCRIBE, 29: AclOperation.DESCRIBE}   # DescribeQuorum, DescribeAcls; else CLUSTER_ACTION


class GatedHandler:
    """A handler module whose ``handle`` first checks ``operation`` on the cluster; every other
    attribute (API_KEY, versions, ``error_response``) is the module's."""

    def __init__(self, module, operation: AclOperation) -> None:
        self._module = module
        self._operation = operation

    def __getattr__(self, name: str):
        return getattr(self._module, name)

    def handle(self, ctx, req):
        auth = ctx.services.authorizer
        if auth is None or auth.authorize(ctx.principal, ctx.client_host, self._operation, ResourceType.CLUSTER,
                                          CLUSTER_NAME):
            return self._module.handle(ctx, req)
        builder = getattr(self._module, "error_response", None)
        if builder is None:
            ctx.connection.close(f"{ctx.principal} may not {self._operation.name} on the cluster")
            return NO_RESPONSE
        return builder(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


def gated(handlers: dict) -> dict:
    """``handlers`` (API key -> module) with the controller listener's checks."""
    return {key: module if key in OPEN_APIS else GatedHandler(module, OPERATIONS.get(key, AclOperation.CLUSTER_ACTION))
            for key, module in handlers.items()}
