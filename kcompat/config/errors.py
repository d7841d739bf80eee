"""The one exception the configuration system raises.

Kafka raises ``org.apache.kafka.common.config.ConfigException`` for a bad server.properties and
answers ``INVALID_CONFIG`` (error code 40) to CreateTopics / AlterConfigs / IncrementalAlterConfigs
requests whose configs do not validate. A few malformed requests (duplicate keys, unknown
operation) are ``INVALID_REQUEST`` (42) instead. :class:`ConfigError` carries the offending key,
a Kafka-style message, and the *name* of the protocol error a handler should answer with, so this
package does not import ``kcompat.protocol``.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration key is unknown, malformed or out of range.

    Attributes:
        key: the configuration name at fault (``None`` when the error is not about one key).
        message: a human-readable, Kafka-style explanation; it always names the key.
        error: name of the ``kcompat.protocol.errors.ErrorCode`` member to answer a request with:
            ``"INVALID_CONFIG"`` (default) or ``"INVALID_REQUEST"``.
    """

    def __init__(self, key: str | None, message: str, *, error: str = "INVALID_CONFIG") -> None:
        self.key = key
        self.error = error
        if key is not None and key not in message:
            message = f"{key}: {message}"
        self.message = message
        super().__init__(message)


def invalid_value(key: str, value: object, reason: str | None = None) -> ConfigError:
    """The error Kafka's ``ConfigException(name, value, message)`` produces.

    Kafka formats it as ``Invalid value <value> for configuration <name>: <message>``.
    """
    text = f"Invalid value {value} for configuration {key}"
    if reason:
        text += f": {reason}"
    return ConfigError(key, text)
