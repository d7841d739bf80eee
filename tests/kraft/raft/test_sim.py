"""Thousands of seeded simulation runs (see sim.py for the fault model and the invariants).

2,000 seeds: 1,500 of a 3-voter quorum and 500 of a 5-voter quorum, in chunks of 100 so a failure
names its chunk; a failing seed prints itself and the command that replays it. Plus a smaller set
that puts every message through the wire codecs.
"""

from __future__ import annotations

import pytest

from tests.kraft.raft import sim

CHUNK = 100
THREE_VOTER_CHUNKS = 15
FIVE_VOTER_CHUNKS = 5


def run_chunk(first: int, count: int, voters: int, wire: bool = False) -> int:
    events = 0
    for seed in range(first, first + count):
        try:
            events += sim.run_seed(seed, voters, wire).events
        except sim.SimulationFailure as e:
            pytest.fail(str(e), pytrace=False)
    return events


@pytest.mark.parametrize("chunk", range(THREE_VOTER_CHUNKS))
def test_three_voters(chunk):
    assert run_chunk(chunk * CHUNK, CHUNK, voters=3) > 0


@pytest.mark.parametrize("chunk", range(FIVE_VOTER_CHUNKS))
def test_five_voters(chunk):
    assert run_chunk(chunk * CHUNK, CHUNK, voters=5) > 0


def test_messages_through_the_wire_codecs():
    run_chunk(50_000, 60, voters=3, wire=True)


@pytest.mark.parametrize("voters", [1, 2, 4])
def test_other_quorum_sizes(voters):
    run_chunk(60_000, 20, voters=voters)


def test_simulation_exercises_the_protocol():
    """The fault model reaches the paths that matter, not only the happy one."""
    total = {}
    for seed in range(200):
        for key, value in sim.run_seed(seed, 3).metrics.items():
            total[key] = total.get(key, 0) + value
    for key in ("elections", "pre_vote_rounds", "pre_votes_rejected", "votes_rejected", "became_leader",
                "truncations", "fetches_diverging", "fetches_snapshot_id", "snapshot_installs",
                "snapshot_chunks_served", "resigned_by_request", "resigned_check_quorum", "crashes",
                "fetches_parked"):
        assert total.get(key, 0) > 0, key


def test_a_seed_replays_identically():
    a, b = sim.run_seed(1234, 3), sim.run_seed(1234, 3)
    assert (a.events, a.appends, a.committed, a.leaders) == (b.events, b.appends, b.committed, b.leaders)


def test_failure_names_the_seed_and_the_replay_command(monkeypatch):
    from kcompat.kraft.raft import leader as leader_mod

    def commit_without_majority(self):                 # a broken high watermark rule
        top = max(s.end_offset or 0 for s in self.replicas.values())
        if self.high_watermark is None or top > self.high_watermark:
            self.high_watermark = top
            return True
        return False

    monkeypatch.setattr(leader_mod.LeaderState, "_maybe_update_high_watermark", commit_without_majority)
    with pytest.raises(sim.SimulationFailure) as e:
        for seed in range(200):
            sim.run_seed(seed, 3)
    assert "replay: python -m tests.kraft.raft.sim --seed" in str(e.value)


def test_command_line(capsys):
    assert sim.main(["--seed", "7", "--voters", "3"]) == 0
    assert "seed 7: ok" in capsys.readouterr().out
