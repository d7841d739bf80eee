"""Committed offsets and the group admin APIs of the classic group coordinator: OffsetCommit,
OffsetFetch, TxnOffsetCommit and transaction ends, DescribeGroups, ListGroups, DeleteGroups,
OffsetDelete (Kafka's OffsetMetadataManager, and GroupMetadataManager's admin side). A part of
:class:`kcompat.group.coordinator.GroupCoordinator`, composed with the shared
:class:`kcompat.group.shard.GroupShardContext` and the few calls it needs of the classic
membership (member validation; a commit counts as a heartbeat), of the consumer group manager
(member epochs) and of the store (offset tombstones and group removal)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from kcompat.group import records as rec
from kcompat.group.coordinator_types import (
    log, EMPTY, PREPARING, COMPLETING, STABLE, DEAD, UNKNOWN_MEMBER_ID, NO_GENERATION, NO_OFFSET,
    GROUP_OPERATIONS, AUTHORIZED_OPERATIONS_OMITTED, Record, Result, _Api,
    TXN_GENERIC_ERROR_MIN_VERSION, TXN_VERIFY_ERRORS,
)
from kcompat.group.model import CONSUMER_PROTOCOL_TYPE, Group
from kcompat.coordinator.java_strings import java_string_length
from kcompat.group.records import OffsetAndMetadata
from kcompat.group.shard import GroupShardContext
from kcompat.protocol.errors import ErrorCode, txn_abortable_error
from kcompat.protocol.messages.delete_groups import DeleteGroupsResponse
from kcompat.protocol.messages.describe_groups import DescribeGroupsResponse
from kcompat.protocol.messages.list_groups import ListGroupsResponse
from kcompat.protocol.messages.offset_commit import OffsetCommitResponse
from kcompat.protocol.messages.offset_delete import OffsetDeleteResponse
from kcompat.protocol.messages.offset_fetch import OffsetFetchResponse
from kcompat.protocol.messages.txn_offset_commit import TxnOffsetCommitResponse

if TYPE_CHECKING:  # pragma: no cover
    from kcompat.group.consumer_groups import ConsumerGroupManager
    from kcompat.group.membership import ClassicGroupManager
    from kcompat.group.storage import GroupStore


class OffsetManager:
    """Offsets and the group admin APIs of the groups of :class:`GroupShardContext`.

    ``txn_verifier(transactional_id, producer_id, producer_epoch, partition)`` checks that the
    ``__consumer_offsets`` partition is in the producer's ongoing transaction before a
    TxnOffsetCommit is written (KIP-890 verification): 0, or the error a produce would get."""

    def __init__(self, ctx: GroupShardContext, store: "GroupStore", classic: "ClassicGroupManager",
                 consumer_groups: "ConsumerGroupManager",
                 txn_verifier: Callable[[str, int, int, int], int] | None = None) -> None:
        self.ctx = ctx
        self.store = store
        self.classic = classic
        self.consumer_groups = consumer_groups
        self._txn_verifier = txn_verifier

    # ------------------------------------------------------------------------------------------
    # OffsetCommit and OffsetFetch
    # ------------------------------------------------------------------------------------------

    def _existing_partitions(self, topics) -> tuple[list[list[ErrorCode | None]], list]:
        """For the topics of an OffsetCommit / TxnOffsetCommit: per topic and partition, None or
        UNKNOWN_TOPIC_OR_PARTITION; and the ``(topic index, partition index, topic name,
        partition)`` of the partitions that exist."""
        codes: list[list[ErrorCode | None]] = []
        valid = []
        for ti, topic in enumerate(topics):
            row: list[ErrorCode | None] = []
            for pi, p in enumerate(topic.partitions):
                if self.ctx.partition_exists(topic.name, p.partition_index):
                    row.append(None)
                    valid.append((ti, pi, topic.name, p))
                else:
                    row.append(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            codes.append(row)
        return codes, valid

    def offset_commit(self, reply_to, req, version: int, now_ms: int) -> Result:
        self.ctx.begin(now_ms)
        generation = req.generation_id_or_member_epoch if version >= 1 else NO_GENERATION
        member_id = (req.member_id or UNKNOWN_MEMBER_ID) if version >= 1 else UNKNOWN_MEMBER_ID
        instance_id = req.group_instance_id if version >= 7 else None
        retention = req.retention_time_ms if 2 <= version <= 4 else -1
        codes, valid = self._existing_partitions(req.topics)
        if valid:
            error, group = self._validate_commit(req.group_id, generation, member_id, instance_id, version,
                                                 [(name, p.partition_index) for _, _, name, p in valid])
            if error is not None:
                for ti, pi, _, _ in valid:
                    codes[ti][pi] = error
            else:
                self._commit(req.group_id, group, member_id, valid, codes, version, retention)
        response = OffsetCommitResponse(throttle_time_ms=0, topics=[
            OffsetCommitResponse.OffsetCommitResponseTopic(name=topic.name, partitions=[
                OffsetCommitResponse.OffsetCommitResponsePartition(partition_index=p.partition_index,
                                                                   error_code=int(codes[ti][pi]))
                for pi, p in enumerate(topic.partitions)])
            for ti, topic in enumerate(req.topics)])
        self.ctx.reply((reply_to, version), response)
        return self.ctx.end(now_ms)

    def _validate_commit(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                         version: int, partitions=()) -> tuple[ErrorCode | None, Group | None]:
        """ClassicGroup.validateOffsetCommit (ConsumerGroup's, StreamsGroup's for those groups;
        ``partitions``: the committed ``(topic, partition)``s); (None, None) means a commit that
        creates the group."""
        error = self.ctx.check_group(group_id, _Api.COMMIT)
        if error is not None:
            return error, None
        group = self.ctx.groups.get(group_id)
        if group is None:
            if generation < 0:
                return None, None  # a group using Kafka only to store offsets
            # OffsetCommit v9+ says so; older versions keep ILLEGAL_GENERATION
            return (ErrorCode.GROUP_ID_NOT_FOUND if version >= 9 else ErrorCode.ILLEGAL_GENERATION), None
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if group.share is not None:   # ShareGroup.validateOffsetCommit
            return ErrorCode.GROUP_ID_NOT_FOUND, None
        if group.epoch_membership is not None:
            error = self._validate_member_epoch(group, member_id, generation, version, partitions,
                                                transactional=False)
            return error, (None if error is not None else group)
        if generation < 0 and group.is_(EMPTY):
            return None, group
        if generation >= 0 or member_id != UNKNOWN_MEMBER_ID or instance_id is not None:
            error = self.classic.validate_member(group, member_id, instance_id)
            if error is not None:
                return error, None
            if generation != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION, None
        elif not group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        if group.is_(COMPLETING):
            # the member has its new generation but not yet its assignment
            return ErrorCode.REBALANCE_IN_PROGRESS, None
        return None, group

    def _commit(self, group_id: str, group: Group | None, member_id: str, valid, codes, version: int,
                retention: int) -> None:
        if group is not None and group.state in (STABLE, PREPARING) and group.has(member_id):
            # a commit is as good as a heartbeat (PreparingRebalance still accepts commits: the
            # member learns of the rebalance from its next heartbeat)
            self.classic.schedule_heartbeat(group, group.members[member_id])
        now = self.ctx.now
        expire = None if retention == -1 else now + retention
        writes = []
        for ti, pi, topic, p in valid:
            metadata = p.committed_metadata if p.committed_metadata is not None else ""
            if java_string_length(metadata) > self.ctx.config.offset_metadata_max_bytes:
                codes[ti][pi] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            codes[ti][pi] = ErrorCode.NONE
            commit_ts = p.commit_timestamp if version == 1 and p.commit_timestamp != -1 else now
            epoch = p.committed_leader_epoch if version >= 6 else rec.NO_LEADER_EPOCH
            writes.append((topic, p.partition_index, OffsetAndMetadata(p.committed_offset, epoch, metadata,
                                                                       commit_ts, expire)))
        if not writes:
            return
        if group is None:
            group = self.ctx.new_group(group_id)
        for topic, partition, om in writes:
            group.pending_commits[(topic, partition)] += 1
            self.ctx.emit(group.partition, rec.offset_commit_key(group_id, topic, partition),
                       rec.offset_commit_value(om), applied=False)

    # ------------------------------------------------------------------------------------------
    # TxnOffsetCommit and the end of transactions
    # ------------------------------------------------------------------------------------------

    def txn_offset_commit(self, reply_to, req, version: int, now_ms: int) -> Result:
        """TxnOffsetCommit 0-4: offsets committed as part of the producer's transaction
        (``send_offsets_to_transaction``). The records go in a transactional batch of the
        producer; they become visible when the transaction commits (:meth:`complete_txn`)."""
        self.ctx.begin(now_ms)
        # v3+ (KIP-447) carry the consumer's group metadata; older versions none
        generation = req.generation_id if version >= 3 else NO_GENERATION
        member_id = (req.member_id or UNKNOWN_MEMBER_ID) if version >= 3 else UNKNOWN_MEMBER_ID
        instance_id = req.group_instance_id if version >= 3 else None
        codes, valid = self._existing_partitions(req.topics)
        if valid:
            error = self.ctx.check_group(req.group_id, _Api.TXN_COMMIT)
            group = None
            if error is None:
                error = self._verify_txn(req.transactional_id, req.producer_id, req.producer_epoch,
                                         self.ctx.partition_for(req.group_id), version)
            if error is None:
                error, group = self._validate_txn_commit(req.group_id, generation, member_id, instance_id,
                                                         [(name, p.partition_index) for _, _, name, p in valid])
            if error is not None:
                for ti, pi, _, _ in valid:
                    codes[ti][pi] = error
            else:
                self._txn_commit(req.group_id, group, req.producer_id, req.producer_epoch, valid, codes, version)
        R = TxnOffsetCommitResponse
        self.ctx.reply((reply_to, version), R(throttle_time_ms=0, topics=[
            R.TxnOffsetCommitResponseTopic(name=topic.name, partitions=[
                R.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=int(codes[ti][pi]))
                for pi, p in enumerate(topic.partitions)])
            for ti, topic in enumerate(req.topics)]))
        return self.ctx.end(now_ms)

    def _verify_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                    partition: int, version: int) -> ErrorCode | None:
        """The KIP-890 refusal as a TxnOffsetCommit of ``version`` answers it (TRANSACTION_ABORTABLE
        from v4 on, INVALID_TXN_STATE before), or None."""
        if self._txn_verifier is None:
            return None
        code = self._txn_verifier(transactional_id, producer_id, producer_epoch, partition)
        if not code:
            return None
        error = ErrorCode(code)
        return ErrorCode(txn_abortable_error(TXN_VERIFY_ERRORS.get(error, error),
                                             version >= TXN_GENERIC_ERROR_MIN_VERSION))

    def _validate_member_epoch(self, group: Group, member_id: str, epoch: int, version: int, partitions,
                               *, transactional: bool) -> ErrorCode | None:
        """The commit of ``partitions`` ``[(topic, partition)]`` by a member of a consumer or
        streams group with ``epoch`` (their ``validate_offset_commit``, per partition or task
        as KIP-1251 and KIP-1071 check it), or None."""
        if group.consumer is not None:
            topics = self.consumer_groups.topics
            ids = {}
            for name, _ in partitions:
                if name not in ids:
                    info = topics.topic(name)
                    ids[name] = None if info is None else info.topic_id
            return group.consumer.validate_offset_commit(member_id, epoch, version, transactional=transactional,
                                                         partitions=[(ids[n], p) for n, p in partitions])
        return group.streams.validate_offset_commit(member_id, epoch, version, transactional=transactional,
                                                    topics=partitions)

    def _validate_txn_commit(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                             partitions=()) -> tuple[ErrorCode | None, Group | None]:
        """ClassicGroup.validateOffsetCommit for a transactional commit (Kafka's
        OffsetMetadataManager.validateTransactionalOffsetCommit): the generation, member id and
        instance id are checked only when one of them is given (KIP-447, v3+); no member
        requirement otherwise, and no REBALANCE_IN_PROGRESS. (None, None) creates the group.
        A consumer or streams group member's epoch is checked for the committed ``partitions``
        ``[(topic, partition)]``, and a stale one is ILLEGAL_GENERATION, the error a transactional
        producer expects (Kafka maps StaleMemberEpochException so)."""
        group = self.ctx.groups.get(group_id)
        if group is None:
            return (None, None) if generation < 0 else (ErrorCode.ILLEGAL_GENERATION, None)
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if group.share is not None:   # ShareGroup.validateOffsetCommit
            return ErrorCode.GROUP_ID_NOT_FOUND, None
        if group.epoch_membership is not None:
            error = self._validate_member_epoch(group, member_id, generation, 9, partitions, transactional=True)
            if error == ErrorCode.STALE_MEMBER_EPOCH:
                error = ErrorCode.ILLEGAL_GENERATION
            return error, (None if error is not None else group)
        if generation < 0 and group.is_(EMPTY):
            return None, group
        if generation >= 0 or member_id != UNKNOWN_MEMBER_ID or instance_id is not None:
            error = self.classic.validate_member(group, member_id, instance_id)
            if error is not None:
                return error, None
            if generation != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION, None
        return None, group

    def _txn_commit(self, group_id: str, group: Group | None, producer_id: int, producer_epoch: int, valid,
                    codes, version: int) -> None:
        now = self.ctx.now
        writes = []
        for ti, pi, topic, p in valid:
            metadata = p.committed_metadata if p.committed_metadata is not None else ""
            if java_string_length(metadata) > self.ctx.config.offset_metadata_max_bytes:
                codes[ti][pi] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            codes[ti][pi] = ErrorCode.NONE
            epoch = p.committed_leader_epoch if version >= 2 else rec.NO_LEADER_EPOCH
            writes.append((topic, p.partition_index, OffsetAndMetadata(p.committed_offset, epoch, metadata, now)))
        if not writes:
            return
        if group is None:
            group = self.ctx.new_group(group_id)
        for topic, partition, om in writes:
            group.pending_commits[(topic, partition)] += 1
            self.ctx.emit_record(Record(group.partition, rec.offset_commit_key(group_id, topic, partition),
                                        rec.offset_commit_value(om), producer_id, producer_epoch))

    def complete_txn(self, partition: int, producer_id: int, commit: bool, now_ms: int) -> Result:
        """The COMMIT or ABORT marker of ``producer_id``'s transaction was written to
        ``__consumer_offsets``-``partition`` (Kafka's handleTxnCompletion / replay of the end
        transaction marker): its transactional offsets there become committed, unless a later
        record committed the same partition, or are dropped. The marker is the record: nothing
        is written."""
        self.ctx.begin(now_ms)
        state = self.ctx.loading.get(partition)
        if state is not None:
            self.store.apply_loading_marker(state, producer_id, commit)
        elif partition in self.ctx.owned:
            for group_id in sorted(self.ctx.open_txns.pop((partition, producer_id), ())):
                group = self.ctx.groups.get(group_id)
                if group is None or group.partition != partition or producer_id not in group.pending_txn:
                    continue
                n = group.complete_txn(producer_id, commit)
                log.debug("group %s: transaction of producer %d %s, %d offsets committed", group_id, producer_id,
                          "committed" if commit else "aborted", n)
                self.store.maybe_drop_offsets_only_group(group)
        return self.ctx.end(now_ms)

    def offset_fetch(self, reply_to, req, version: int, now_ms: int) -> Result:
        self.ctx.begin(now_ms)
        R = OffsetFetchResponse
        # KIP-447 (v7+): with require_stable, partitions with transactional offsets waiting for
        # their transaction answer UNSTABLE_OFFSET_COMMIT (the consumer retries)
        require_stable = version >= 7 and bool(req.require_stable)
        if version >= 8:
            groups = []
            for g in req.groups:
                wanted = None if g.topics is None else [(t.name, list(t.partition_indexes)) for t in g.topics]
                member = (g.member_id, g.member_epoch) if version >= 9 else (None, -1)
                error, topics = self._fetch_offsets(g.group_id, wanted, require_stable, member)
                groups.append(R.OffsetFetchResponseGroup(group_id=g.group_id, error_code=int(error or 0), topics=[
                    R.OffsetFetchResponseTopics(name=name, partitions=[
                        R.OffsetFetchResponsePartitions(partition_index=p, committed_offset=o, committed_leader_epoch=e,
                                                        metadata=md, error_code=int(pe))
                        for p, o, e, md, pe in parts])
                    for name, parts in topics]))
            response = R(throttle_time_ms=0, groups=groups)
        else:
            wanted = None if req.topics is None else [(t.name, list(t.partition_indexes)) for t in req.topics]
            error, topics = self._fetch_offsets(req.group_id, wanted, require_stable)
            if error is not None and version < 2:
                # no top-level error before v2: every requested partition carries it
                topics = [(name, [(p, NO_OFFSET, rec.NO_LEADER_EPOCH, "", error) for p in parts])
                          for name, parts in wanted or ()]
            response = R(throttle_time_ms=0, error_code=int(error or 0) if version >= 2 else 0, topics=[
                R.OffsetFetchResponseTopic(name=name, partitions=[
                    R.OffsetFetchResponsePartition(partition_index=p, committed_offset=o, committed_leader_epoch=e,
                                                   metadata=md, error_code=int(pe))
                    for p, o, e, md, pe in parts])
                for name, parts in topics])
        self.ctx.reply((reply_to, version), response)
        return self.ctx.end(now_ms)

    def _fetch_offsets(self, group_id: str, wanted: list[tuple[str, list[int]]] | None, require_stable: bool,
                       member: tuple[str | None, int] = (None, -1)):
        """(group error or None, [(topic, [(partition, offset, leader epoch, metadata, error)])]).
        Missing offsets are -1 with no error; ``wanted`` None means every committed offset (v2+).
        Transactional offsets are never returned: without ``require_stable`` a partition gives
        its last committed offset, with it UNSTABLE_OFFSET_COMMIT while a transaction has offsets
        pending there (Kafka's OffsetMetadataManager.fetchOffsets / fetchAllOffsets)."""
        error = self.ctx.check_group(group_id, _Api.FETCH)
        if error is not None:
            return error, []
        group = self.ctx.groups.get(group_id)
        live = group is not None and not group.is_(DEAD)
        if live and group.share is not None:   # ShareGroup.validateOffsetFetch
            return ErrorCode.GROUP_ID_NOT_FOUND, []
        if live and group.epoch_membership is not None:
            error = group.epoch_membership.validate_offset_fetch(*member)
            if error is not None:
                return error, []
        offsets = group.offsets if live else {}
        unstable = group.pending_txn_partitions() if live and require_stable and group.pending_txn else set()

        def entry(tp: tuple[str, int], om: OffsetAndMetadata | None):
            if tp in unstable:
                return (tp[1], NO_OFFSET, rec.NO_LEADER_EPOCH, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)
            if om is None:
                return (tp[1], NO_OFFSET, rec.NO_LEADER_EPOCH, "", ErrorCode.NONE)
            return (tp[1], om.offset, om.leader_epoch, om.metadata, ErrorCode.NONE)

        if wanted is None:
            by_topic: dict[str, list] = {}
            for tp, om in offsets.items():
                by_topic.setdefault(tp[0], []).append(entry(tp, om))
            return None, list(by_topic.items())
        return None, [(topic, [entry((topic, p), offsets.get((topic, p))) for p in partitions])
                      for topic, partitions in wanted]

    # ------------------------------------------------------------------------------------------
    # DescribeGroups, ListGroups, DeleteGroups, OffsetDelete
    # ------------------------------------------------------------------------------------------

    def describe_groups(self, reply_to, req, version: int, now_ms: int) -> Result:
        """Kafka 4.3.1's ``GroupMetadataManager.describeGroups``."""
        self.ctx.begin(now_ms)
        D = DescribeGroupsResponse
        ops = GROUP_OPERATIONS if version >= 3 and req.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
        described = []
        for group_id in req.groups:
            error = self.ctx.check_group(group_id, _Api.DESCRIBE)
            group = self.ctx.groups.get(group_id) if error is None else None
            if error is not None:
                described.append(D.DescribedGroup(error_code=int(error), group_id=group_id, group_state="",
                                                  protocol_type="", protocol_data="", members=[],
                                                  authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
            elif group is None or group.consumer is not None or group.share is not None or group.streams is not None:
                # a consumer or share group is not a classic group: Kafka describes it as Dead
                # here (the admin client asks ConsumerGroupDescribe / ShareGroupDescribe first);
                # from v6 with GROUP_ID_NOT_FOUND and the reason (KIP-1043)
                described.append(_not_a_classic_group(group_id, group, version, ops))
            else:
                stable = group.is_(STABLE)
                members = [D.DescribedGroupMember(
                    member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata(group.protocol_name) if stable else b"",
                    member_assignment=m.assignment if stable else b"") for m in group.members.values()]
                described.append(D.DescribedGroup(
                    error_code=0, group_id=group_id, group_state=str(group.state),
                    protocol_type=group.protocol_type or "",
                    protocol_data=(group.protocol_name or "") if stable else "",
                    members=members, authorized_operations=ops))
        self.ctx.reply((reply_to, version), D(throttle_time_ms=0, groups=described))
        return self.ctx.end(now_ms)

    def list_groups(self, reply_to, req, version: int, now_ms: int) -> Result:
        self.ctx.begin(now_ms)
        L = ListGroupsResponse
        if not self.ctx.active:
            response = L(throttle_time_ms=0, error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), groups=[])
        else:
            states = {s.lower() for s in (req.states_filter or ())} if version >= 4 else set()
            types = {t.lower() for t in (req.types_filter or ())} if version >= 5 else set()
            error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.ctx.loading else ErrorCode.NONE
            listed = []
            for group in self.ctx.groups.values():
                typed = group.share or group.streams or group.consumer
                state = str(group.state) if typed is None else typed.state.value
                if (types and group.type_name not in types) or (states and state.lower() not in states):
                    continue
                listed.append(L.ListedGroup(group_id=group.group_id, protocol_type=group.protocol_type or "",
                                            group_state=state, group_type=group.type_name))
            response = L(throttle_time_ms=0, error_code=int(error), groups=listed)
        self.ctx.reply((reply_to, version), response)
        return self.ctx.end(now_ms)

    def delete_groups(self, reply_to, req, version: int, now_ms: int) -> Result:
        self.ctx.begin(now_ms)
        results: dict[str, ErrorCode] = {}
        for group_id in req.groups_names:
            if group_id in results:
                continue
            error = self.ctx.check_group(group_id, _Api.DELETE)
            if error is None:
                group = self.ctx.groups.get(group_id)
                if group is None or group.is_(DEAD):
                    error = ErrorCode.GROUP_ID_NOT_FOUND
                elif group.is_(EMPTY) and not group.has_live_members():
                    log.info("group %s: deleted with %d committed offsets", group_id, len(group.offsets))
                    self.store.cleanup_group(group, group.offset_partitions(), force_dead=True)
                    error = ErrorCode.NONE
                else:
                    error = ErrorCode.NON_EMPTY_GROUP
            results[group_id] = error
        self.ctx.reply((reply_to, version), DeleteGroupsResponse(throttle_time_ms=0, results=[
            DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=int(e)) for g, e in results.items()]))
        return self.ctx.end(now_ms)

    def offset_delete(self, reply_to, req, version: int, now_ms: int) -> Result:
        self.ctx.begin(now_ms)
        O = OffsetDeleteResponse
        codes: dict[tuple[str, int], ErrorCode] = {}
        candidates = []
        for topic in req.topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if self.ctx.partition_exists(*tp):
                    candidates.append(tp)
                else:
                    codes[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        error = self.ctx.check_group(req.group_id, _Api.OFFSET_DELETE)
        group = self.ctx.groups.get(req.group_id) if error is None else None
        if error is None:
            if group is None or group.is_(DEAD) or group.share is not None:
                error = ErrorCode.GROUP_ID_NOT_FOUND   # ShareGroup.validateOffsetDelete
            elif group.is_(EMPTY) and not group.has_live_members():
                eligible = candidates
            elif group.epoch_membership is not None:
                subscribed = group.epoch_membership.subscribed_names()
                eligible = []
                for tp in candidates:
                    if tp[0] in subscribed:
                        codes[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                    else:
                        eligible.append(tp)
            elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
                eligible = []
                for tp in candidates:
                    if group.is_subscribed_to(tp[0]):
                        codes[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                    else:
                        eligible.append(tp)
            else:
                error = ErrorCode.NON_EMPTY_GROUP
        if error is not None:
            response = O(error_code=int(error), throttle_time_ms=0, topics=[])
        else:
            known = group.offset_partitions()
            removed = {tp for tp in eligible if tp in known}
            for tp in eligible:
                codes[tp] = ErrorCode.NONE
            if removed:
                log.info("group %s: offsets deleted for %s", group.group_id, sorted(removed))
            # the group stays, even empty and without offsets, until the periodic cleanup: Kafka
            # 4.3's OffsetMetadataManager.deleteOffsets writes only the offsets' tombstones
            self.store.delete_offsets(group, removed)
            topics = []
            for topic in req.topics:
                parts = list(dict.fromkeys(p.partition_index for p in topic.partitions))
                topics.append(O.OffsetDeleteResponseTopic(name=topic.name, partitions=[
                    O.OffsetDeleteResponsePartition(partition_index=p, error_code=int(codes[(topic.name, p)]))
                    for p in parts]))
            response = O(error_code=0, throttle_time_ms=0, topics=topics)
        self.ctx.reply((reply_to, version), response)
        return self.ctx.end(now_ms)


GROUP_ID_NOT_FOUND_MIN_VERSION = 6   # DescribeGroups v6: GROUP_ID_NOT_FOUND instead of a Dead group (KIP-1043)


def _not_a_classic_group(group_id: str, group: Group | None, version: int, ops: int):
    """DescribeGroups' answer for a group that does not exist or is not a classic one: Dead, and
    from v6 GROUP_ID_NOT_FOUND with the message of Kafka 4.3.1's ``GroupIdNotFoundException``
    (no authorized operations then)."""
    D = DescribeGroupsResponse
    if version < GROUP_ID_NOT_FOUND_MIN_VERSION:
        return D.DescribedGroup(error_code=0, group_id=group_id, group_state=str(DEAD), protocol_type="",
                                protocol_data="", members=[], authorized_operations=ops)
    message = f"Group {group_id} not found." if group is None else f"Group {group_id} is not a classic group."
    return D.DescribedGroup(error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=message, group_id=group_id,
                            group_state=str(DEAD), protocol_type="", protocol_data="", members=[],
                            authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
