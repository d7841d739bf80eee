"""CreateAcls (key 30), versions 0-3: add ACLs (``kafka-acls.sh --add``).

As Kafka's ``AclApis.handleCreateAcls`` behind ``maybeForwardToController``: ALTER on the
cluster is required (CLUSTER_AUTHORIZATION_FAILED), SECURITY_DISABLED without an authorizer; the
active controller validates each ACL (``AclControlManager``: INVALID_REQUEST for an empty name, a
CLUSTER name other than ``kafka-cluster``, a principal without ``:``) and commits
AccessControlEntryRecords, which every broker's authorizer then applies. As Kafka 4.3.1 answers: a
filter-only value (resource type ANY, pattern type ANY or MATCH, operation or permission ANY) is
UNKNOWN_SERVER_ERROR, an UNKNOWN code closes the connection (the request does not parse).
"""

from __future__ import annotations

from kcompat.broker.context import NO_RESPONSE
from kcompat.kraft.acl_control import create_acls
from kcompat.protocol.errors import ErrorCode, default_message
from kcompat.protocol.messages.create_acls import CreateAclsResponse as R
from kcompat.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType

API_KEY = 30
MIN_VERSION = 0
MAX_VERSION = 3


def handle(ctx, req):
    version = ctx.api_version
    if any(0 in (c.resource_pattern_type, c.resource_type, c.permission_type, c.operation) for c in req.creations):
        # Kafka fails to parse the request ("CreatableAcls contain unknown elements") and closes
        ctx.connection.close("CreateAcls with an UNKNOWN resource type, pattern type, operation or permission")
        return NO_RESPONSE
    if ctx.services.authorizer is None:
        return _all(req, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    if not ctx.authorize_cluster(AclOperation.ALTER):
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return _all(req, denied, default_message(denied))
    if version == 0 and any(c.resource_pattern_type != PatternType.LITERAL for c in req.creations):
        return _all(req, ErrorCode.UNSUPPORTED_VERSION, "Version 0 only supports literal resource pattern types")
    if any(_filter_only(c) for c in req.creations):
        # Kafka's ResourcePattern / AccessControlEntry refuse ANY and MATCH with an
        # IllegalArgumentException, answered as UNKNOWN_SERVER_ERROR
        return _all(req, ErrorCode.UNKNOWN_SERVER_ERROR, None)
    return ctx.services.controller_service.handle(ctx, req, lambda: _local(ctx, req), error_response)


def _filter_only(c) -> bool:
    """An ANY or MATCH value, which only filters may hold."""
    return (c.resource_type == ResourceType.ANY or c.resource_pattern_type in (PatternType.ANY, PatternType.MATCH)
            or c.operation == AclOperation.ANY or c.permission_type == AclPermissionType.ANY)


def _local(ctx, req):
    services = ctx.services
    bindings = [AclBinding.of(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                              c.operation, c.permission_type) for c in req.creations]
    records, results = create_acls(services.image, bindings)
    services.controller.commit(records, services.now_ms())
    # Kafka answers a successful creation with an empty message, not null
    return R(throttle_time_ms=0, results=[R.AclCreationResult(error_code=code, error_message="" if msg is None else msg)
                                          for code, msg in results])


def _all(req, code, message):
    return R(throttle_time_ms=0, results=[R.AclCreationResult(error_code=code, error_message=message)
                                          for _ in req.creations])


def error_response(req, version, code):
    return _all(req, code, None)
