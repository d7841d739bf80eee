"""The KIP-848 server-side assignors (kcompat.group.consumer_assignors): Kafka's UniformAssignor and
RangeAssignor. Examples, then hypothesis properties: every subscribed partition assigned exactly
once to a subscriber, uniform balance, stickiness, range layout, racks, determinism."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcompat.group.consumer_assignors import (ASSIGNORS, MemberSpec, PartitionAssignor, RangeAssignor, TopicSpec,
                                              UniformAssignor, assignor)

UNIFORM = UniformAssignor()
RANGE = RangeAssignor()
T = [str(uuid.UUID(int=k + 1)) for k in range(8)]  # topic ids, as uuid strings
T1, T2, T3 = T[0], T[1], T[2]


def spec(topics, current=None, rack=None) -> MemberSpec:
    return MemberSpec(rack, frozenset(topics), {t: frozenset(ps) for t, ps in (current or {}).items()})


def topic(n, racks=None) -> TopicSpec:
    return TopicSpec(n, {p: frozenset(r) for p, r in (racks or {}).items()})


def counts(result) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def owners(result) -> dict[tuple[str, int], str]:
    return {(t, p): m for m, a in result.items() for t, ps in a.items() for p in ps}


def check_valid(members, topics, result) -> None:
    """Property 1: every member present; every partition of every subscribed, existing topic owned
    by exactly one member, which subscribes to it; no empty entries."""
    assert sorted(result) == sorted(members)
    seen: set[tuple[str, int]] = set()
    for m, a in result.items():
        for t, ps in a.items():
            assert isinstance(ps, frozenset) and ps, (m, t)
            assert t in topics and t in members[m].subscribed_topic_ids, (m, t)
            for p in ps:
                assert 0 <= p < topics[t].num_partitions and (t, p) not in seen, (m, t, p)
                seen.add((t, p))
    wanted = {(t, p) for t, s in topics.items() for p in range(s.num_partitions)
              if any(t in ms.subscribed_topic_ids for ms in members.values())}
    assert seen == wanted


def check_uniform_balance(members, topics, result) -> None:
    """Property 2: no holder of a topic's partition has 2+ more partitions than a subscriber of it;
    with one common subscription that is max - min <= 1."""
    c = counts(result)
    for t in topics:
        subscribers = [m for m in members if t in members[m].subscribed_topic_ids]
        holders = [m for m in subscribers if t in result[m]]
        if holders:
            assert max(c[h] for h in holders) - min(c[s] for s in subscribers) <= 1, t
    subs = {frozenset(s.subscribed_topic_ids & topics.keys()) for s in members.values()}
    if len(subs) == 1:
        assert max(c.values()) - min(c.values()) <= 1


def check_range_layout(members, topics, result) -> None:
    """Property 4: per topic, subscribers in member id order get contiguous ranges, the first
    ``n % s`` one partition more."""
    for t, s in topics.items():
        subscribers = sorted(m for m in members if t in members[m].subscribed_topic_ids)
        if not subscribers:
            continue
        q, extra = divmod(s.num_partitions, len(subscribers))
        start = 0
        for k, m in enumerate(subscribers):
            size = q + (k < extra)
            assert result[m].get(t, frozenset()) == frozenset(range(start, start + size)), (t, m)
            start += size


def valid_current(members, topics) -> dict[tuple[str, int], str]:
    """The current owner of each partition that can stay where it is (exists, subscribed; a
    partition claimed twice counts for the member whose id sorts first)."""
    out: dict[tuple[str, int], str] = {}
    for m in sorted(members):
        for t, ps in members[m].current.items():
            if t in topics and t in members[m].subscribed_topic_ids:
                for p in ps:
                    if 0 <= p < topics[t].num_partitions:
                        out.setdefault((t, p), m)
    return out


def moves(members, topics, result) -> int:
    after = owners(result)
    return sum(1 for tp, m in valid_current(members, topics).items() if after[tp] != m)


# --------------------------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------------------------


def test_registry():
    assert list(ASSIGNORS) == ["uniform", "range"]
    assert assignor("uniform").name == "uniform" and isinstance(assignor("uniform"), UniformAssignor)
    assert assignor("range").name == "range" and isinstance(assignor("range"), RangeAssignor)
    assert all(isinstance(a, PartitionAssignor) for a in ASSIGNORS.values())
    with pytest.raises(KeyError):
        assignor("sticky")


@pytest.mark.parametrize("a", [UNIFORM, RANGE], ids=lambda a: a.name)
def test_empty_inputs(a):
    assert a.assign({}, {}) == {}
    assert a.assign({}, {T1: topic(3)}) == {}
    # nothing subscribed, or only to topics that do not exist (yet): everyone gets {}
    members = {"a": spec([]), "b": spec([T2], {T2: {0}})}
    assert a.assign(members, {T1: topic(3)}) == {"a": {}, "b": {}}


@pytest.mark.parametrize("a", [UNIFORM, RANGE], ids=lambda a: a.name)
def test_missing_topic_ignored_and_zero_partitions(a):
    members = {"a": spec([T1, T2, T3]), "b": spec([T1])}
    topics = {T1: topic(4), T3: topic(0)}
    result = a.assign(members, topics)
    check_valid(members, topics, result)
    assert counts(result) == {"a": 2, "b": 2}
    if a is RANGE:
        assert result == {"a": {T1: frozenset({0, 1})}, "b": {T1: frozenset({2, 3})}}


# --------------------------------------------------------------------------------------------
# uniform: examples
# --------------------------------------------------------------------------------------------


def test_uniform_fresh_fills_members_in_order():
    members = {m: spec([T1]) for m in "cab"}
    assert UNIFORM.assign(members, {T1: topic(6)}) == {
        "a": {T1: frozenset({0, 1})}, "b": {T1: frozenset({2, 3})}, "c": {T1: frozenset({4, 5})}}


def test_uniform_fresh_uneven_two_topics():
    members = {m: spec([T1, T2]) for m in "abc"}
    topics = {T1: topic(4), T2: topic(3)}
    result = UNIFORM.assign(members, topics)
    check_valid(members, topics, result)
    assert sorted(counts(result).values()) == [2, 2, 3]


def test_uniform_member_joins_moves_the_minimum():
    topics = {T1: topic(6)}
    members = {"a": spec([T1], {T1: {0, 1}}), "b": spec([T1], {T1: {2, 3}}), "c": spec([T1], {T1: {4, 5}}),
               "d": spec([T1])}
    result = UNIFORM.assign(members, topics)
    check_valid(members, topics, result)
    # 6 over 4 members: quotas 2, 2, 1, 1; the newcomer needs one, so exactly one partition moves
    assert sorted(counts(result).values()) == [1, 1, 2, 2]
    assert counts(result)["d"] == 1
    assert moves(members, topics, result) == 1
    for m in "abc":
        assert result[m][T1] <= members[m].current[T1]


def test_uniform_member_joins_two_topics():
    topics = {T1: topic(5), T2: topic(5)}
    before = {m: spec([T1, T2]) for m in "ab"}
    first = UNIFORM.assign(before, topics)
    members = {m: spec([T1, T2], first[m]) for m in "ab"} | {"c": spec([T1, T2])}
    result = UNIFORM.assign(members, topics)
    check_uniform_balance(members, topics, result)
    assert sorted(counts(result).values()) == [3, 3, 4]
    assert moves(members, topics, result) == 3


def test_uniform_member_leaves_only_its_partitions_move():
    topics = {T1: topic(7), T2: topic(5)}
    first = UNIFORM.assign({m: spec([T1, T2]) for m in "abcd"}, topics)
    members = {m: spec([T1, T2], first[m]) for m in "abd"}  # c left
    result = UNIFORM.assign(members, topics)
    check_valid(members, topics, result)
    check_uniform_balance(members, topics, result)
    for m in "abd":
        for t, ps in first[m].items():
            assert ps <= result[m].get(t, frozenset())
    assert moves(members, topics, result) == 0


def test_uniform_stale_and_conflicting_current():
    topics = {T1: topic(4), T2: topic(2)}
    members = {
        "a": spec([T1], {T1: {0, 1, 7, -1}, T2: {0}, T3: {0}}),  # 7 and -1 gone, T2 unsubscribed, T3 deleted
        "b": spec([T1, T2], {T1: {1, 2}, T2: {0, 1}}),            # T1-1 also claimed by a
    }
    result = UNIFORM.assign(members, topics)
    check_valid(members, topics, result)
    check_uniform_balance(members, topics, result)
    assert result["a"][T1] >= {0, 1}  # a's id sorts first: the doubly claimed partition stays with a
    assert counts(result) == {"a": 3, "b": 3}
    assert result["b"][T2] == {0, 1}


def test_uniform_heterogeneous_example():
    topics = {T1: topic(6), T2: topic(6)}
    members = {"a": spec([T1]), "b": spec([T1, T2]), "c": spec([T2])}
    result = UNIFORM.assign(members, topics)
    check_valid(members, topics, result)
    check_uniform_balance(members, topics, result)
    assert counts(result) == {"a": 4, "b": 4, "c": 4}


def test_uniform_heterogeneous_subscription_limits_balance():
    # only b can take T2: it keeps all 10, and a gets all of T1 (a cannot take anything from b)
    topics = {T1: topic(4), T2: topic(10)}
    members = {"a": spec([T1], {T1: {0}}), "b": spec([T1, T2], {T1: {1, 2, 3}})}
    result = UNIFORM.assign(members, topics)
    check_valid(members, topics, result)
    check_uniform_balance(members, topics, result)
    assert result == {"a": {T1: frozenset(range(4))}, "b": {T2: frozenset(range(10))}}


def test_uniform_heterogeneous_sticky_when_balanced():
    topics = {T1: topic(4), T2: topic(4)}
    members = {"a": spec([T1], {T1: {1, 3}}), "b": spec([T1, T2], {T1: {0}, T2: {3}}),
               "c": spec([T2], {T2: {0, 1}}), "d": spec([T1, T2], {T1: {2}, T2: {2}})}
    result = UNIFORM.assign(members, topics)
    assert owners(result) == valid_current(members, topics)
    # b drops T1: its partition goes to the least loaded subscriber of T1; nothing else moves, as
    # no holder has 2+ more than a subscriber of its topic (Kafka's heterogeneous builder does not
    # chain moves across topics either: d -> b on T2 then a -> d on T1 would even out a's 3)
    members["b"] = spec([T2], members["b"].current)
    result = UNIFORM.assign(members, topics)
    check_valid(members, topics, result)
    check_uniform_balance(members, topics, result)
    assert moves(members, topics, result) == 0
    assert counts(result) == {"a": 3, "b": 1, "c": 2, "d": 2}


def test_uniform_unsubscribing_releases_partitions():
    topics = {T1: topic(4), T2: topic(4)}
    members = {"a": spec([T1], {T1: {0, 1}, T2: {0, 1}}), "b": spec([T1, T2], {T1: {2, 3}, T2: {2, 3}})}
    result = UNIFORM.assign(members, topics)
    check_valid(members, topics, result)
    assert T2 not in result["a"] and result["b"][T2] == frozenset(range(4))


# --------------------------------------------------------------------------------------------
# uniform: racks
# --------------------------------------------------------------------------------------------

RACKS_2 = {0: {"r1"}, 1: {"r2"}, 2: {"r1"}, 3: {"r2"}}


def test_uniform_fresh_prefers_replica_racks():
    topics = {T1: topic(4, RACKS_2)}
    members = {"a": spec([T1], rack="r2"), "b": spec([T1], rack="r1")}
    assert UNIFORM.assign(members, topics) == {"a": {T1: frozenset({1, 3})}, "b": {T1: frozenset({0, 2})}}


def test_uniform_rack_locality_beats_stickiness_but_not_balance():
    topics = {T1: topic(4, RACKS_2)}
    members = {"a": spec([T1], {T1: {0, 2}}, rack="r2"), "b": spec([T1], {T1: {1, 3}}, rack="r1")}
    assert UNIFORM.assign(members, topics) == {"a": {T1: frozenset({1, 3})}, "b": {T1: frozenset({0, 2})}}
    # all replicas on r1: balance wins, and nothing moves for no gain
    one_rack = {T1: topic(4, {p: {"r1"} for p in range(4)})}
    result = UNIFORM.assign(members, one_rack)
    assert counts(result) == {"a": 2, "b": 2} and moves(members, one_rack, result) == 0


def test_uniform_rack_only_moves_for_a_gain():
    topics = {T1: topic(6, {p: {"r1", "r2"} for p in range(6)})}
    members = {"a": spec([T1], {T1: {0, 1, 2}}, rack="r1"), "b": spec([T1], {T1: {3, 4, 5}}, rack="r2")}
    assert owners(UNIFORM.assign(members, topics)) == valid_current(members, topics)


def test_uniform_rack_with_join_and_no_rack_members():
    topics = {T1: topic(6, {p: {"r1" if p < 3 else "r2"} for p in range(6)})}
    members = {"a": spec([T1], {T1: {0, 1, 2, 3}}, rack="r1"), "b": spec([T1], {T1: {4, 5}}),
               "c": spec([T1], rack="r2")}
    result = UNIFORM.assign(members, topics)
    check_valid(members, topics, result)
    assert counts(result) == {"a": 2, "b": 2, "c": 2}
    assert result["a"][T1] <= {0, 1, 2} and result["c"][T1] <= {3, 4, 5}


def test_uniform_rack_exchange_only_moves_what_it_gains():
    # p0 wants r2, p2 wants r1, p1 and p3 have no racks: swapping p0 and p2 is enough
    topics = {T1: topic(4, {0: {"r2"}, 2: {"r1"}})}
    members = {"a": spec([T1], {T1: {0, 3}}, rack="r1"), "b": spec([T1], {T1: {1, 2}}, rack="r2")}
    assert UNIFORM.assign(members, topics) == {"a": {T1: frozenset({2, 3})}, "b": {T1: frozenset({0, 1})}}


# --------------------------------------------------------------------------------------------
# range: examples
# --------------------------------------------------------------------------------------------


def test_range_kafka_javadoc_example():
    members = {"M1": spec([T1, T2]), "M0": spec([T1, T2])}
    result = RANGE.assign(members, {T1: topic(3), T2: topic(3)})
    assert result == {"M0": {T1: frozenset({0, 1}), T2: frozenset({0, 1})},
                      "M1": {T1: frozenset({2}), T2: frozenset({2})}}


def test_range_heterogeneous_and_short_topics():
    members = {"a": spec([T1, T2]), "b": spec([T1]), "c": spec([T1, T2]), "d": spec([T2])}
    topics = {T1: topic(2), T2: topic(7)}
    result = RANGE.assign(members, topics)
    check_valid(members, topics, result)
    check_range_layout(members, topics, result)
    assert result == {"a": {T1: frozenset({0}), T2: frozenset({0, 1, 2})}, "b": {T1: frozenset({1})},
                      "c": {T2: frozenset({3, 4})}, "d": {T2: frozenset({5, 6})}}


def test_range_co_partitions_topics_with_the_same_members():
    members = {m: spec([T1, T2, T3]) for m in ("m1", "m2", "m3")} | {"x": spec([T3])}
    topics = {T1: topic(8), T2: topic(8), T3: topic(8)}
    result = RANGE.assign(members, topics)
    check_range_layout(members, topics, result)
    for m in ("m1", "m2", "m3"):
        assert result[m][T1] == result[m][T2]


def test_range_recomputes_like_kafka_4():
    """Kafka's server RangeAssignor is not sticky since KAFKA-16944: the current assignment and
    racks do not change the result."""
    topics = {T1: topic(4, RACKS_2)}
    plain = {"a": spec([T1]), "b": spec([T1])}
    racked = {"a": spec([T1], {T1: {2, 3}}, rack="r2"), "b": spec([T1], {T1: {0, 1}}, rack="r1")}
    assert RANGE.assign(racked, topics) == RANGE.assign(plain, {T1: topic(4)}) == {
        "a": {T1: frozenset({0, 1})}, "b": {T1: frozenset({2, 3})}}


# --------------------------------------------------------------------------------------------
# properties
# --------------------------------------------------------------------------------------------

RACKS = ["r0", "r1", "r2"]


@st.composite
def groups(draw, racks: bool | None = None, homogeneous: bool = False):
    """(members, topics): up to 4 existing topics and one missing, up to 7 members with stale,
    conflicting and out-of-range current assignments, racks on some members and partitions."""
    n_topics = draw(st.integers(1, 4))
    use_racks = draw(st.booleans()) if racks is None else racks
    rack_sets = st.frozensets(st.sampled_from(RACKS), max_size=2) if use_racks else st.just(frozenset())
    topics = {}
    for t in T[:n_topics]:
        n = draw(st.integers(0, 12))
        topics[t] = TopicSpec(n, {p: r for p in range(n) if (r := draw(rack_sets))})
    known = T[:n_topics + 1]  # T[n_topics] is subscribed to but does not exist
    common = draw(st.frozensets(st.sampled_from(known)))
    ids = draw(st.lists(st.text("abcxyz", min_size=1, max_size=3), min_size=1, max_size=7, unique=True))
    members = {}
    for m in ids:
        subscribed = common if homogeneous else draw(st.frozensets(st.sampled_from(known)))
        current = draw(st.dictionaries(st.sampled_from(known + [T[7]]),
                                       st.frozensets(st.integers(-1, 14), max_size=6), max_size=3))
        rack = draw(st.sampled_from([None] + RACKS)) if use_racks else None
        members[m] = MemberSpec(rack, subscribed, current)
    return members, topics


def reordered(members, topics):
    """The same input built in reverse insertion order, with fresh set objects."""
    return ({m: MemberSpec(s.rack_id, frozenset(reversed(sorted(s.subscribed_topic_ids))),
                           {t: frozenset(reversed(sorted(s.current[t]))) for t in reversed(list(s.current))})
             for m, s in reversed(list(members.items()))},
            {t: TopicSpec(s.num_partitions, {p: s.partition_racks[p] for p in reversed(list(s.partition_racks))})
             for t, s in reversed(list(topics.items()))})


def without_racks(members, topics, *, member_racks: bool, partition_racks: bool):
    return ({m: MemberSpec(s.rack_id if member_racks else None, s.subscribed_topic_ids, s.current)
             for m, s in members.items()},
            {t: TopicSpec(s.num_partitions, s.partition_racks if partition_racks else {}) for t, s in topics.items()})


@settings(max_examples=300)
@given(groups())
def test_uniform_valid_balanced_and_idempotent(group):
    members, topics = group
    result = UNIFORM.assign(members, topics)
    check_valid(members, topics, result)
    check_uniform_balance(members, topics, result)
    # fed back as the current assignment, a balanced result is kept as is
    again = {m: MemberSpec(s.rack_id, s.subscribed_topic_ids, result[m]) for m, s in members.items()}
    assert UNIFORM.assign(again, topics) == result


@settings(max_examples=300)
@given(groups(homogeneous=True))
def test_uniform_homogeneous_balanced(group):
    members, topics = group
    result = UNIFORM.assign(members, topics)
    check_valid(members, topics, result)
    c = counts(result)
    assert max(c.values()) - min(c.values()) <= 1


@settings(max_examples=200)
@given(groups())
def test_range_valid_and_laid_out_in_ranges(group):
    members, topics = group
    result = RANGE.assign(members, topics)
    check_valid(members, topics, result)
    check_range_layout(members, topics, result)


@settings(max_examples=200)
@given(groups(), st.sampled_from(["uniform", "range"]))
def test_deterministic(group, name):
    members, topics = group
    a = assignor(name)
    result = a.assign(members, topics)
    assert a.assign(members, topics) == result
    assert a.assign(*reordered(members, topics)) == result
    assert list(result) == sorted(members)


@settings(max_examples=200)
@given(groups(racks=True), st.sampled_from(["uniform", "range"]))
def test_no_racks_on_either_side_is_rack_unaware(group, name):
    members, topics = group
    a = assignor(name)
    unaware = a.assign(*without_racks(members, topics, member_racks=False, partition_racks=False))
    assert a.assign(*without_racks(members, topics, member_racks=True, partition_racks=False)) == unaware
    assert a.assign(*without_racks(members, topics, member_racks=False, partition_racks=True)) == unaware


def on_rack(members, topics, m, t, p) -> bool:
    return members[m].rack_id in topics[t].partition_racks.get(p, ())


@settings(max_examples=300)
@given(groups(racks=True))
def test_uniform_rack_locality_is_a_local_optimum(group):
    """A partition left off-rack only faces on-rack members of its replicas whose partitions of
    that topic are all on-rack themselves: no exchange within the topic (which keeps balance)
    would put it on a replica's rack without taking another partition off its own."""
    members, topics = group
    result = UNIFORM.assign(members, topics)
    check_uniform_balance(members, topics, result)
    for (t, p), m in owners(result).items():
        if on_rack(members, topics, m, t, p):
            continue
        for other, a in result.items():
            if t in a and on_rack(members, topics, other, t, p):
                assert all(on_rack(members, topics, other, t, q) for q in a[t]), (t, p, m, other)


@settings(max_examples=300)
@given(groups(racks=True))
def test_uniform_racks_move_partitions_only_for_locality(group):
    """From a balanced assignment, racks make partitions move only by exchanges: at most two moves
    (the partition put on a replica's rack and the one it displaced) per partition gained on-rack."""
    members, topics = group
    unaware = UNIFORM.assign(*without_racks(members, topics, member_racks=False, partition_racks=False))
    balanced = {m: MemberSpec(s.rack_id, s.subscribed_topic_ids, unaware[m]) for m, s in members.items()}
    result = UNIFORM.assign(balanced, topics)
    check_uniform_balance(members, topics, result)
    assert counts(result) == counts(unaware)
    gained = sum(on_rack(members, topics, m, t, p) for (t, p), m in owners(result).items()) - sum(
        on_rack(members, topics, m, t, p) for (t, p), m in owners(unaware).items())
    assert 0 <= moves(balanced, topics, result) <= 2 * gained


@st.composite
def sticky_groups(draw):
    """A homogeneous group without racks whose current assignment has no conflicts: each partition
    was owned by a member, a departed member or nobody."""
    topics = {t: TopicSpec(draw(st.integers(0, 15))) for t in T[:draw(st.integers(1, 3))]}
    ids = [f"m{k}" for k in range(draw(st.integers(1, 8)))]
    current: dict[str, dict[str, set[int]]] = {m: {} for m in ids}
    for t, s in topics.items():
        for p in range(s.num_partitions):
            m = draw(st.sampled_from(ids + ["gone", "none"]))
            if m in current:
                current[m].setdefault(t, set()).add(p)
    return {m: spec(topics, current[m]) for m in ids}, topics


@settings(max_examples=300)
@given(sticky_groups())
def test_uniform_homogeneous_moves_the_minimum(group):
    """Property 3: the fewest partitions change owner that balance allows (the larger quotas go
    to the members that hold the most)."""
    members, topics = group
    result = UNIFORM.assign(members, topics)
    check_valid(members, topics, result)
    held = valid_current(members, topics)
    c = sorted((sum(1 for m in held.values() if m == x) for x in members), reverse=True)
    q, extra = divmod(sum(s.num_partitions for s in topics.values()), len(members))
    kept = sum(min(n, q + (k < extra)) for k, n in enumerate(c))
    assert moves(members, topics, result) == len(held) - kept


@settings(max_examples=200)
@given(sticky_groups(), st.data())
def test_uniform_leave_and_join(group, data):
    """Removing a member from a balanced group moves only its partitions; adding one moves only
    what the newcomer needs (its quota)."""
    members, topics = group
    first = UNIFORM.assign(members, topics)
    balanced = {m: spec(topics, first[m]) for m in members}
    if len(members) > 1:
        gone = data.draw(st.sampled_from(sorted(members)))
        rest = {m: s for m, s in balanced.items() if m != gone}
        after = UNIFORM.assign(rest, topics)
        check_uniform_balance(rest, topics, after)
        assert moves(rest, topics, after) == 0
    joined = balanced | {"new": spec(topics)}
    after = UNIFORM.assign(joined, topics)
    check_uniform_balance(joined, topics, after)
    assert moves(joined, topics, after) == counts(after)["new"] == sum(
        s.num_partitions for s in topics.values()) // len(joined)


# --------------------------------------------------------------------------------------------
# size
# --------------------------------------------------------------------------------------------


def test_large_group_runs():
    """10,000 partitions over 1,000 members (no timing assertion; well under a second)."""
    topics = {t: topic(1000, {p: {f"r{p % 3}"} for p in range(1000)}) for t in (T + ["x", "y"])[:10]}
    every = frozenset(topics)
    members = {f"member-{k:04d}": MemberSpec(f"r{k % 3}", every, {}) for k in range(1000)}
    result = UNIFORM.assign(members, topics)
    check_valid(members, topics, result)
    assert set(counts(result).values()) == {10}
    rest = {m: MemberSpec(s.rack_id, s.subscribed_topic_ids, result[m]) for m, s in members.items()
            if m != "member-0007"}
    check_uniform_balance(rest, topics, UNIFORM.assign(rest, topics))
    mixed = {m: MemberSpec(None, frozenset(sorted(topics)[k % 10: k % 10 + 3]), {})
             for k, m in enumerate(sorted(members))}
    again = UNIFORM.assign(mixed, topics)
    check_valid(mixed, topics, again)
    check_uniform_balance(mixed, topics, again)
    check_range_layout(members, topics, RANGE.assign(members, topics))
