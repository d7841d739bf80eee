"""DescribeAcls (key 29), versions 0-3: the ACLs matching a filter (``kafka-acls.sh --list``).

As Kafka's ``AclApis.handleDescribeAcls``, answered by any broker from its metadata image:
DESCRIBE on the cluster is required (CLUSTER_AUTHORIZATION_FAILED), SECURITY_DISABLED without an
authorizer; a filter with an UNKNOWN element closes the connection (Kafka cannot parse it); v0
takes LITERAL or ANY (read as LITERAL) pattern types only. ACLs come back grouped by resource
pattern.
"""

from __future__ import annotations

from kcompat.broker.context import NO_RESPONSE
from kcompat.protocol.errors import ErrorCode, default_message
from kcompat.protocol.messages.describe_acls import DescribeAclsResponse as R
from kcompat.security.acl import AclBindingFilter, AclOperation, PatternType

API_KEY = 29
MIN_VERSION = 0
MAX_VERSION = 3


def handle(ctx, req):
    pattern_type = req.pattern_type_filter
    if ctx.api_version == 0:
        if pattern_type not in (PatternType.LITERAL, PatternType.ANY):
            return _error(ErrorCode.UNSUPPORTED_VERSION, "Version 0 only supports literal resource pattern types")
        pattern_type = PatternType.LITERAL
    flt = AclBindingFilter.of(req.resource_type_filter, req.resource_name_filter, pattern_type,
                              req.principal_filter, req.host_filter, req.operation, req.permission_type)
    reason = flt.unknown_reason()
    if reason is not None:   # Kafka fails to parse the request and closes the connection
        ctx.connection.close(f"DescribeAcls: {reason}")
        return NO_RESPONSE
    if ctx.services.authorizer is None:
        return _error(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                      default_message(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    resources: dict[tuple, list] = {}
    for _, a in ctx.services.image.acls.matching(flt):
        resources.setdefault((a.resource_type, a.resource_name, a.pattern_type), []).append(
            R.AclDescription(principal=a.principal, host=a.host, operation=a.operation,
                             permission_type=a.permission_type))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, resources=[
        R.DescribeAclsResource(resource_type=rt, resource_name=rn, pattern_type=pt, acls=acls)
        for (rt, rn, pt), acls in resources.items()])


def _error(code, message):
    return R(throttle_time_ms=0, error_code=code, error_message=message, resources=[])


def error_response(req, version, code):
    return _error(code, None)
