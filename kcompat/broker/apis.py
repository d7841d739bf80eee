"""The APIs kcompat implements and the versions it advertises in ApiVersions.

One handler module per API in ``kcompat/broker/handlers`` (DESIGN.md section 2). Each module has
``API_KEY``, ``MIN_VERSION``, ``MAX_VERSION``, ``handle(ctx, request)`` returning a response, an
awaitable of one, or NO_RESPONSE, and ``error_response(request, version, error_code)`` building the
response Kafka gives when the whole request fails. Advertised ranges match a real Kafka release
(3.8, with the minimum versions Kafka 4.0 keeps, KIP-896, and Produce listed from v0 as Kafka 4.0
does, KAFKA-18659): clients infer the broker's version from them. The APIs Kafka 4.3.1's clients use
on their newest paths go up to 4.3.1's maxima (Metadata 13, Fetch 18, Produce 13, ListOffsets 11,
OffsetCommit and OffsetFetch 10, DescribeGroups 6, DescribeCluster 2, and others where noted).
"""

from __future__ import annotations

from kcompat.broker.handlers import (
    add_offsets_to_txn, add_partitions_to_txn, describe_producers, describe_transactions, end_txn,
    list_transactions, write_txn_markers,
    alter_configs, api_versions, create_partitions, create_topics, delete_groups, delete_records, delete_topics,
    describe_cluster, describe_configs, describe_groups, fetch, find_coordinator, heartbeat,
    incremental_alter_configs, init_producer_id, join_group, leave_group, list_groups, list_offsets, metadata,
    offset_commit, offset_delete, offset_fetch, produce, sync_group, txn_offset_commit,
)
from kcompat.broker.handlers import describe_topic_partitions, elect_leaders, offset_for_leader_epoch
from kcompat.broker.handlers import alter_replica_log_dirs, assign_replicas_to_dirs, describe_log_dirs, unregister_broker
from kcompat.broker.handlers import alter_partition_reassignments, list_partition_reassignments
from kcompat.broker.handlers import consumer_group_describe, consumer_group_heartbeat
from kcompat.broker.handlers import streams_group_describe, streams_group_heartbeat
from kcompat.broker.handlers import share_acknowledge, share_fetch, share_group_describe, share_group_heartbeat
from kcompat.broker.handlers import alter_share_group_offsets, delete_share_group_offsets, describe_share_group_offsets
from kcompat.broker.handlers import (
    delete_share_group_state, initialize_share_group_state, read_share_group_state, read_share_group_state_summary,
    write_share_group_state,
)
from kcompat.broker import controller_gate
from kcompat.broker.handlers import create_acls, delete_acls, describe_acls
from kcompat.broker.handlers import (
    allocate_producer_ids, alter_partition, begin_quorum_epoch, broker_heartbeat, broker_registration, describe_quorum,
    end_quorum_epoch, fetch_snapshot, raft_fetch, vote,
)
from kcompat.broker.handlers import alter_client_quotas, update_features
from kcompat.broker.handlers import list_config_resources
from kcompat.broker.handlers import (
    create_delegation_token, describe_delegation_token, expire_delegation_token, renew_delegation_token,
)
from kcompat.broker.handlers import (
    alter_user_scram_credentials, describe_client_quotas, describe_user_scram_credentials, sasl_authenticate,
    sasl_handshake,
)

_MODULES = (
    produce, fetch, list_offsets, metadata, offset_commit, offset_fetch, find_coordinator, join_group,
    heartbeat, leave_group, sync_group, describe_groups, list_groups, api_versions, create_topics, delete_topics,
    delete_records, init_producer_id, describe_configs, alter_configs, create_partitions, delete_groups,
    incremental_alter_configs, offset_delete, describe_cluster, add_partitions_to_txn, add_offsets_to_txn,
    end_txn, write_txn_markers, describe_producers, describe_transactions, list_transactions, txn_offset_commit,
    describe_quorum, offset_for_leader_epoch, elect_leaders, describe_topic_partitions, describe_log_dirs,
    consumer_group_heartbeat, consumer_group_describe, streams_group_heartbeat, streams_group_describe,
    share_group_heartbeat, share_group_describe, share_fetch, share_acknowledge,
    initialize_share_group_state, read_share_group_state, write_share_group_state, delete_share_group_state,
    read_share_group_state_summary,
    describe_share_group_offsets, alter_share_group_offsets, delete_share_group_offsets,
    describe_acls, create_acls, delete_acls, unregister_broker, alter_replica_log_dirs,
    alter_partition_reassignments, list_partition_reassignments, update_features,
    list_config_resources,
)

HANDLERS = {m.API_KEY: m for m in _MODULES}
# SASL authentication (kcompat.security.sasl_server) and SCRAM credentials (KIP-554)
HANDLERS.update({m.API_KEY: m for m in (sasl_handshake, sasl_authenticate, alter_user_scram_credentials,
                                        describe_user_scram_credentials, describe_client_quotas,
                                        alter_client_quotas)})
# delegation tokens (KIP-48): create, renew and expire go to the active controller
HANDLERS.update({m.API_KEY: m for m in (create_delegation_token, renew_delegation_token, expire_delegation_token,
                                        describe_delegation_token)})

# The controller listener (Kafka's ControllerApis): the KRaft RPCs, metadata replication, and the
# requests brokers forward to the active controller.
_CONTROLLER_MODULES = (
    api_versions, raft_fetch, vote, begin_quorum_epoch, end_quorum_epoch, describe_quorum, fetch_snapshot,
    broker_registration, broker_heartbeat, allocate_producer_ids, create_topics, delete_topics, create_partitions,
    alter_configs, incremental_alter_configs, describe_cluster, alter_partition, elect_leaders,
    describe_acls, create_acls, delete_acls, unregister_broker, assign_replicas_to_dirs,
    alter_partition_reassignments, list_partition_reassignments, update_features,
)

CONTROLLER_HANDLERS = {m.API_KEY: m for m in _CONTROLLER_MODULES}
CONTROLLER_HANDLERS.update({m.API_KEY: m for m in (sasl_handshake, sasl_authenticate, alter_user_scram_credentials,
                                                   alter_client_quotas, create_delegation_token,
                                                   renew_delegation_token, expire_delegation_token)})
# delegation tokens (KIP-48): create, renew and expire go to the active controller
HANDLERS.update({m.API_KEY: m for m in (create_delegation_token, renew_delegation_token, expire_delegation_token,
                                        describe_delegation_token)})


def handlers_for(controller_listener: bool) -> dict:
    """API key -> handler module served on a broker listener or a controller listener (there with
    the CLUSTER_ACTION checks of :mod:`kcompat.broker.controller_gate`)."""
    if not controller_listener:
        return HANDLERS
    global _gated_controller_handlers
    if _gated_controller_handlers is None:
        _gated_controller_handlers = controller_gate.gated(CONTROLLER_HANDLERS)
    return _gated_controller_handlers


_gated_controller_handlers = None


def advertised(controller_listener: bool = False) -> list[tuple[int, int, int]]:
    """``[(api key, min version, max version), ...]`` sorted by key: what ApiVersions answers.

    A handler's ``ADVERTISED_MIN_VERSION``, when it has one, replaces its ``MIN_VERSION`` here
    only: Produce lists v0-v2 that it refuses (KAFKA-18659, see :mod:`.handlers.produce`); on a
    controller listener, which has no Produce, nothing changes."""
    return sorted((k, getattr(m, "ADVERTISED_MIN_VERSION", m.MIN_VERSION), m.MAX_VERSION)
                  for k, m in handlers_for(controller_listener).items())
