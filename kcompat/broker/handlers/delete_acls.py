"""DeleteAcls (key 31), versions 0-3: remove the ACLs matching filters (``kafka-acls.sh --remove``).

As Kafka's ``AclApis.handleDeleteAcls`` behind ``maybeForwardToController``: ALTER on the
cluster is required (CLUSTER_AUTHORIZATION_FAILED), SECURITY_DISABLED without an authorizer; the
active controller commits a RemoveAccessControlEntryRecord per matched ACL and answers, per
filter, the ACLs it removed. A filter with an UNKNOWN element closes the connection (Kafka cannot
parse the request); v0 filters
take LITERAL or ANY (read as LITERAL) pattern types only.
"""

from __future__ import annotations

from kcompat.broker.context import NO_RESPONSE
from kcompat.kraft.acl_control import delete_acls
from kcompat.protocol.errors import ErrorCode, default_message
from kcompat.protocol.messages.delete_acls import DeleteAclsResponse as R
from kcompat.security.acl import AclBindingFilter, AclOperation, PatternType

API_KEY = 31
MIN_VERSION = 0
MAX_VERSION = 3


def handle(ctx, req):
    if any(0 in (f.resource_type_filter, f.pattern_type_filter, f.operation, f.permission_type) for f in req.filters):
        # Kafka fails to parse the request ("Filters contain UNKNOWN elements") and closes
        ctx.connection.close("DeleteAcls with an UNKNOWN filter element")
        return NO_RESPONSE
    if ctx.services.authorizer is None:
        return _all(req, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    if not ctx.authorize_cluster(AclOperation.ALTER):
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return _all(req, denied, default_message(denied))
    if ctx.api_version == 0:
        if any(f.pattern_type_filter not in (PatternType.LITERAL, PatternType.ANY) for f in req.filters):
            return _all(req, ErrorCode.UNSUPPORTED_VERSION,
                        "Version 0 does not support pattern types other than LITERAL and ANY")
        for f in req.filters:
            f.pattern_type_filter = PatternType.LITERAL
    return ctx.services.controller_service.handle(ctx, req, lambda: _local(ctx, req), error_response)


def _local(ctx, req):
    services = ctx.services
    filters = [AclBindingFilter.of(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                                   f.principal_filter, f.host_filter, f.operation, f.permission_type)
               for f in req.filters]
    records, results = delete_acls(services.image, filters)
    services.controller.commit(records, services.now_ms())
    return R(throttle_time_ms=0, filter_results=[
        R.DeleteAclsFilterResult(error_code=code, error_message=msg, matching_acls=[
            R.DeleteAclsMatchingAcl(error_code=0, error_message=None, resource_type=a.resource_type,
                                    resource_name=a.resource_name, pattern_type=a.pattern_type,
                                    principal=a.principal, host=a.host, operation=a.operation,
                                    permission_type=a.permission_type) for a in removed])
        for code, msg, removed in results])


def _all(req, code, message):
    return R(throttle_time_ms=0, filter_results=[R.DeleteAclsFilterResult(error_code=code, error_message=message,
                                                                          matching_acls=[]) for _ in req.filters])


def error_response(req, version, code):
    return _all(req, code, None)
