"""The group coordinator's steps of the KIP-932 share-group admin APIs
(:mod:`kcompat.group.share_admin`): DescribeShareGroupOffsets' initialized partitions,
AlterShareGroupOffsets, DeleteShareGroupOffsets and the share half of DeleteGroups, with Kafka
4.3's errors, the ShareGroupMetadata / ShareGroupStatePartitionMetadata records they write, and
their reload. The share coordinator calls between the steps are the broker's
(tests/share/test_share_admin.py runs them with Kafka's tools)."""

from __future__ import annotations

from kcompat.group import share_group_records as srec
from kcompat.group.share_admin import ZERO_UUID
from kcompat.protocol.errors import ErrorCode as E
from kcompat.protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest as AQ
from kcompat.protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsRequest as DQ
from kcompat.protocol.messages.list_groups import ListGroupsRequest
from tests.group.harness import FAST
from tests.group.test_share_groups import SG, T, U

UNKNOWN_MSG = "This server does not host this topic-partition."


class Admin(SG):
    """SG with the admin steps applied as the broker runtime applies them: records appended and
    replayed, then the plan handed back (plans are not wire messages)."""

    def step(self, method: str, *args):
        token = (method, object())
        result = getattr(self.coord, method)(token, *args, self.now)
        for r in result.records:
            entries = self.log[r.partition]
            r.offset = len(entries)
            entries.append((r.offset, r.key, r.value))
            self.coord.replay(r)
        (reply,) = [resp for t, resp in result.replies if t == token]
        return reply, result

    def alter(self, group: str, offsets: dict[str, dict[int, int]]):
        req = AQ(group_id=group, topics=[AQ.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=[
            AQ.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o) for p, o in ps.items()])
            for t, ps in offsets.items()])
        return self.step("alter_share_group_offsets", req)[0]

    def delete_offsets(self, group: str, *topics: str):
        req = DQ(group_id=group, topics=[DQ.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics])
        return self.step("delete_share_group_offsets", req)[0]

    def initialized(self, group: str):
        return self.step("share_initialized_partitions", group)[0]

    def state_metadata(self, group: str = "g"):
        """The last ShareGroupStatePartitionMetadata value written for ``group``."""
        key = srec.key(srec.STATE_PARTITION_METADATA, group)
        values = [v for _o, k, v in self.records() if k == key]
        return srec.parse_value(srec.STATE_PARTITION_METADATA, values[-1]) if values and values[-1] else None

    def reloaded(self) -> "Admin":
        other = Admin(self.view)
        for p in range(FAST.num_partitions):
            other.coord.load(p, self.records(p), other.now)
        return other


def empty_group_with_state(b: Admin, group: str = "g") -> None:
    """A share group whose member consumed t (0-2) and left."""
    b.sjoin("m1", group=group)
    b.hb("m1", -1, group=group)


def test_initialized_partitions_of_share_groups_only():
    b = Admin()
    assert b.initialized("g").error_code == 0 and b.initialized("g").topics == {}   # unknown: nothing, no error
    b.commit("c", {("t", 0): 1})
    assert b.initialized("c").topics == {}                                           # another type: nothing
    b.sjoin("m1")
    assert b.initialized("g").topics == {T: [0, 1, 2]}
    b.coord.unload(b.coord.partition_for("g"))
    assert b.initialized("g").error_code == E.NOT_COORDINATOR


def test_alter_only_an_empty_share_group():
    b = Admin()
    b.sjoin("m1")
    plan = b.alter("g", {"t": {0: 5}})
    assert (plan.error_code, plan.error_message) == (E.NON_EMPTY_GROUP, "The group is not empty.")
    b.commit("c", {("t", 0): 1})
    plan = b.alter("c", {"t": {0: 5}})
    assert (plan.error_code, plan.error_message) == (E.GROUP_ID_NOT_FOUND, "Group c is not a share group.")
    assert b.alter("", {"t": {0: 5}}).error_code == E.INVALID_GROUP_ID


def test_alter_checks_topics_bumps_the_epoch_and_records_initialized_partitions():
    b = Admin()
    empty_group_with_state(b)
    epoch = b.sg().group_epoch
    plan = b.alter("g", {"t": {0: 5, 7: 1}, "nope": {0: 1}, "u": {0: 0}})
    assert plan.error_code == 0
    assert [(t.topic_name, t.topic_id, [(p.partition_index, p.error_code, p.error_message) for p in t.partitions])
            for t in plan.response.responses] == [
        ("nope", ZERO_UUID, [(0, E.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_MSG)]),
        ("t", T, [(0, 0, None), (7, E.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_MSG)]),
        ("u", U, [(0, 0, None)])]
    # a new group epoch, written, is the state epoch (above any a share-partition leader holds)
    assert plan.state_epoch == epoch + 1 == b.sg().group_epoch
    value = srec.parse_value(srec.GROUP_METADATA, [v for _o, k, v in b.records()
                                                   if k == srec.key(srec.GROUP_METADATA, "g")][-1])
    assert value.epoch == epoch + 1
    assert plan.offsets == {T: ("t", {0: 5}), U: ("u", {0: 0})}
    # InitializeShareGroupState created u-0's state: it joins the initialized partitions
    ack, _ = b.step("complete_alter_share_group_offsets", "g", {U: ("u", {0})})
    assert ack.error_code == 0
    assert b.sg().initialized == {T: ("t", frozenset({0, 1, 2})), U: ("u", frozenset({0}))}
    v = b.state_metadata()
    assert [(t.topic_id, t.partitions) for t in v.initialized_topics] == [(T, [0, 1, 2]), (U, [0])]
    assert b.reloaded().sg().initialized == b.sg().initialized


def test_alter_creates_a_missing_share_group_that_survives_a_reload():
    b = Admin()
    plan = b.alter("new", {"t": {1: 3}})
    assert plan.error_code == 0 and plan.state_epoch == 1
    b.step("complete_alter_share_group_offsets", "new", {T: ("t", {1})})
    listed = b.reply(b.call("list_groups", ListGroupsRequest(states_filter=[], types_filter=["share"]), 5))
    assert [(g.group_id, g.group_state) for g in listed.groups] == [("new", "Empty")]
    after = b.reloaded()
    assert after.sg("new").initialized == {T: ("t", frozenset({1}))} and after.sg("new").group_epoch == 1
    # a member joining later gets a higher epoch
    assert b.sjoin("m1", group="new")[1] == 2
    # nothing to initialize (only unknown topics): no group is left behind
    assert b.alter("ghost", {"nope": {0: 1}}).error_code == 0
    assert b.group("ghost") is None


def test_delete_offsets_errors():
    b = Admin()
    plan = b.delete_offsets("g", "t")
    assert (plan.error_code, plan.error_message) == (E.GROUP_ID_NOT_FOUND, "Group g not found.")
    b.commit("c", {("t", 0): 1})
    assert b.delete_offsets("c", "t").error_message == "Group c is not a share group."
    b.sjoin("m1")
    assert b.delete_offsets("g", "t").error_code == E.NON_EMPTY_GROUP
    assert b.delete_offsets("", "t").error_code == E.INVALID_GROUP_ID


def test_delete_offsets_moves_topics_to_deleting_then_completes():
    b = Admin()
    empty_group_with_state(b)
    plan = b.delete_offsets("g", "t", "u", "nope")
    assert plan.error_code == 0
    assert [(t.topic_name, t.error_code, t.error_message) for t in plan.error_topics] == [
        ("u", E.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete."),
        ("nope", E.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_MSG)]
    assert plan.delete == {T: ("t", [0, 1, 2])}
    assert b.sg().initialized == {} and b.sg().deleting == {T: "t"}
    v = b.state_metadata()
    assert (v.initialized_topics, [(t.topic_id, t.topic_name) for t in v.deleting_topics]) == ([], [(T, "t")])
    # a deleting topic asked again: every partition of it (a retry after a failed delete)
    assert b.delete_offsets("g", "t").delete == {T: ("t", [0, 1, 2])}
    ack, _ = b.step("complete_delete_share_group_offsets", "g", {T: "t"})
    assert [(t.topic_name, t.topic_id, t.error_code) for t in ack.response] == [("t", T, 0)]
    assert b.sg().deleting == {} and b.reloaded().sg().deleting == {}
    # no state left for t: nothing more to delete
    assert b.delete_offsets("g", "t").delete == {}


def test_delete_offsets_of_a_group_without_share_state_answers_no_topics():
    b = Admin()
    b.alter("g", {"nope": {0: 1}})
    b.sjoin("m1", topics=["nope"])     # a group subscribed to a topic that does not exist
    b.hb("m1", -1)
    plan = b.delete_offsets("g", "t")
    assert (plan.error_code, plan.error_topics, plan.delete) == (0, [], {})


def test_a_member_rejoining_after_delete_offsets_initializes_again():
    b = Admin()
    empty_group_with_state(b)
    b.delete_offsets("g", "t")
    b.step("complete_delete_share_group_offsets", "g", {T: "t"})
    b.sjoin("m2")
    assert b.sg().initialized == {T: ("t", frozenset({0, 1, 2}))}


def test_group_deletion_deletes_share_state_of_empty_share_groups_only():
    b = Admin()
    b.sjoin("m1", group="busy")
    empty_group_with_state(b, "g")
    b.commit("c", {("t", 0): 1})
    plan, _ = b.step("share_group_deletions", ["g", "busy", "c", "nope"])
    assert plan.error_code == 0
    assert plan.groups == {"g": (E.NONE, {T: [0, 1, 2]}), "busy": (E.NON_EMPTY_GROUP, {})}
    assert b.sg("g").initialized == {} and b.sg("g").deleting == {T: "t"}
    # the share state deleted, the usual DeleteGroups removes the group and its records
    assert b.delete_groups("g", "c") == {"g": E.NONE, "c": E.NONE}
    after = b.reloaded()
    assert after.group("g") is None and after.group("c") is None and after.group("busy") is not None


def test_group_deletion_retries_deleting_topics():
    b = Admin()
    empty_group_with_state(b)
    b.delete_offsets("g", "t")               # t deleting (its DeleteShareGroupState failed, say)
    b.alter("g", {"u": {0: 0}})
    b.step("complete_alter_share_group_offsets", "g", {U: ("u", {0})})
    plan, _ = b.step("share_group_deletions", ["g"])
    assert plan.groups == {"g": (E.NONE, {T: [0, 1, 2], U: [0]})}
    assert b.sg().deleting == {T: "t", U: "u"}


def test_a_failed_write_turns_a_plan_into_the_coordinator_error():
    b = Admin()
    empty_group_with_state(b)
    token = ("alter", object())
    req = AQ(group_id="g", topics=[AQ.AlterShareGroupOffsetsRequestTopic(topic_name="t", partitions=[
        AQ.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])])
    result = b.coord.alter_share_group_offsets(token, req, b.now)
    failed = b.coord.write_failed(result, result.records, int(E.NOT_LEADER_OR_FOLLOWER), b.now)
    ((_t, plan),) = failed.replies
    assert plan.error_code == E.NOT_COORDINATOR


def test_state_epochs_keep_rising():
    b = Admin()
    empty_group_with_state(b)
    first = b.alter("g", {"t": {0: 0}}).state_epoch
    second = b.alter("g", {"t": {0: 0}}).state_epoch
    assert second == first + 1
