"""Kafka's ``StandardAuthorizer`` (KIP-801): decisions from the ACLs in the metadata image.

``authorize(principal, host, operation, resource_type, name)`` answers as Kafka's
``StandardAuthorizerData.authorize``: a super user (``super.users``, ``User:a;User:b``) may do
anything; otherwise every ACL covering the resource (LITERAL name, LITERAL ``*``, PREFIXED) that
applies to the principal (or ``User:*``) and host (or ``*``) is considered: a matching DENY
decides at once (deny wins), else a matching ALLOW (with implied operations) allows; with no
ACL on the resource at all the answer is ``allow.everyone.if.no.acl.found`` (default false);
with ACLs on it none of which allow, it is denied.

``authorize_by_resource_type`` is Kafka's ``Authorizer.authorizeByResourceType`` default (used
by InitProducerId for idempotent producers: may the principal WRITE some topic?).

The ACL set is the image's :class:`kcompat.security.acl.AclStore`, read live: every broker applies
the same AccessControlEntryRecords, so every broker decides alike. Pure module: no asyncio, no
broker imports.
"""

from __future__ import annotations

from kcompat.security.acl import (
    SUPPORTED_OPERATIONS, WILDCARD_HOST, WILDCARD_PRINCIPAL, WILDCARD_RESOURCE, AclOperation, AclPermissionType,
    AclStore, PatternType, ResourceType,
)

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# Kafka 3.x's ZooKeeper-mode authorizer: same ACL semantics; accepted so 3.x configs keep working.
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
KNOWN_AUTHORIZERS = (STANDARD_AUTHORIZER, ACL_AUTHORIZER)

AUTHORIZED_OPERATIONS_OMITTED = -(2 ** 31)   # the "not requested" value of *_authorized_operations


def parse_super_users(value: str | None) -> frozenset[str]:
    """``"User:a; User:b"`` -> {"User:a", "User:b"} (Kafka splits on ``;`` and trims)."""
    if not value:
        return frozenset()
    return frozenset(s.strip() for s in value.split(";") if s.strip())


class StandardAuthorizer:
    """Decides from ``acls`` (an AclStore, or a callable returning the current one: the image
    resets in place when a snapshot loads), ``super_users`` (strings ``User:x``) and
    ``allow_everyone_if_no_acl_found``."""

    def __init__(self, acls, super_users=(), allow_everyone_if_no_acl_found: bool = False) -> None:
        self._acls = acls if callable(acls) else (lambda: acls)
        self.super_users = frozenset(str(u) for u in super_users)
        self.allow_everyone = bool(allow_everyone_if_no_acl_found)

    @classmethod
    def from_config(cls, acls, config_get) -> "StandardAuthorizer | None":
        """The authorizer ``authorizer.class.name`` asks for (``config_get(name)`` reads a
        config), or None when it is empty. ValueError for a class kcompat does not provide."""
        name = (config_get("authorizer.class.name") or "").strip()
        if not name:
            return None
        if name not in KNOWN_AUTHORIZERS:
            raise ValueError(f"authorizer.class.name {name} is not supported (use {STANDARD_AUTHORIZER})")
        return cls(acls, parse_super_users(config_get("super.users")),
                   bool(config_get("allow.everyone.if.no.acl.found")))

    @property
    def store(self) -> AclStore:
        return self._acls()

    def is_super_user(self, principal) -> bool:
        return str(principal) in self.super_users

    def authorize(self, principal, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        """Whether ``principal`` connected from ``host`` may do ``operation`` on the resource."""
        p = str(principal)
        if p in self.super_users:
            return True
        principals = (p, WILDCARD_PRINCIPAL)
        has_resource_acls = False
        allowed = False
        for acl in self._acls().covering(resource_type, name):
            has_resource_acls = True
            if not acl.applies_to(principals, host) or not acl.grants(operation):
                continue
            if acl.permission_type == AclPermissionType.DENY:
                return False
            if acl.permission_type == AclPermissionType.ALLOW:
                allowed = True
        if allowed:
            return True
        return self.allow_everyone and not has_resource_acls

    def authorize_many(self, principal, host: str, actions) -> list[bool]:
        """The batched form (Kafka's ``authorize(context, List<Action>)``): ``actions`` are
        ``(operation, resource_type, name)`` triples; one decision each, in order."""
        return [self.authorize(principal, host, op, rtype, name) for op, rtype, name in actions]

    def authorize_by_resource_type(self, principal, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Whether some resource of ``resource_type`` may get ``operation`` (Kafka's default
        ``Authorizer.authorizeByResourceType``): an ALLOW not dominated by a DENY."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        p = str(principal)
        deny_literal: set[str] = set()
        deny_prefix: set[str] = set()
        allow: list[tuple[PatternType, str]] = []
        for acl in self._acls().of_type(resource_type):
            if acl.host not in (host, WILDCARD_HOST) or acl.principal not in (p, WILDCARD_PRINCIPAL):
                continue
            if acl.operation not in (operation, AclOperation.ALL):
                continue
            if acl.permission_type == AclPermissionType.DENY:
                if acl.pattern_type == PatternType.LITERAL:
                    if acl.resource_name == WILDCARD_RESOURCE:
                        return False
                    deny_literal.add(acl.resource_name)
                else:
                    deny_prefix.add(acl.resource_name)
            elif acl.permission_type == AclPermissionType.ALLOW:
                allow.append((acl.pattern_type, acl.resource_name))
        if any(pt == PatternType.LITERAL and name == WILDCARD_RESOURCE for pt, name in allow):
            return True
        for pt, name in allow:
            if pt == PatternType.LITERAL and name in deny_literal:
                continue
            if not any(name[:i] in deny_prefix for i in range(1, len(name) + 1)):
                return True
        return False

    def authorized_operations(self, principal, host: str, resource_type: ResourceType, name: str) -> int:
        """The bitfield of the operations ``resource_type`` supports that are allowed on ``name``
        (``1 << AclOperation``), as Metadata / DescribeGroups / DescribeCluster answer it."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits


def all_operations(resource_type: ResourceType) -> int:
    """The bitfield with every operation ``resource_type`` supports (no authorizer configured)."""
    return sum(1 << op for op in SUPPORTED_OPERATIONS.get(resource_type, ()))
