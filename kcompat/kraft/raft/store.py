"""The persisted election state (``quorum-state`` file) and where the core keeps it.

Kafka's ``FileQuorumStateStore`` writes one line of JSON: the JSON form of ``QuorumStateData``
(kafka-specs/raft/QuorumStateData.json, generated in ``kcompat.protocol.raft_records``) plus a
``data_version`` field, to ``quorum-state.tmp``, fsyncs it and renames it over ``quorum-state``.
With static voters (``kraft.version`` 0) it writes version 0::

    {"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,
     "currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}

and version 1 (KIP-853) drops the voters and adds ``votedDirectoryId``. Both are read.

The core writes the election state before it acts on a transition (KIP-595: a vote is persisted
before it is granted); the write must be durable when :meth:`QuorumStateStore.write` returns.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kcompat.log.checkpoint import topic_id_from_str
from kcompat.log.errors import CheckpointError, LogDirError, LogStorageError
from kcompat.protocol.primitives import ZERO_UUID
from kcompat.protocol.raft_records.quorum_state_data import QuorumStateData

NOT_VOTED = -1
NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class ElectionState:
    """Kafka ``ElectionState``: the epoch, and the leader or the vote cast in it (never both by
    rule of the protocol, except that a voter that voted keeps its vote when it learns the leader)."""

    epoch: int
    leader_id: int = NO_LEADER
    voted_id: int = NOT_VOTED
    voters: frozenset[int] = frozenset()

    @property
    def has_leader(self) -> bool:
        return self.leader_id >= 0

    @property
    def has_voted(self) -> bool:
        return self.voted_id >= 0


class QuorumStateStore(Protocol):
    def read(self) -> ElectionState | None: ...

    def write(self, state: ElectionState) -> None: ...


class MemoryQuorumStateStore:
    """In-memory store for tests and the simulation; survives a simulated crash."""

    def __init__(self) -> None:
        self.state: ElectionState | None = None
        self.writes = 0

    def read(self) -> ElectionState | None:
        return self.state

    def write(self, state: ElectionState) -> None:
        self.state = state
        self.writes += 1


def _uuid_to_kafka(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")


def _uuid_from_kafka(s: str) -> uuid.UUID:
    """Kafka ``Uuid.fromString``; ValueError if it is not url-safe base64 of 16 bytes."""
    try:
        return topic_id_from_str(s)
    except CheckpointError as e:
        raise ValueError(str(e)) from None


def to_quorum_state_data(state: ElectionState, version: int = 0) -> QuorumStateData:
    data = QuorumStateData(leader_id=state.leader_id, leader_epoch=state.epoch,
                           voted_id=state.voted_id)
    if version == 0:
        data.cluster_id = ""
        data.applied_offset = 0
        data.current_voters = [QuorumStateData.Voter(voter_id=v) for v in sorted(state.voters)]
    return data


def encode_json(state: ElectionState, version: int = 0) -> str:
    """The one-line JSON Kafka's ``FileQuorumStateStore`` writes (field order of the spec)."""
    data = to_quorum_state_data(state, version)
    obj: dict = {}
    if version == 0:
        obj["clusterId"] = data.cluster_id
    obj["leaderId"] = data.leader_id
    obj["leaderEpoch"] = data.leader_epoch
    obj["votedId"] = data.voted_id
    if version >= 1:
        obj["votedDirectoryId"] = _uuid_to_kafka(data.voted_directory_id or ZERO_UUID)
    if version == 0:
        obj["appliedOffset"] = data.applied_offset
        obj["currentVoters"] = [{"voterId": v.voter_id} for v in data.current_voters]
    obj["data_version"] = version
    return json.dumps(obj, separators=(",", ":"))


def decode_json(line: str) -> ElectionState:
    """Parse one line written by :func:`encode_json` or Kafka. As Kafka's generated
    ``QuorumStateDataJsonConverter``, every field of the ``data_version`` is mandatory and must
    have its type (int32 / int64 integers, a string cluster id, a list or null of voters, a uuid);
    raises ValueError otherwise."""
    obj = json.loads(line)
    if not isinstance(obj, dict) or "data_version" not in obj:
        raise ValueError(f"quorum-state is not an object with data_version: {line!r}")
    version = obj["data_version"]
    if type(version) is not int or version not in range(QuorumStateData.VALID_VERSIONS[0],
                                                         QuorumStateData.VALID_VERSIONS[1] + 1):
        raise ValueError(f"quorum-state data_version {version!r} is not supported")
    ints = {"leaderId": 32, "leaderEpoch": 32, "votedId": 32}
    if version == 0:
        ints["appliedOffset"] = 64
        if not isinstance(_field(obj, "clusterId", version), str):
            raise ValueError("quorum-state clusterId is not a string")
        voters = _field(obj, "currentVoters", version)
        if voters is not None and (not isinstance(voters, list) or not all(
                isinstance(v, dict) and _is_int(v.get("voterId"), 32) for v in voters)):
            raise ValueError("quorum-state currentVoters is not a list of {voterId: int32}")
    else:
        voters = None
        directory = _field(obj, "votedDirectoryId", version)
        if not isinstance(directory, str):
            raise ValueError("quorum-state votedDirectoryId is not a uuid")
        _uuid_from_kafka(directory)  # validated; directory ids are not used yet
    for name, bits in ints.items():
        if not _is_int(_field(obj, name, version), bits):
            raise ValueError(f"quorum-state {name} is not an int{bits}")
    return ElectionState(epoch=obj["leaderEpoch"], leader_id=obj["leaderId"], voted_id=obj["votedId"],
                         voters=frozenset(v["voterId"] for v in voters or ()))


def _field(obj: dict, name: str, version: int):
    if name not in obj:
        raise ValueError(f"quorum-state has no field {name!r}, which version {version} requires")
    return obj[name]


def _is_int(value, bits: int) -> bool:
    return type(value) is int and -(1 << (bits - 1)) <= value < 1 << (bits - 1)


class FileQuorumStateStore:
    """``<metadata log dir>/quorum-state`` as Kafka writes it: tmp file, fsync, atomic rename,
    fsync of the directory."""

    FILE_NAME = "quorum-state"

    def __init__(self, path: Path, version: int = 0) -> None:
        self.path = Path(path)
        self.version = version

    def read(self) -> ElectionState | None:
        """The stored election state, None if there is no file. Raises LogDirError naming the
        file if it is empty or not the JSON Kafka writes (Kafka's ``FileQuorumStateStore``
        fails the start-up too: the votes it recorded cannot be guessed)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as e:
            raise LogDirError(f"cannot read {self.path}: {e}") from None
        line = text.splitlines()[0] if text else ""
        try:
            if not line:
                raise ValueError("the file is empty")
            return decode_json(line)
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise LogDirError(f"{self.path}: not a valid quorum state ({e}); Kafka refuses to start "
                              f"with it too: restore it, or remove it on a node whose votes do not "
                              f"matter (a single-node quorum; a node of a larger quorum may then vote "
                              f"twice in an epoch)") from None

    def write(self, state: ElectionState) -> None:
        """Write ``state`` durably (tmp file, fsync, rename, fsync of the directory). Raises
        LogStorageError (an OSError naming the file) if that fails; the previous file then stays
        whole and no temporary file is left."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        data = encode_json(state, self.version).encode("utf-8")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except OSError as e:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise LogStorageError(f"writing {self.path}", e) from e
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
