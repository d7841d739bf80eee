"""The registry's errors as Confluent's Schema Registry answers them: an HTTP status, an
``error_code`` (the status for generic errors, a 5-digit code otherwise) and a message
(Confluent's ``io.confluent.kafka.schemaregistry.rest.exceptions.Errors``)."""

from __future__ import annotations


class RegistryError(Exception):
    """``status`` (HTTP), ``code`` (Confluent's error_code), ``message``."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict:
        """The JSON body Confluent answers: ``{"error_code": ..., "message": ...}``."""
        return {"error_code": self.code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(schema_id: int | None = None) -> RegistryError:
    if schema_id is None:
        return RegistryError(404, 40403, "Schema not found")
    return RegistryError(404, 40403, f"Schema {schema_id} not found")


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently")


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted")


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40406, f"Subject '{subject}' Version {version} was soft deleted.Set permanent=true "
                                     "to delete permanently")


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40407, f"Subject '{subject}' Version {version} was not deleted first before being "
                                     "permanently deleted")


def subject_config_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")


def subject_mode_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")


def incompatible(message: str) -> RegistryError:
    return RegistryError(409, 409, message)


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema {detail}")


def invalid_version(version) -> RegistryError:
    return RegistryError(422, 42202, f"The specified version '{version}' is not a valid version id. Allowed values "
                                     "are between [1, 2^31-1] and the string \"latest\"")


def invalid_compatibility_level() -> RegistryError:
    return RegistryError(422, 42203, "Invalid compatibility level. Valid values are none, backward, forward, full, "
                                     "backward_transitive, forward_transitive, and full_transitive")


def invalid_mode(mode) -> RegistryError:
    return RegistryError(422, 42204, f"Invalid mode {mode}. Valid values are READWRITE, READONLY, IMPORT")


def not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


def reference_exists(subject: str, version: int) -> RegistryError:
    return RegistryError(422, 42206, f"One or more references exist to the schema "
                                     f"{{magic=1,keytype=SCHEMA,subject={subject},version={version}}}.")


def invalid_schema_id(schema_id) -> RegistryError:
    return RegistryError(422, 42207, f"Schema id {schema_id} is not valid")


def bad_request(message: str) -> RegistryError:
    return RegistryError(400, 400, message)


def store_error(message: str) -> RegistryError:
    """50001: the ``_schemas`` topic could not be read or written."""
    return RegistryError(500, 50001, f"Error in the backend data store - {message}")


def store_timeout(message: str) -> RegistryError:
    """50002: the write did not complete in time."""
    return RegistryError(500, 50002, f"Operation timed out - {message}")


def forward_error(message: str) -> RegistryError:
    """50003: the write could not be forwarded to the writer node."""
    return RegistryError(500, 50003, f"Error while forwarding the request to the leader - {message}")
