"""The group coordinator's part of the KIP-932 share-group admin APIs (Kafka 4.3's
GroupCoordinatorShard / GroupMetadataManager, share half): DescribeShareGroupOffsets (the
initialized partitions of a group), AlterShareGroupOffsets, DeleteShareGroupOffsets and DeleteGroups
of share groups.

Each of these APIs is a chain, as Kafka's GroupCoordinatorService runs it: a coordinator step, then
the share coordinator (Initialize/Delete/ReadSummary share group state, through the broker's
persister), then, for some, another coordinator step. The broker runtime
(:mod:`kcompat.broker.share_group_admin`) does the persister calls; the steps here are pure. Each
returns a :class:`Result` whose records describe changes already applied (as share groups do, see
:mod:`kcompat.group.share_groups`) and whose one reply is a *plan*: a small Struct that says what
the runtime does next. A plan is a Struct with an ``error_code`` so that a failed
``__consumer_offsets`` write turns it into the coordinator error (:mod:`kcompat.group.write_errors`).

The steps, with Kafka's errors (``GROUP_ID_NOT_FOUND`` "Group X not found." / "Group X is not a
share group.", ``NON_EMPTY_GROUP`` "The group is not empty.", and the coordinator's
NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE / INVALID_GROUP_ID):

- :meth:`ShareAdmin.initialized_partitions`: the share partitions whose state a group has
  (``initializedShareGroupPartitions``; nothing, and no error, for an unknown group or one of
  another type, as Kafka).
- :meth:`ShareAdmin.alter_offsets` / :meth:`ShareAdmin.complete_alter`: an empty share group
  (created if missing, KAFKA-19662) gets the requested start offsets. Step one checks the group
  and topics (UNKNOWN_TOPIC_OR_PARTITION per partition) and bumps the group epoch (a
  ShareGroupMetadata record) so that the state is initialized with a state epoch above any a
  share-partition leader holds (KIP-932's Administration section, KAFKA-20910); the runtime then
  sends InitializeShareGroupState with that epoch; step three records the partitions as
  initialized (ShareGroupStatePartitionMetadata).
- :meth:`ShareAdmin.delete_offsets` / :meth:`ShareAdmin.complete_delete_offsets`
  (``initiateDeleteShareGroupOffsets`` / ``completeDeleteShareGroupOffsets``): the topics move
  from initialized to deleting; after DeleteShareGroupState they leave deleting.
- :meth:`ShareAdmin.share_group_deletions` (``sharePartitionDeleteRequests``): for DeleteGroups,
  each empty share group's initialized (and still deleting) partitions move to deleting and are
  returned for DeleteShareGroupState; the group itself is then deleted by the usual DeleteGroups.
"""

from __future__ import annotations

import logging
import uuid

from kcompat.group import share_group_records as srec
from kcompat.group.consumer_group import TopicsView
from kcompat.group.coordinator_types import Result, _Api
from kcompat.group.model import Group
from kcompat.group.shard import GroupShardContext
from kcompat.group.share_groups import ShareGroupManager
from kcompat.protocol._gen_support import Struct
from kcompat.protocol.errors import ErrorCode, default_message
from kcompat.protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsResponse as AR
from kcompat.protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsResponse as DR

log = logging.getLogger("kcompat.group")

ZERO_UUID = uuid.UUID(int=0)
NO_OFFSET_INFO = "There is no offset information to delete."   # sharePartitionsEligibleForOffsetDeletion


class InitializedPlan(Struct):
    """Reply of :meth:`ShareAdmin.initialized_partitions`: ``topics`` {topic id: sorted partitions}."""

    __slots__ = ("error_code", "error_message", "topics")

    def __init__(self, error_code: int = 0, error_message: str | None = None, topics: dict | None = None) -> None:
        self.error_code = error_code
        self.error_message = error_message
        self.topics = topics or {}


class AlterPlan(Struct):
    """Reply of :meth:`ShareAdmin.alter_offsets`: the response so far (per-partition results of
    the coordinator's checks), the state epoch to initialize with, and ``offsets`` {topic id:
    (topic name, {partition: start offset})} to initialize."""

    __slots__ = ("error_code", "error_message", "response", "state_epoch", "offsets")

    def __init__(self, error_code: int = 0, error_message: str | None = None, response: AR | None = None,
                 state_epoch: int = 0, offsets: dict | None = None) -> None:
        self.error_code = error_code
        self.error_message = error_message
        self.response = response
        self.state_epoch = state_epoch
        self.offsets = offsets or {}


class DeleteOffsetsPlan(Struct):
    """Reply of :meth:`ShareAdmin.delete_offsets`: topics that failed the coordinator's checks
    (``error_topics``, response topics) and ``delete`` {topic id: (name, sorted partitions)} whose
    share state is to be deleted."""

    __slots__ = ("error_code", "error_message", "error_topics", "delete")

    def __init__(self, error_code: int = 0, error_message: str | None = None, error_topics: list | None = None,
                 delete: dict | None = None) -> None:
        self.error_code = error_code
        self.error_message = error_message
        self.error_topics = error_topics if error_topics is not None else []
        self.delete = delete or {}


class GroupDeletionPlan(Struct):
    """Reply of :meth:`ShareAdmin.share_group_deletions`: ``groups`` {group id: (ErrorCode,
    {topic id: sorted partitions})} for the share groups among those asked (groups of other
    types or unknown ones are absent: the usual DeleteGroups answers them)."""

    __slots__ = ("error_code", "groups")

    def __init__(self, error_code: int = 0, groups: dict | None = None) -> None:
        self.error_code = error_code
        self.groups = groups or {}


class Ack(Struct):
    """Reply of a completing step: NONE once its records are committed, else the coordinator error."""

    __slots__ = ("error_code", "response")

    def __init__(self, error_code: int = 0, response=None) -> None:
        self.error_code = error_code
        self.response = response


class ShareAdmin:
    """The share-group admin steps of one group coordinator. ``topics`` is the metadata image
    as the coordinator sees it (names, ids, partition counts)."""

    def __init__(self, ctx: GroupShardContext, share_groups: ShareGroupManager, topics: TopicsView) -> None:
        self.ctx = ctx
        self.share_groups = share_groups
        self.topics = topics

    # ------------------------------------------------------------------------------------------
    # helpers
    # ------------------------------------------------------------------------------------------

    def _share_group(self, group_id: str) -> tuple[Group | None, str | None]:
        """GroupMetadataManager.shareGroup: ``(group, None)`` or ``(None, GROUP_ID_NOT_FOUND message)``."""
        group = self.ctx.groups.get(group_id)
        if group is None:
            return None, f"Group {group_id} not found."
        if group.share is None:
            return None, f"Group {group_id} is not a share group."
        return group, None

    def _write_state_metadata(self, group: Group) -> None:
        sg = group.share
        self.ctx.emit(group.partition, srec.key(srec.STATE_PARTITION_METADATA, group.group_id),
                      srec.state_partition_metadata_value(sg.initialized, sg.deleting), applied=True)

    def _reply(self, reply_to, plan, now_ms: int) -> Result:
        self.ctx.reply((reply_to, 0), plan)
        return self.ctx.end(now_ms)

    # ------------------------------------------------------------------------------------------
    # DescribeShareGroupOffsets (all topics)
    # ------------------------------------------------------------------------------------------

    def initialized_partitions(self, reply_to, group_id: str, now_ms: int) -> Result:
        """Kafka's initializedShareGroupPartitions: the reply's ``topics`` {topic id: sorted
        partitions}, empty for an unknown group or a group of another type."""
        self.ctx.begin(now_ms)
        error = self.ctx.check_group(group_id, _Api.DESCRIBE)
        if error is not None:
            return self._reply(reply_to, InitializedPlan(int(error), default_message(error)), now_ms)
        group = self.ctx.groups.get(group_id)
        topics = {}
        if group is not None and group.share is not None:
            topics = {tid: sorted(ps) for tid, (_name, ps) in group.share.initialized.items()}
        return self._reply(reply_to, InitializedPlan(topics=topics), now_ms)

    # ------------------------------------------------------------------------------------------
    # AlterShareGroupOffsets
    # ------------------------------------------------------------------------------------------

    def alter_offsets(self, reply_to, req, now_ms: int) -> Result:
        """Step one of AlterShareGroupOffsets v0 (GroupMetadataManager.alterShareGroupOffsets):
        the group (created if it does not exist) must be an empty share group; partitions of
        topics the metadata image lacks, or beyond their partition count, get
        UNKNOWN_TOPIC_OR_PARTITION; the others are to be initialized at the requested start
        offset with the group's new epoch. Response topics: unknown topics first (KafkaApis
        answers them before the coordinator), then the known ones, in request order."""
        self.ctx.begin(now_ms)
        group_id = req.group_id
        error = self.ctx.check_group(group_id, _Api.SHARE_DESCRIBE)
        if error is not None:
            return self._reply(reply_to, AlterPlan(int(error), default_message(error)), now_ms)
        existed = group_id in self.ctx.groups
        group, why = self.share_groups.get_or_create(group_id, create=True)
        if group is None:
            return self._reply(reply_to, AlterPlan(int(ErrorCode.GROUP_ID_NOT_FOUND), why), now_ms)
        sg = group.share
        if sg.members:
            busy = ErrorCode.NON_EMPTY_GROUP
            return self._reply(reply_to, AlterPlan(int(busy), default_message(busy)), now_ms)
        unknown_msg = default_message(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        unknown, known = [], []
        offsets: dict[uuid.UUID, tuple[str, dict[int, int]]] = {}
        for t in req.topics:
            info = self.topics.topic(t.topic_name)
            if info is None:
                unknown.append(AR.AlterShareGroupOffsetsResponseTopic(
                    topic_name=t.topic_name, topic_id=ZERO_UUID, partitions=[
                        AR.AlterShareGroupOffsetsResponsePartition(
                            partition_index=p.partition_index, error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                            error_message=unknown_msg) for p in t.partitions]))
                continue
            parts = []
            for p in t.partitions:
                if p.partition_index < info.num_partitions:
                    parts.append(AR.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index,
                                                                            error_code=0))
                    offsets.setdefault(info.topic_id, (t.topic_name, {}))[1][p.partition_index] = p.start_offset
                else:
                    parts.append(AR.AlterShareGroupOffsetsResponsePartition(
                        partition_index=p.partition_index, error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                        error_message=unknown_msg))
            known.append(AR.AlterShareGroupOffsetsResponseTopic(topic_name=t.topic_name, topic_id=info.topic_id,
                                                                partitions=parts))
        if offsets:
            sg.group_epoch += 1
            self.ctx.emit(group.partition, srec.key(srec.GROUP_METADATA, group_id),
                          srec.group_metadata_value(sg.group_epoch, sg.metadata_hash), applied=True)
            log.info("share group %s: offsets of %d partition(s) altered at group epoch %d", group_id,
                     sum(len(o) for _n, o in offsets.values()), sg.group_epoch)
        elif not existed:
            # nothing to initialize: the group Kafka would have created is never persisted
            del self.ctx.groups[group_id]
        response = AR(throttle_time_ms=0, error_code=0, error_message=None, responses=unknown + known)
        return self._reply(reply_to, AlterPlan(response=response, state_epoch=sg.group_epoch, offsets=offsets), now_ms)

    def complete_alter(self, reply_to, group_id: str, initialized: dict, now_ms: int) -> Result:
        """Step three (GroupMetadataManager.initializeShareGroupState): ``initialized`` {topic id:
        (name, partitions)} whose state InitializeShareGroupState created join the group's
        initialized partitions and leave its deleting topics. Nothing if the group is gone."""
        self.ctx.begin(now_ms)
        error = self.ctx.check_group(group_id, _Api.SHARE_DESCRIBE)
        if error is not None:
            return self._reply(reply_to, Ack(int(error)), now_ms)
        group, _why = self._share_group(group_id)
        if group is not None and initialized:
            sg = group.share
            merged = dict(sg.initialized)
            for tid, (name, parts) in initialized.items():
                _n, have = merged.get(tid, (name, frozenset()))
                merged[tid] = (name, have | frozenset(parts))
            sg.initialized = merged
            sg.deleting = {tid: name for tid, name in sg.deleting.items() if tid not in initialized}
            self._write_state_metadata(group)
        return self._reply(reply_to, Ack(), now_ms)

    # ------------------------------------------------------------------------------------------
    # DeleteShareGroupOffsets
    # ------------------------------------------------------------------------------------------

    def delete_offsets(self, reply_to, req, now_ms: int) -> Result:
        """Step one of DeleteShareGroupOffsets v0 (initiateDeleteShareGroupOffsets): the group must
        be an empty share group; each requested topic with initialized partitions moves to the
        deleting topics (all its initialized partitions to delete); a topic already deleting is
        deleted again (all partitions); others get UNKNOWN_TOPIC_OR_PARTITION ("There is no offset
        information to delete." for a topic the group has no state of). A group that never
        recorded share-partition state answers no topics at all, as Kafka."""
        self.ctx.begin(now_ms)
        group_id = req.group_id
        error = self.ctx.check_group(group_id, _Api.SHARE_DESCRIBE)
        if error is not None:
            return self._reply(reply_to, DeleteOffsetsPlan(int(error), default_message(error)), now_ms)
        group, why = self._share_group(group_id)
        if group is None:
            return self._reply(reply_to, DeleteOffsetsPlan(int(ErrorCode.GROUP_ID_NOT_FOUND), why), now_ms)
        sg = group.share
        if sg.members:
            return self._reply(reply_to, DeleteOffsetsPlan(int(ErrorCode.NON_EMPTY_GROUP),
                                                           default_message(ErrorCode.NON_EMPTY_GROUP)), now_ms)
        if not sg.initialized and not sg.deleting:
            return self._reply(reply_to, DeleteOffsetsPlan(), now_ms)
        errors, delete = [], {}
        initialized, deleting = dict(sg.initialized), dict(sg.deleting)
        for t in req.topics:
            info = self.topics.topic(t.topic_name)
            if info is None:
                errors.append(DR.DeleteShareGroupOffsetsResponseTopic(
                    topic_name=t.topic_name, error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                    error_message=default_message(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
            elif info.topic_id in initialized:
                _name, parts = initialized.pop(info.topic_id)
                delete[info.topic_id] = (t.topic_name, sorted(parts))
                deleting[info.topic_id] = t.topic_name
            elif info.topic_id in deleting:
                delete[info.topic_id] = (t.topic_name, list(range(info.num_partitions)))
            else:
                errors.append(DR.DeleteShareGroupOffsetsResponseTopic(
                    topic_name=t.topic_name, error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                    error_message=NO_OFFSET_INFO))
        sg.initialized, sg.deleting = initialized, deleting
        self._write_state_metadata(group)
        return self._reply(reply_to, DeleteOffsetsPlan(error_topics=errors, delete=delete), now_ms)

    def complete_delete_offsets(self, reply_to, group_id: str, deleted: dict, now_ms: int) -> Result:
        """Step three (completeDeleteShareGroupOffsets): ``deleted`` {topic id: name} whose state
        DeleteShareGroupState removed leave the deleting topics. The reply's ``response`` lists
        them as DeleteShareGroupOffsets response topics with no error."""
        self.ctx.begin(now_ms)
        error = self.ctx.check_group(group_id, _Api.SHARE_DESCRIBE)
        if error is not None:
            return self._reply(reply_to, Ack(int(error)), now_ms)
        group, _why = self._share_group(group_id)
        if group is not None:
            group.share.deleting = {t: n for t, n in group.share.deleting.items() if t not in deleted}
            self._write_state_metadata(group)
        done = [DR.DeleteShareGroupOffsetsResponseTopic(topic_name=name, topic_id=tid, error_code=0,
                                                        error_message=None) for tid, name in deleted.items()]
        return self._reply(reply_to, Ack(response=done), now_ms)

    # ------------------------------------------------------------------------------------------
    # DeleteGroups
    # ------------------------------------------------------------------------------------------

    def share_group_deletions(self, reply_to, group_ids: list[str], now_ms: int) -> Result:
        """First step of DeleteGroups (GroupCoordinatorShard.sharePartitionDeleteRequests): for each
        share group among ``group_ids``, NON_EMPTY_GROUP if it has members, else its initialized
        partitions, and every partition of its deleting topics that still exist, move to deleting
        (one ShareGroupStatePartitionMetadata record) and are returned to have their state
        deleted. Unknown groups, groups of other types and groups this coordinator does not own
        are left to the usual DeleteGroups."""
        self.ctx.begin(now_ms)
        out: dict[str, tuple[ErrorCode, dict]] = {}
        for group_id in dict.fromkeys(group_ids):
            if not isinstance(group_id, str) or self.ctx.check_group(group_id, _Api.DELETE) is not None:
                continue
            group = self.ctx.groups.get(group_id)
            if group is None or group.share is None:
                continue
            sg = group.share
            if sg.members:
                out[group_id] = (ErrorCode.NON_EMPTY_GROUP, {})
                continue
            candidates: dict[uuid.UUID, tuple[str, frozenset[int]]] = dict(sg.initialized)
            for tid in sg.deleting:
                name = self.topics.name_of(tid)
                info = self.topics.topic(name) if name is not None else None
                if info is None:
                    log.warning("share group %s: deleting topic %s is not in the metadata image", group_id, tid)
                    continue
                _n, have = candidates.get(tid, (name, frozenset()))
                candidates[tid] = (name, have | frozenset(range(info.num_partitions)))
            if not sg.initialized and not sg.deleting:
                continue
            sg.initialized = {}
            sg.deleting = {tid: name for tid, (name, _ps) in candidates.items()}
            self._write_state_metadata(group)
            if candidates:
                out[group_id] = (ErrorCode.NONE, {tid: sorted(ps) for tid, (_n, ps) in candidates.items()})
        return self._reply(reply_to, GroupDeletionPlan(groups=out), now_ms)
