"""ACL changes on the active controller (Kafka's ``AclControlManager``).

CreateAcls and DeleteAcls are validated against the metadata image and become
AccessControlEntryRecord / RemoveAccessControlEntryRecord records; the image (and so every
broker's authorizer) changes only when they are replayed. An ACL that already exists is not
stored twice (its creation still succeeds); an ACL matched by several delete filters of one
request is removed once, reported by the first.
"""

from __future__ import annotations

from kcompat.kraft.image import MetadataImage
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.metadata_records import AccessControlEntryRecord, RemoveAccessControlEntryRecord
from kcompat.security.acl import AclBinding, AclBindingFilter, InvalidAclError, acl_id

CreateResult = tuple[ErrorCode, str | None]
DeleteResult = tuple[ErrorCode, str | None, list[AclBinding]]


def create_acls(image: MetadataImage, bindings: list[AclBinding]) -> tuple[list, list[CreateResult]]:
    """Records adding the new ACLs, and (error, message) per binding in order."""
    records: list = []
    results: list[CreateResult] = []
    added: set[AclBinding] = set()
    for b in bindings:
        try:
            b.validate()
        except InvalidAclError as e:
            results.append((ErrorCode.INVALID_REQUEST, str(e)))
            continue
        if image.acls.id_of(b) is None and b not in added:
            added.add(b)
            records.append(AccessControlEntryRecord(
                id=acl_id(), resource_type=b.resource_type, resource_name=b.resource_name,
                pattern_type=b.pattern_type, principal=b.principal, host=b.host, operation=b.operation,
                permission_type=b.permission_type))
        results.append((ErrorCode.NONE, None))
    return records, results


def delete_acls(image: MetadataImage, filters: list[AclBindingFilter]) -> tuple[list, list[DeleteResult]]:
    """Records removing every ACL the filters match, and (error, message, removed ACLs) per filter."""
    records: list = []
    results: list[DeleteResult] = []
    removed: set = set()
    for f in filters:
        reason = f.unknown_reason()
        if reason is not None:
            results.append((ErrorCode.INVALID_REQUEST, reason, []))
            continue
        matched = []
        for i, binding in image.acls.matching(f):
            if i in removed:
                continue
            removed.add(i)
            matched.append(binding)
            records.append(RemoveAccessControlEntryRecord(id=i))
        results.append((ErrorCode.NONE, None, matched))
    return records, results
