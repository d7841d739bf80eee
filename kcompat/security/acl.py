"""Access control lists as Kafka models them (``org.apache.kafka.common.acl`` / ``resource``).

An ACL binding is a resource pattern (resource type, name, LITERAL or PREFIXED) plus an access
control entry (principal ``User:alice``, host, operation, ALLOW or DENY). Filters (DescribeAcls,
DeleteAcls) use ANY for every enum, MATCH for the pattern type, and None for any name, principal
or host. The numeric codes are Kafka's wire codes.

Matching a request (Kafka's ``StandardAuthorizerData.findResult``): an ACL applies when its
principal is the request's or ``User:*``, its host is ``*`` or the client's address, and its
resource pattern covers the name (LITERAL equal, LITERAL ``*``, or PREFIXED a prefix of it). A
DENY applies to its own operation (or ALL); an ALLOW also implies DESCRIBE when it grants READ,
WRITE, DELETE or ALTER, and DESCRIBE_CONFIGS when it grants ALTER_CONFIGS.

Pure: no asyncio, no broker imports (the authorizer is a state machine over the metadata image).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD_RESOURCE = "*"          # ResourcePattern.WILDCARD_RESOURCE
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"   # the only name of the CLUSTER resource

Op = AclOperation
IMPLIES_DESCRIBE = frozenset({Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS})

# The operations each resource type supports: what an "authorized operations" bitfield lists
# (Kafka's AclEntry.supportedOperations).
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS,
                         Op.ALTER_CONFIGS),
    ResourceType.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),   # Kafka 4's group configs
    ResourceType.CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                           Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE, Op.TWO_PHASE_COMMIT),
    ResourceType.DELEGATION_TOKEN: (Op.DESCRIBE,),
    ResourceType.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}


class InvalidAclError(ValueError):
    """An ACL that may not be created (Kafka's InvalidRequestException); ``str()`` is Kafka's message."""


def _enum(cls, code: int):
    try:
        return cls(code)
    except ValueError:
        return cls(0)   # UNKNOWN, as Kafka's fromCode


@dataclass(frozen=True)
class AclBinding:
    """One ACL: pattern (resource_type, resource_name, pattern_type) and entry (principal, host,
    operation, permission_type)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    @classmethod
    def of(cls, resource_type: int, resource_name: str, pattern_type: int, principal: str, host: str,
           operation: int, permission_type: int) -> "AclBinding":
        """Build from wire codes (unknown codes become UNKNOWN)."""
        return cls(_enum(ResourceType, resource_type), resource_name, _enum(PatternType, pattern_type), principal,
                   host, _enum(AclOperation, operation), _enum(AclPermissionType, permission_type))

    def validate(self) -> None:
        """Kafka's checks before an ACL is stored (AclApis.handleCreateAcls and
        AclControlManager.validateNewAcl); raises InvalidAclError with Kafka's message."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise InvalidAclError(f"Invalid resourceType {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAclError(f"Invalid patternType {self.pattern_type.name}")
        if self.operation in (Op.UNKNOWN, Op.ANY):
            raise InvalidAclError(f"Invalid operation {self.operation.name}")
        if self.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise InvalidAclError(f"Invalid permissionType {self.permission_type.name}")
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise InvalidAclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        if not self.resource_name:
            raise InvalidAclError("Invalid empty resource name")
        if ":" not in self.principal:
            raise InvalidAclError(f"Could not parse principal from `{self.principal}` (no colon is present "
                                  f"separating the principal type from the principal name)")

    def covers(self, name: str) -> bool:
        """Whether this ACL's resource pattern applies to resource ``name`` (of its type)."""
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name == name or self.resource_name == WILDCARD_RESOURCE
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.resource_name)

    def applies_to(self, principals: tuple[str, ...], host: str) -> bool:
        """Principal and host match (``principals``: the principal's string and ``User:*``)."""
        return self.principal in principals and (self.host == WILDCARD_HOST or self.host == host)

    def grants(self, operation: AclOperation) -> bool:
        """Whether this ACL (already applying to the principal, host and resource) decides
        ``operation``: a DENY its own operation or ALL, an ALLOW also the implied ones."""
        if self.operation == Op.ALL or self.operation == operation:
            return True
        if self.permission_type != AclPermissionType.ALLOW:
            return False
        if operation == Op.DESCRIBE:
            return self.operation in IMPLIES_DESCRIBE
        if operation == Op.DESCRIBE_CONFIGS:
            return self.operation in IMPLIES_DESCRIBE_CONFIGS
        return False


@dataclass(frozen=True)
class AclBindingFilter:
    """A DescribeAcls / DeleteAcls filter: enums may be ANY (pattern type ANY or MATCH), strings
    None for any."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = Op.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    @classmethod
    def of(cls, resource_type: int, resource_name: str | None, pattern_type: int, principal: str | None,
           host: str | None, operation: int, permission_type: int) -> "AclBindingFilter":
        return cls(_enum(ResourceType, resource_type), resource_name, _enum(PatternType, pattern_type), principal,
                   host, _enum(AclOperation, operation), _enum(AclPermissionType, permission_type))

    def unknown_reason(self) -> str | None:
        """Why Kafka refuses this filter (a field UNKNOWN), or None."""
        for label, value in (("resource type", self.resource_type), ("pattern type", self.pattern_type),
                             ("operation", self.operation), ("permission type", self.permission_type)):
            if value == 0:
                return f"Filter contain UNKNOWN elements: {label}"
        return None

    def matches(self, acl: AclBinding) -> bool:
        """Kafka's ``AclBindingFilter.matches``."""
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if not self._pattern_matches(acl):
            return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation not in (Op.ANY, acl.operation):
            return False
        return self.permission_type in (AclPermissionType.ANY, acl.permission_type)

    def _pattern_matches(self, acl: AclBinding) -> bool:
        pt = self.pattern_type
        if pt == PatternType.MATCH:
            # every pattern that would apply to a resource of this name
            if self.resource_name is None:
                return True
            if acl.pattern_type == PatternType.LITERAL:
                return acl.resource_name in (self.resource_name, WILDCARD_RESOURCE)
            return acl.pattern_type == PatternType.PREFIXED and self.resource_name.startswith(acl.resource_name)
        if pt != PatternType.ANY and pt != acl.pattern_type:
            return False
        return self.resource_name is None or self.resource_name == acl.resource_name


def acl_id() -> uuid.UUID:
    """A fresh ACL id (AccessControlEntryRecord.id)."""
    return uuid.uuid4()


class AclStore:
    """The ACL set of the metadata image: id -> AclBinding, indexed by resource type and, for
    LITERAL patterns, by name. Changed only by the image replaying AccessControlEntryRecord /
    RemoveAccessControlEntryRecord. Entries are kept per id, as Kafka's StandardAuthorizerData
    does: two records with the same binding are two entries, and removing one leaves the other."""

    def __init__(self) -> None:
        self.by_id: dict[uuid.UUID, AclBinding] = {}
        self._ids: dict[AclBinding, set[uuid.UUID]] = {}
        self._literal: dict[tuple[ResourceType, str], dict[uuid.UUID, AclBinding]] = {}
        self._prefixed: dict[ResourceType, dict[uuid.UUID, AclBinding]] = {}

    def __len__(self) -> int:
        return len(self.by_id)

    def _section(self, acl: AclBinding, create: bool = False) -> dict | None:
        if acl.pattern_type == PatternType.PREFIXED:
            return self._prefixed.setdefault(acl.resource_type, {}) if create else \
                self._prefixed.get(acl.resource_type)
        key = (acl.resource_type, acl.resource_name)
        return self._literal.setdefault(key, {}) if create else self._literal.get(key)

    def add(self, acl_uuid: uuid.UUID, acl: AclBinding) -> None:
        if acl_uuid in self.by_id:
            self.remove(acl_uuid)
        self.by_id[acl_uuid] = acl
        self._ids.setdefault(acl, set()).add(acl_uuid)
        self._section(acl, create=True)[acl_uuid] = acl

    def remove(self, acl_uuid: uuid.UUID) -> None:
        acl = self.by_id.pop(acl_uuid, None)
        if acl is None:
            return
        ids = self._ids.get(acl)
        if ids is not None:
            ids.discard(acl_uuid)
            if not ids:
                del self._ids[acl]
        section = self._section(acl)
        if section is not None:
            section.pop(acl_uuid, None)
            if not section and acl.pattern_type != PatternType.PREFIXED:
                del self._literal[(acl.resource_type, acl.resource_name)]

    def id_of(self, acl: AclBinding) -> uuid.UUID | None:
        """An id of a stored ACL equal to ``acl``, or None."""
        ids = self._ids.get(acl)
        return next(iter(ids)) if ids else None

    def covering(self, resource_type: ResourceType, name: str):
        """Every ACL whose pattern applies to resource ``name`` of ``resource_type``."""
        yield from self._literal.get((resource_type, name), {}).values()
        if name != WILDCARD_RESOURCE:
            yield from self._literal.get((resource_type, WILDCARD_RESOURCE), {}).values()
        for acl in self._prefixed.get(resource_type, {}).values():
            if name.startswith(acl.resource_name):
                yield acl

    def of_type(self, resource_type: ResourceType):
        """Every ACL on resources of ``resource_type``."""
        for (rtype, _), acls in self._literal.items():
            if rtype == resource_type:
                yield from acls.values()
        yield from self._prefixed.get(resource_type, {}).values()

    def matching(self, flt: AclBindingFilter) -> list[tuple[uuid.UUID, AclBinding]]:
        """(id, binding) of every ACL the filter matches, in a stable order."""
        return sorted(((i, a) for i, a in self.by_id.items() if flt.matches(a)), key=lambda p: _order(p[1]))


def _order(acl: AclBinding):
    return (acl.resource_type, acl.pattern_type, acl.resource_name, acl.principal, acl.host, acl.operation,
            acl.permission_type)
