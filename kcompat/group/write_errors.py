"""What a group coordinator request answers when its ``__consumer_offsets`` write fails.

Kafka's coordinators write with acks=-1; when the append or its replication fails, the request gets
a coordinator error instead of the produce error (Kafka's
``CoordinatorOperationExceptionHelper.handleOperationException`` and
``GroupMetadataManager.appendGroupMetadataErrorToResponseError``):

    UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT -> COORDINATOR_NOT_AVAILABLE
    NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR                                      -> NOT_COORDINATOR
    MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_FETCH_SIZE                     -> UNKNOWN_SERVER_ERROR

Clients retry COORDINATOR_NOT_AVAILABLE and look the coordinator up again on NOT_COORDINATOR.
(NOT_ENOUGH_REPLICAS_AFTER_APPEND is the acks=-1 error of the classic GroupMetadataManager.)
"""

from __future__ import annotations

from kcompat.protocol._gen_support import Struct
from kcompat.protocol.errors import COORDINATOR_APPEND_ERRORS, ErrorCode, coordinator_error_for_append
from kcompat.protocol.messages.join_group import JoinGroupResponse
from kcompat.protocol.messages.sync_group import SyncGroupResponse

# the group coordinator's table adds INVALID_FETCH_SIZE (GroupMetadataManager) to the shared one
_APPEND_ERRORS = {**COORDINATOR_APPEND_ERRORS, ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR}


def coordinator_error(code: int) -> ErrorCode:
    """The error a request gets for a write that failed with the append error ``code``."""
    return coordinator_error_for_append(code, _APPEND_ERRORS)


def with_error(response: Struct, error: ErrorCode) -> Struct:
    """``response`` (modified in place) with ``error`` wherever it says NONE: the top-level
    ``error_code`` and those of its parts (partitions of an OffsetCommit, groups of a
    DeleteGroups...). A JoinGroup or SyncGroup answer loses what only a success carries
    (generation, leader, members, assignment), as Kafka's error responses."""
    if isinstance(response, JoinGroupResponse):
        if response.error_code == 0:
            response.error_code = int(error)
            response.generation_id = -1
            response.leader = ""
            response.members = []
            response.skip_assignment = False
            response.protocol_type = None
            if response.protocol_name is not None:
                response.protocol_name = ""
        return response
    if isinstance(response, SyncGroupResponse):
        if response.error_code == 0:
            response.error_code = int(error)
            response.assignment = b""
            response.protocol_type = None
            response.protocol_name = None
        return response
    _set_errors(response, int(error))
    return response


def _set_errors(obj: Struct, code: int) -> None:
    for name in obj.__slots__:
        value = getattr(obj, name)
        if name == "error_code":
            if value == 0:
                setattr(obj, name, code)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Struct):
                    _set_errors(item, code)
