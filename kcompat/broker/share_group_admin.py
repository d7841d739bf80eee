"""The share-group admin APIs in the broker (KIP-932, Kafka 4.3's GroupCoordinatorService with its
persister calls): DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets, and
DeleteGroups, which deletes the share state of empty share groups before the groups themselves.

The group coordinator's steps are pure (:mod:`kcompat.group.share_admin`) and run on the
:class:`~kcompat.broker.group_runtime.GroupRuntime` (records committed before their reply); this
module chains them with the share coordinator through its ``persister``
(:class:`~kcompat.broker.share_persister.SharePersister`, which retries coordinator moves itself):

- DescribeShareGroupOffsets: the group's initialized partitions (or the requested ones), each
  partition's ReadShareGroupStateSummary, and (v1, KIP-1226) its lag: the partition's latest offset
  (ListOffsets LATEST, read_uncommitted: the high watermark) minus the start offset minus the
  delivery complete count. A partition without state answers start offset -1 and lag -1; a
  summary error is answered as no state (Kafka treats it as absence of data); a failed latest
  offset lookup is the partition's error (LEADER_NOT_AVAILABLE without a leader).
- AlterShareGroupOffsets: InitializeShareGroupState for each accepted partition at the new state
  epoch; its per-partition errors replace NONE in the response; the partitions it initialized are
  recorded as initialized.
- DeleteShareGroupOffsets: DeleteShareGroupState of each topic's partitions; a topic with a failed
  partition answers that error; the others complete.
- DeleteGroups: empty share groups first have their share state deleted; a group whose deletion
  failed answers that error and is kept (its partitions stay "deleting", retried by the next
  DeleteGroups); the rest go through the usual DeleteGroups.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from kcompat.broker.inter_broker import inter_broker_clients
from kcompat.broker.node_client import NodeClients, NodeConnectionError
from kcompat.protocol.errors import ErrorCode, KafkaError, default_message
from kcompat.protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsResponse as AR
from kcompat.protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from kcompat.protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsResponse as DR
from kcompat.protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsResponse as R
from kcompat.protocol.messages.list_offsets import ListOffsetsRequest

if TYPE_CHECKING:
    from kcompat.broker.coordinator_runtime import CoordinatorServices
    from kcompat.broker.share_persister import SharePersister

log = logging.getLogger("kcompat.group")

LATEST = -1                 # ListOffsets timestamp of the latest offset
LIST_OFFSETS_VERSION = 7
ZERO_UUID = uuid.UUID(int=0)


class ShareGroupAdmin:
    """The share-group admin APIs of a broker; ``runtime`` is its :class:`GroupRuntime`, whose
    :class:`CoordinatorServices` this uses too. ``persister`` (the broker's
    :class:`~kcompat.broker.share_persister.SharePersister`, the share coordinator's client) is set
    by the broker once it exists, before any request is served."""

    def __init__(self, runtime) -> None:
        self.runtime = runtime
        self.services: CoordinatorServices = runtime.services
        self.persister: SharePersister | None = None
        self._clients: NodeClients | None = None

    def close(self) -> None:
        if self._clients is not None:
            self._clients.close()
            self._clients = None

    async def _step(self, group_ids, op):
        """Run one coordinator step (``op(reply_to, now_ms)``) and return its plan; a write that
        failed or a partition unloaded meanwhile comes back as the plan's error code."""
        coordinator = self.runtime.coordinator
        try:
            return await self.runtime.run(op, {coordinator.partition_for(g) for g in group_ids})
        except KafkaError as e:
            return _Failed(int(e.code))

    # ------------------------------------------------------------------ DescribeShareGroupOffsets

    async def describe_offsets(self, ctx, req) -> R:
        """DescribeShareGroupOffsets v0-1: one result per requested group, in order."""
        groups = await asyncio.gather(*(self._describe_group(g) for g in req.groups))
        return R(throttle_time_ms=0, groups=list(groups))

    async def _describe_group(self, g) -> R.DescribeShareGroupOffsetsResponseGroup:
        G = R.DescribeShareGroupOffsetsResponseGroup
        coordinator = self.runtime.coordinator
        image = self.services.image
        unknown = []
        wanted: list[tuple[uuid.UUID, str, list[int]]] = []
        if g.topics is None:   # every partition the group has state of (describeShareGroupAllOffsets)
            plan = await self._step([g.group_id], lambda reply_to, now: coordinator.share_initialized_partitions(
                reply_to, g.group_id, now))
            if plan.error_code:
                return G(group_id=g.group_id, topics=[], error_code=plan.error_code,
                         error_message=default_message(plan.error_code))
            for tid, parts in plan.topics.items():
                t = image.topics_by_id.get(tid)
                if t is not None:
                    wanted.append((tid, t.name, parts))
        else:
            for t in g.topics:
                info = image.topics.get(t.topic_name)
                if info is None:   # no offset information: start offset -1, as OffsetFetch answers
                    unknown.append(R.DescribeShareGroupOffsetsResponseTopic(
                        topic_name=t.topic_name, topic_id=ZERO_UUID, partitions=[
                            R.DescribeShareGroupOffsetsResponsePartition(partition_index=p, start_offset=-1)
                            for p in t.partitions]))
                else:
                    wanted.append((info.topic_id, t.topic_name, list(t.partitions)))
        persister = self.persister
        keys = [(tid, name, p) for tid, name, parts in wanted for p in parts]
        summaries = await asyncio.gather(*(persister.read_summary(g.group_id, tid, p) for tid, _n, p in keys))
        lag_of = [(name, p) for (_tid, name, p), s in zip(keys, summaries)
                  if s.error == ErrorCode.NONE and s.start_offset != -1 and s.delivery_complete_count != -1]
        latest = await self._latest_offsets(set(lag_of)) if lag_of else {}
        by_topic: dict[uuid.UUID, list] = {}
        P = R.DescribeShareGroupOffsetsResponsePartition
        for (tid, name, p), s in zip(keys, summaries):
            if s.error != ErrorCode.NONE:
                part = P(partition_index=p, start_offset=-1, leader_epoch=0, lag=-1)
            elif (name, p) not in latest:
                part = P(partition_index=p, start_offset=s.start_offset, leader_epoch=s.leader_epoch, lag=-1)
            else:
                code, end = latest[(name, p)]
                if code != ErrorCode.NONE:
                    part = P(partition_index=p, error_code=int(code), error_message=default_message(code))
                else:
                    part = P(partition_index=p, start_offset=s.start_offset, leader_epoch=s.leader_epoch,
                             lag=end - s.start_offset - s.delivery_complete_count)
            by_topic.setdefault(tid, []).append(part)
        names = {tid: name for tid, name, _ps in wanted}
        topics = [R.DescribeShareGroupOffsetsResponseTopic(topic_name=names[tid], topic_id=tid, partitions=parts)
                  for tid, parts in by_topic.items()]
        return G(group_id=g.group_id, topics=topics + unknown, error_code=0, error_message=None)

    async def _latest_offsets(self, tps: set[tuple[str, int]]) -> dict[tuple[str, int], tuple[ErrorCode, int]]:
        """Kafka's PartitionMetadataClient.listLatestOffsets: ``(error, latest offset)`` per
        partition, read from this broker when it leads the partition, else by ListOffsets
        (LATEST, read_uncommitted) to the leader."""
        services = self.services
        out: dict[tuple[str, int], tuple[ErrorCode, int]] = {}
        remote: dict[int, list[tuple[str, int]]] = {}
        for name, p in tps:
            leader = services.metadata_cache.leader_of(name, p)
            if leader is None:
                out[(name, p)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)
            elif leader < 0:
                out[(name, p)] = (ErrorCode.LEADER_NOT_AVAILABLE, -1)
            elif leader == services.node_id:
                part = services.replica_manager.get(name, p)
                out[(name, p)] = ((ErrorCode.NONE, part.high_watermark) if part is not None and part.is_leader
                                  else (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1))
            else:
                remote.setdefault(leader, []).append((name, p))
        if remote:
            answers = await asyncio.gather(*(self._list_latest(node, parts) for node, parts in remote.items()))
            for answer in answers:
                out.update(answer)
        return out

    async def _list_latest(self, node: int, parts: list[tuple[str, int]]) -> dict:
        by_topic: dict[str, list] = {}
        for name, p in parts:
            by_topic.setdefault(name, []).append(ListOffsetsRequest.ListOffsetsPartition(
                partition_index=p, current_leader_epoch=-1, timestamp=LATEST))
        req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
        timeout_s = self.services.config.get("request.timeout.ms") / 1000.0
        out = {tp: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1) for tp in parts}
        try:
            resp = await self._node_clients().send(node, req, LIST_OFFSETS_VERSION, timeout_s)
        except (NodeConnectionError, OSError, asyncio.TimeoutError) as e:
            log.info("ListOffsets to node %d for share group lag failed: %s", node, e)
            if self._clients is not None:
                self._clients.close_node(node)
            return {tp: (ErrorCode.NETWORK_EXCEPTION, -1) for tp in parts}
        for t in resp.topics:
            for pr in t.partitions:
                if (t.name, pr.partition_index) in out:
                    out[(t.name, pr.partition_index)] = (_code(pr.error_code), pr.offset)
        return out

    def _node_clients(self) -> NodeClients:
        if self._clients is None:
            services = self.services
            self._clients = inter_broker_clients(services.config, services.image,
                                                 f"kcompat-share-admin-{services.node_id}")
        return self._clients

    # ------------------------------------------------------------------ AlterShareGroupOffsets

    async def alter_offsets(self, ctx, req) -> AR:
        """AlterShareGroupOffsets v0: coordinator checks, InitializeShareGroupState of each
        accepted partition at the group's new epoch, then the initialized partitions recorded."""
        coordinator = self.runtime.coordinator
        group_id = req.group_id
        plan = await self._step([group_id], lambda reply_to, now: coordinator.alter_share_group_offsets(
            reply_to, req, now))
        if plan.error_code:
            return AR(throttle_time_ms=0, error_code=plan.error_code,
                      error_message=plan.error_message or default_message(plan.error_code), responses=[])
        persister = self.persister
        keys = [(tid, p, offset) for tid, (_name, offsets) in plan.offsets.items() for p, offset in offsets.items()]
        codes = await asyncio.gather(*(persister.initialize_state(group_id, tid, p, plan.state_epoch, offset)
                                       for tid, p, offset in keys))
        failed = {(tid, p): ErrorCode(code) for (tid, p, _o), code in zip(keys, codes) if code != ErrorCode.NONE}
        initialized: dict[uuid.UUID, tuple[str, set[int]]] = {}
        for tid, p, _o in keys:
            if (tid, p) not in failed:
                initialized.setdefault(tid, (plan.offsets[tid][0], set()))[1].add(p)
        if initialized:
            ack = await self._step([group_id], lambda reply_to, now: coordinator.complete_alter_share_group_offsets(
                reply_to, group_id, initialized, now))
            if ack.error_code:   # Kafka does not wait for this record either; the state is initialized
                log.warning("share group %s: recording the altered partitions failed: %s", group_id,
                            ErrorCode(ack.error_code).name)
        response = plan.response
        if failed:
            log.info("share group %s: InitializeShareGroupState failed for %s", group_id,
                     {f"{tid}-{p}": c.name for (tid, p), c in failed.items()})
            for t in response.responses:
                for part in t.partitions:
                    code = failed.get((t.topic_id, part.partition_index))
                    if code is not None and part.error_code == 0:
                        part.error_code, part.error_message = int(code), default_message(code)
        return response

    # ------------------------------------------------------------------ DeleteShareGroupOffsets

    async def delete_offsets(self, ctx, req) -> DR:
        """DeleteShareGroupOffsets v0: coordinator checks, DeleteShareGroupState of each topic to
        delete, then the deleted topics leave the group's deleting topics. Response topics: those
        deleted, then those that failed."""
        coordinator = self.runtime.coordinator
        group_id = req.group_id
        plan = await self._step([group_id], lambda reply_to, now: coordinator.delete_share_group_offsets(
            reply_to, req, now))
        if plan.error_code:
            return DR(throttle_time_ms=0, error_code=plan.error_code,
                      error_message=plan.error_message or default_message(plan.error_code), responses=[])
        errors = list(plan.error_topics)
        if not plan.delete:
            return DR(throttle_time_ms=0, error_code=0, error_message=None, responses=errors)
        persister = self.persister
        items = list(plan.delete.items())
        results = await asyncio.gather(*(persister.delete_state(group_id, tid, parts) for tid, (_n, parts) in items))
        deleted: dict[uuid.UUID, str] = {}
        for (tid, (name, _parts)), codes in zip(items, results):
            bad = [ErrorCode(c) for c in codes.values() if c != ErrorCode.NONE]
            if bad:
                errors.append(DR.DeleteShareGroupOffsetsResponseTopic(topic_name=name, topic_id=tid,
                                                                      error_code=int(bad[0]),
                                                                      error_message=default_message(bad[0])))
            else:
                deleted[tid] = name
        if not deleted:
            return DR(throttle_time_ms=0, error_code=0, error_message=None, responses=errors)
        ack = await self._step([group_id], lambda reply_to, now: coordinator.complete_delete_share_group_offsets(
            reply_to, group_id, deleted, now))
        if ack.error_code:
            return DR(throttle_time_ms=0, error_code=ack.error_code, error_message=default_message(ack.error_code),
                      responses=[])
        return DR(throttle_time_ms=0, error_code=0, error_message=None, responses=list(ack.response) + errors)

    # ------------------------------------------------------------------ DeleteGroups

    async def delete_groups(self, ctx, req) -> DeleteGroupsResponse:
        """DeleteGroups 0-2 (GroupCoordinatorService.deleteGroups): the share state of the empty
        share groups is deleted first (DeleteShareGroupState of their initialized and deleting
        partitions); a share group that is not empty (NON_EMPTY_GROUP) or whose state could not
        be deleted answers that error; every other group goes through the coordinator's
        DeleteGroups. Results in request order."""
        coordinator = self.runtime.coordinator
        names = [g for g in req.groups_names if isinstance(g, str)]
        plan = await self._step(names, lambda reply_to, now: coordinator.share_group_deletions(reply_to, names, now))
        errors: dict[str, ErrorCode] = {}
        if plan.error_code:
            groups = {}
            errors = {g: ErrorCode(plan.error_code) for g in names}
        else:
            groups = plan.groups
        persister = self.persister
        deletions = [(g, tid, parts) for g, (code, topics) in groups.items() if code == ErrorCode.NONE
                     for tid, parts in topics.items()]
        for g, (code, _topics) in groups.items():
            if code != ErrorCode.NONE:
                errors[g] = code
        results = await asyncio.gather(*(persister.delete_state(g, tid, parts) for g, tid, parts in deletions))
        for (g, tid, _parts), codes in zip(deletions, results):
            for p, c in codes.items():
                if c != ErrorCode.NONE:
                    log.warning("share group %s: deleting the share state of %s-%d failed: %s", g, tid, p,
                                ErrorCode(c).name)
                    errors[g] = ErrorCode(c)
        retained = [g for g in req.groups_names if g not in errors]
        results_by_group: dict = {}
        if retained:
            version = ctx.api_version
            rest = DeleteGroupsRequest(groups_names=retained)
            response = await self.runtime.run(lambda reply_to, now: coordinator.delete_groups(
                reply_to, rest, version, now), {coordinator.partition_for(g) for g in retained if isinstance(g, str)})
            results_by_group = {r.group_id: r for r in response.results}
        out = []
        for g in dict.fromkeys(req.groups_names):
            r = results_by_group.get(g)
            if r is None:
                r = DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=int(errors.get(
                    g, ErrorCode.UNKNOWN_SERVER_ERROR)))
            out.append(r)
        return DeleteGroupsResponse(throttle_time_ms=0, results=out)


class _Failed:
    """A coordinator step whose reply never came (the request failed as a whole)."""

    def __init__(self, code: int) -> None:
        self.error_code = code
        self.error_message = None


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
