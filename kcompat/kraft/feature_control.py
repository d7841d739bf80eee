"""KRaft feature flags: what kcompat supports, what a new cluster finalizes, and UpdateFeatures.

Feature flags (KIP-584, in KRaft KIP-778; KIP-1022 added the features beyond ``metadata.version``)
are cluster-wide levels, each finalized by a FeatureLevelRecord in the metadata log; a feature
without a record is at level 0 (so a data dir written before any of these records keeps working).
The names and level meanings are Apache Kafka 4.3's (``org.apache.kafka.server.common.Feature``,
``GroupVersion``, ``ShareVersion``, ``TransactionVersion``, ``KRaftVersion``,
``EligibleLeaderReplicasVersion``, ``StreamsVersion``, ``MetadataVersion``).

What kcompat supports (:data:`SUPPORTED`) is only what it implements:

- ``metadata.version`` 7 (3.3-IV3, Kafka 4's minimum) to 20 (3.8-IV0), the level kcompat
  finalizes; a data dir finalized higher (e.g. 21) keeps that level as its maximum;
- ``group.version`` 0-1: 1 is KIP-848's consumer group protocol (ConsumerGroupHeartbeat);
- ``share.version`` 0-1: 1 is KIP-932's share groups;
- ``transaction.version`` 0-2: 2 is KIP-890 part 2 (Produce v12 and TxnOffsetCommit v5 adding
  partitions implicitly, an epoch bump on every EndTxn v5). As Kafka 4.3.1, it has no dependency
  (a cluster at metadata.version 3.8-IV0 may finalize it) and a new cluster at 3.8-IV0 leaves it
  at 0 (its bootstrap metadata.version is 4.0-IV2);
- ``kraft.version`` 0 only: no dynamic quorum (AddRaftVoter / RemoveRaftVoter, KIP-853);
- ``streams.version`` 0-1: 1 is KIP-1071's streams groups (StreamsGroupHeartbeat/Describe). A new
  cluster finalizes it at 1, as a Kafka 4.3.1 node formatted at its default release does (there the
  bootstrap metadata.version 4.2-IV1 decides it; the feature has no dependency, so Kafka formatted
  at 3.8-IV0 with ``--feature streams.version=1`` is the same cluster): Kafka 4.3.1's KafkaApis
  answers StreamsGroupHeartbeat only at level 1 or more, and Kafka Streams with
  ``group.protocol=streams`` needs it;
- not ``eligible.leader.replicas.version`` (no KIP-966 ELR): a broker not listing a feature
  supports only its level 0.

:func:`update_features` validates as Kafka's ``FeatureControlManager.updateFeatures`` and returns
the records plus one error for the whole request (Kafka 4's QuorumController answers the first
failure, in the order of a Java ``HashMap`` of the feature names, for every feature).
"""

from __future__ import annotations

from dataclasses import dataclass

from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.metadata_records import FeatureLevelRecord

METADATA_VERSION_NAME = "metadata.version"
KRAFT_VERSION_NAME = "kraft.version"

# Kafka 4.3.1's MetadataVersion: level -> (name, didMetadataChange)
METADATA_VERSIONS: dict[int, tuple[str, bool]] = {
    7: ("3.3-IV3", True), 8: ("3.4-IV0", True), 9: ("3.5-IV0", False), 10: ("3.5-IV1", False),
    11: ("3.5-IV2", True), 12: ("3.6-IV0", False), 13: ("3.6-IV1", True), 14: ("3.6-IV2", True),
    15: ("3.7-IV0", True), 16: ("3.7-IV1", False), 17: ("3.7-IV2", True), 18: ("3.7-IV3", False),
    19: ("3.7-IV4", False), 20: ("3.8-IV0", False), 21: ("3.9-IV0", False), 22: ("4.0-IV0", False),
    23: ("4.0-IV1", True), 24: ("4.0-IV2", False), 25: ("4.0-IV3", False), 26: ("4.1-IV0", False),
    27: ("4.1-IV1", False), 28: ("4.2-IV0", False), 29: ("4.2-IV1", False), 30: ("4.3-IV0", True),
    31: ("4.4-IV0", False),
}
METADATA_VERSION_MIN = 7       # MetadataVersion.MINIMUM_VERSION (3.3-IV3)
METADATA_VERSION = 20          # 3.8-IV0: what kcompat finalizes for a new cluster and supports at most

# Kafka 4.3.1's production features: name -> {level: (bootstrap metadata.version, {dependency: level})}
KAFKA_FEATURES: dict[str, dict[int, tuple[int, dict[str, int]]]] = {
    "kraft.version": {0: (7, {}), 1: (21, {})},
    "transaction.version": {0: (7, {}), 1: (24, {}), 2: (24, {})},
    "group.version": {0: (7, {}), 1: (22, {})},
    "eligible.leader.replicas.version": {0: (7, {}), 1: (26, {METADATA_VERSION_NAME: 23})},
    "share.version": {0: (7, {}), 1: (28, {})},
    "streams.version": {0: (7, {}), 1: (29, {})},
}

# What kcompat implements: name -> (min level, max level); metadata.version's max see supported()
SUPPORTED: dict[str, tuple[int, int]] = {
    METADATA_VERSION_NAME: (METADATA_VERSION_MIN, METADATA_VERSION),
    "group.version": (0, 1),
    "share.version": (0, 1),
    "transaction.version": (0, 2),
    "kraft.version": (0, 0),
    "streams.version": (0, 1),
}

# Levels a new kcompat cluster finalizes whatever its bootstrap metadata.version (see the module
# docstring: streams groups are on by default, as on a Kafka 4.3.1 node formatted at its default)
BOOTSTRAP_AT_LEAST: dict[str, int] = {"streams.version": 1}

# FeatureUpdate.UpgradeType codes (UpdateFeaturesRequest v1+)
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3

ALL_FAILED = "The update failed for all features since the following feature had an error: "


def metadata_version_name(level: int) -> str:
    """``"3.8-IV0"`` for 20 (Kafka's ``MetadataVersion.version()``); the number for unknown ones."""
    return METADATA_VERSIONS.get(level, (str(level), False))[0]


def supported(finalized: dict[str, int]) -> dict[str, tuple[int, int]]:
    """This node's supported range per feature, ``{name: (min, max)}``: :data:`SUPPORTED`, with
    ``metadata.version`` up to the finalized level when a data dir already has a higher one."""
    out = dict(SUPPORTED)
    mv = finalized.get(METADATA_VERSION_NAME, 0)
    if mv > METADATA_VERSION:
        out[METADATA_VERSION_NAME] = (METADATA_VERSION_MIN, mv)
    return out


def default_levels(metadata_version: int) -> dict[str, int]:
    """The levels Kafka 4.3 finalizes for a new cluster at ``metadata_version`` (its
    ``Feature.defaultLevel``: the highest level whose bootstrap metadata.version is not above it),
    for the features kcompat supports, capped at kcompat's maximum, raised to
    :data:`BOOTSTRAP_AT_LEAST`; level 0 features left out."""
    out = {METADATA_VERSION_NAME: metadata_version}
    for name, levels in KAFKA_FEATURES.items():
        if name == KRAFT_VERSION_NAME or name not in SUPPORTED:
            continue   # kraft.version is the Raft layer's, finalized by formatting the quorum
        level = max(lvl for lvl, (boot, _) in levels.items() if boot <= metadata_version)
        level = min(max(level, BOOTSTRAP_AT_LEAST.get(name, 0)), SUPPORTED[name][1])
        if level:
            out[name] = level
    return out


def bootstrap_records(metadata_version: int = METADATA_VERSION) -> list:
    """FeatureLevelRecords of a new cluster (Kafka's bootstrap metadata), metadata.version first."""
    return [FeatureLevelRecord(name=n, feature_level=lvl) for n, lvl in default_levels(metadata_version).items()]


@dataclass
class Update:
    """One requested change: ``level`` (UpdateFeatures' MaxVersionLevel) and ``upgrade_type``
    (1 UPGRADE, 2 SAFE_DOWNGRADE, 3 UNSAFE_DOWNGRADE, anything else unknown)."""

    feature: str
    level: int
    upgrade_type: int = UPGRADE


def java_hash_map_order(names: list[str]) -> list[str]:
    """``names`` (distinct) in the iteration order of a Java ``HashMap`` they were put into in this
    order: by bucket of the spread ``String.hashCode``, insertion order within a bucket."""
    capacity = 16
    while len(names) > capacity * 0.75:
        capacity *= 2

    def bucket(s: str) -> int:
        data = s.encode("utf-16-be")
        h = 0
        for i in range(0, len(data), 2):   # String.hashCode over UTF-16 code units
            h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)
    return [n for _, _, n in sorted((bucket(n), i, n) for i, n in enumerate(names))]


def _range_text(lo: int, hi: int) -> str:
    """Kafka's ``VersionRange.toString``."""
    return str(lo) if lo == hi else f"{lo}+" if hi == 32767 else f"{lo}-{hi}"


def _reason_not_supported(level: int, what: str, rng: tuple[int, int]) -> str | None:
    """Kafka's ``QuorumFeatures.reasonNotSupported``."""
    lo, hi = rng
    if lo <= level <= hi:
        return None
    if hi == 0:
        return f"{what} does not support this feature."
    return f"{what} only supports versions {_range_text(lo, hi)}"


def _invalid(feature: str, level: int, reason: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_UPDATE_VERSION,
                              f"Invalid update version {level} for feature {feature}. {reason}")


def metadata_changed(a: int, b: int) -> bool:
    """Kafka's ``MetadataVersion.checkIfMetadataChanged``: a version in (low, high] changed the
    metadata format."""
    lo, hi = min(a, b), max(a, b)
    return any(METADATA_VERSIONS.get(v, ("", False))[1] for v in range(lo + 1, hi + 1))


def update_features(finalized: dict[str, int], updates: list[Update], *, node_id: int,
                    local: dict[str, tuple[int, int]],
                    brokers: dict[int, dict[str, tuple[int, int]]]) -> list:
    """UpdateFeatures as Kafka 4.3's ``FeatureControlManager.updateFeatures``: returns the
    FeatureLevelRecords to commit; raises :class:`~kcompat.protocol.errors.KafkaError` with the first failure
    (INVALID_UPDATE_VERSION and Kafka's message). ``finalized``: the image's levels;
    ``local``: this controller's supported ranges; ``brokers``: each registered broker's ranges
    (from its registration). A repeated feature counts once, with its last level and type."""
    wanted: dict[str, Update] = {}
    for u in updates:
        wanted[u.feature] = u
    proposed = dict(finalized)
    proposed.update({name: u.level for name, u in wanted.items()})
    records: list = []
    for name in java_hash_map_order(list(wanted)):
        u = wanted[name]
        records += _update_one(finalized, proposed, u, node_id, local, brokers)
    return records


def _update_one(finalized, proposed, u: Update, node_id, local, brokers) -> list:
    name, level = u.feature, u.level
    if u.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        raise _invalid(name, level, "The controller does not support the given upgrade type.")
    current = finalized.get(name, 0)
    if level < 0:
        raise _invalid(name, level, "A feature version cannot be less than 0.")
    reason = _reason_not_supported(level, f"Local controller {node_id}", local.get(name, (0, 0)))
    for broker_id in sorted(brokers):
        if reason is None:
            reason = _reason_not_supported(level, f"Broker {broker_id}", brokers[broker_id].get(name, (0, 0)))
    if reason is not None:
        raise _invalid(name, level, reason)
    if level < current and u.upgrade_type == UPGRADE:
        raise _invalid(name, level, "Can't downgrade the version of this feature without setting the "
                                    "upgrade type to either safe or unsafe downgrade.")
    if level > current and u.upgrade_type != UPGRADE:
        raise _invalid(name, level, "Can't downgrade to a newer version.")
    if name == METADATA_VERSION_NAME:
        return _update_metadata_version(current, level, u.upgrade_type == UNSAFE_DOWNGRADE)
    if name == KRAFT_VERSION_NAME:
        if level != current and u.upgrade_type != UPGRADE:
            raise _invalid(name, level, "Can't downgrade the version of this feature.")
        return []   # only level 0 is supported: nothing changes (no record, as Kafka's Raft layer)
    versions = KAFKA_FEATURES.get(name)
    if versions is None:
        raise _invalid(name, level, f"Feature {name} not found.")
    if level >= 1 and proposed.get(METADATA_VERSION_NAME, 0) < METADATA_VERSION_MIN:
        raise _invalid(name, level, f"{name} could not be set to {level} because it depends on metadata.version="
                                    f"{METADATA_VERSION_MIN} ({metadata_version_name(METADATA_VERSION_MIN)})")
    for dep, dep_level in versions.get(level, (0, {}))[1].items():
        have = proposed.get(dep)
        if have is None or have < dep_level:
            raise _invalid(name, level, f"{name} could not be set to {level} because it depends on {dep} "
                                        f"level {dep_level}")
    return [FeatureLevelRecord(name=name, feature_level=level)]


def _update_metadata_version(current: int, level: int, unsafe: bool) -> list:
    """Kafka's ``FeatureControlManager.updateMetadataVersion``."""
    if level not in METADATA_VERSIONS:
        raise KafkaError(ErrorCode.INVALID_UPDATE_VERSION,
                                 f"Invalid metadata.version {level}. Valid versions are from {METADATA_VERSION_MIN} "
                                 f"to {max(METADATA_VERSIONS)}.")
    if level < current and metadata_changed(current, level):
        reason = ("Unsafe metadata downgrade is not supported in this version." if unsafe else
                  "Refusing to perform the requested downgrade because it might delete metadata information.")
        raise KafkaError(ErrorCode.INVALID_UPDATE_VERSION,
                                 f"Unsupported metadata.version downgrade from {current} to {level}. {reason}")
    return [FeatureLevelRecord(name=METADATA_VERSION_NAME, feature_level=level)]
