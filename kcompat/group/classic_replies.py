"""Replies of the classic group APIs and the member checks they share (Kafka's
GroupMetadataManager helpers): used by classic membership and its rebalances, and by offsets."""

from __future__ import annotations

from typing import Iterable

from kcompat.group.coordinator_types import log, UNKNOWN_MEMBER_ID, NO_GENERATION
from kcompat.group.model import Group, Member, Waiter
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.join_group import JoinGroupResponse
from kcompat.protocol.messages.sync_group import SyncGroupResponse


def validate_member(group: Group, member_id: str, instance_id: str | None) -> ErrorCode | None:
    """Kafka's validateCurrentMember: a static instance must map to this member id, and the
    member must exist."""
    if instance_id is not None:
        current = group.static_members.get(instance_id)
        if current is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if current != member_id:
            log.info("group %s: member %s of static instance %s is fenced by %s",
                     group.group_id, member_id, instance_id, current)
            return ErrorCode.FENCED_INSTANCE_ID
    if not group.has(member_id):
        return ErrorCode.UNKNOWN_MEMBER_ID
    return None


def join_response(version: int, error: ErrorCode, member_id: str = UNKNOWN_MEMBER_ID, *,
                   generation: int = NO_GENERATION, protocol_type: str | None = None,
                   protocol_name: str | None = None, leader: str | None = None,
                   members: Iterable[tuple[str, str | None, bytes]] = (),
                   skip_assignment: bool = False) -> JoinGroupResponse:
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=int(error), generation_id=generation,
        protocol_type=protocol_type,
        protocol_name=protocol_name if version >= 7 else (protocol_name or ""),
        leader=leader or "", skip_assignment=skip_assignment, member_id=member_id,
        members=[JoinGroupResponse.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=md)
                 for m, i, md in members])


def join_success(group: Group, member: Member, version: int, *, with_members: bool,
                  leader: str | None = None, skip_assignment: bool = False) -> JoinGroupResponse:
    return join_response(
        version, ErrorCode.NONE, member.member_id, generation=group.generation_id,
        protocol_type=group.protocol_type, protocol_name=group.protocol_name,
        leader=group.leader_id if leader is None else leader,
        members=group.current_member_metadata() if with_members else (), skip_assignment=skip_assignment)


def sync_response(error: ErrorCode, protocol_type: str | None = None, protocol_name: str | None = None,
                   assignment: bytes = b"") -> SyncGroupResponse:
    return SyncGroupResponse(throttle_time_ms=0, error_code=int(error), protocol_type=protocol_type,
                             protocol_name=protocol_name, assignment=assignment)


def reply_join_error(ctx, waiter: Waiter, error: ErrorCode, member_id: str) -> None:
    ctx.reply(waiter, join_response(waiter[1], error, member_id))


def answer_waiters(ctx, group: Group, error: ErrorCode) -> None:
    """Answer every JoinGroup and SyncGroup of ``group``'s members still waiting with
    ``error`` (NOT_COORDINATOR when the group is unloaded)."""
    for member in group.members.values():
        waiter = group.take_join_waiter(member)
        if waiter is not None:
            reply_join_error(ctx, waiter, error, member.member_id)
        waiter = group.take_sync_waiter(member)
        if waiter is not None:
            ctx.reply(waiter, sync_response(error))
