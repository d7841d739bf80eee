"""Kafka principals (``KafkaPrincipal``): who a connection authenticated as.

A principal is ``type:name``; Kafka's authenticators produce type ``User``. A connection that did
not authenticate (a PLAINTEXT listener, or TLS without a client certificate) is
``User:ANONYMOUS``, as Kafka's ``KafkaPrincipal.ANONYMOUS``. ACLs, ``super.users`` and quotas
name principals in this ``User:alice`` form.
"""

from __future__ import annotations

from dataclasses import dataclass, field

USER_TYPE = "User"


@dataclass(frozen=True)
class KafkaPrincipal:
    """``principal_type`` (``User``) and ``name``; ``str()`` gives Kafka's ``User:alice``.
    ``token_authenticated``: the connection authenticated with a delegation token (KIP-48); as in
    Kafka's ``KafkaPrincipal`` it takes no part in equality."""

    principal_type: str
    name: str
    token_authenticated: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> "KafkaPrincipal":
        """``"User:alice"`` -> KafkaPrincipal("User", "alice"); ValueError without a ``:``
        (Kafka's ``SecurityUtils.parseKafkaPrincipal``)."""
        kind, sep, name = text.partition(":")
        if not sep or not kind:
            raise ValueError(f"expected a string in format principalType:principalName but got {text}")
        return cls(kind, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def user(name: str, token_authenticated: bool = False) -> KafkaPrincipal:
    return KafkaPrincipal(USER_TYPE, name, token_authenticated)
