"""SCRAM credentials in the metadata log: AlterUserScramCredentials and DescribeUserScramCredentials.

As Kafka's ``ScramControlManager.alterCredentials`` (controller) and ``ScramImage.describe``
(brokers): an upsertion carries salt, iterations and SaltedPassword and becomes a
``UserScramCredentialRecord`` with stored and server keys (the password never reaches the
broker); a deletion becomes a ``RemoveUserScramCredentialRecord``. Errors and messages are
Kafka's: UNACCEPTABLE_CREDENTIAL ("Username must not be empty", "Too few iterations", "Too many
iterations"), UNSUPPORTED_SASL_MECHANISM ("Unknown SCRAM mechanism"), RESOURCE_NOT_FOUND (deleting
or describing a credential that does not exist), DUPLICATE_RESOURCE (a user twice in one request).
"""

from __future__ import annotations

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsResponse as AR
from kcompat.protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsResponse as DR
from kcompat.protocol.metadata_records import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from kcompat.security.scram import MAX_ITERATIONS, MECHANISM_NAMES, MIN_ITERATIONS, keys_from_salted_password

_TWICE = "A user credential cannot be altered twice in the same request"
DESCRIBE_DUPLICATE_USER = "Cannot describe SCRAM credentials for the same user twice in a single request: "
DESCRIBE_USER_THAT_DOES_NOT_EXIST = "Attempt to describe a user credential that does not exist: "


def _validate_name_and_mechanism(name: str, mechanism: int):
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISM_NAMES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def alter_credentials(image, req) -> tuple[list, AR]:
    """``(records, response)`` for an AlterUserScramCredentials request against ``image`` (a
    :class:`kcompat.kraft.image.MetadataImage`). Records are for the users without error, applied
    atomically by the caller; results list deletions, then upsertions, then errors, as Kafka."""
    deletions: dict[str, object] = {}
    upserts: dict[str, object] = {}
    errors: dict[str, tuple[ErrorCode, str]] = {}
    for d in req.deletions:
        if d.name in errors:
            continue
        if deletions.pop(d.name, None) is not None:
            errors[d.name] = (ErrorCode.DUPLICATE_RESOURCE, _TWICE)
            continue
        err = _validate_name_and_mechanism(d.name, d.mechanism)
        if err is None and (d.mechanism, d.name) not in image.scram:
            err = ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        if err is not None:
            errors[d.name] = err
        else:
            deletions[d.name] = d
    for u in req.upsertions:
        if u.name in errors:
            continue
        if deletions.pop(u.name, None) is not None or upserts.pop(u.name, None) is not None:
            errors[u.name] = (ErrorCode.DUPLICATE_RESOURCE, _TWICE)
            continue
        err = _validate_name_and_mechanism(u.name, u.mechanism)
        if err is None and u.iterations < MIN_ITERATIONS:
            err = ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
        elif err is None and u.iterations > MAX_ITERATIONS:
            err = ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
        if err is not None:
            errors[u.name] = err
        else:
            upserts[u.name] = u
    records: list = []
    results: list = []
    for name, d in deletions.items():
        records.append(RemoveUserScramCredentialRecord(name=name, mechanism=d.mechanism))
        results.append(AR.AlterUserScramCredentialsResult(user=name, error_code=0, error_message=None))
    for name, u in upserts.items():
        stored_key, server_key = keys_from_salted_password(u.mechanism, bytes(u.salted_password))
        records.append(UserScramCredentialRecord(name=name, mechanism=u.mechanism, salt=bytes(u.salt),
                                                 stored_key=stored_key, server_key=server_key,
                                                 iterations=u.iterations))
        results.append(AR.AlterUserScramCredentialsResult(user=name, error_code=0, error_message=None))
    for name, (code, message) in errors.items():
        results.append(AR.AlterUserScramCredentialsResult(user=name, error_code=code, error_message=message))
    return records, AR(throttle_time_ms=0, results=results)


def describe_credentials(image, req) -> DR:
    """DescribeUserScramCredentials answered from ``image``: every user with a credential when
    ``req.users`` is null or empty, else each named user (RESOURCE_NOT_FOUND without any,
    DUPLICATE_RESOURCE when named twice); credential infos carry mechanism and iterations only."""
    names = [u.name for u in (req.users or [])]
    if not names:
        unique = {name: False for _mech, name in sorted(image.scram)}
    else:
        unique = {}
        for name in names:
            unique[name] = name in unique
    results = []
    for name, duplicate in unique.items():
        r = DR.DescribeUserScramCredentialsResult(user=name, error_code=0, error_message="", credential_infos=[])
        if duplicate:
            r.error_code, r.error_message = ErrorCode.DUPLICATE_RESOURCE, DESCRIBE_DUPLICATE_USER + name
        else:
            infos = [DR.CredentialInfo(mechanism=mech, iterations=image.scram[(mech, name)].iterations)
                     for mech in sorted(MECHANISM_NAMES) if (mech, name) in image.scram]
            if infos:
                r.credential_infos = infos
            else:
                r.error_code = ErrorCode.RESOURCE_NOT_FOUND
                r.error_message = DESCRIBE_USER_THAT_DOES_NOT_EXIST + name
        results.append(r)
    # error messages "" where Kafka leaves its generated default (librdkafka 2.16 crashes on a null one)
    return DR(throttle_time_ms=0, error_code=0, error_message="", results=results)
