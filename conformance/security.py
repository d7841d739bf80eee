"""Security listeners for the ``security`` group: brokers started with SSL, SASL and ACLs.

``--group security`` makes the suite start each broker (the ``kcompat`` preset of ``--broker-cmd``
and the reference Kafka) with the same security set-up, beside the PLAINTEXT listener the harness
itself uses:

- an ``SSL`` listener with a key store issued at run time by a throw-away CA
  (:mod:`conformance.tls_ca`; no key is ever committed), one-way TLS (``ssl.client.auth=none``);
- a ``SASL_PLAINTEXT`` listener with PLAIN (JAAS users ``conf-admin`` and ``alice``) and
  SCRAM-SHA-512 (``alice``'s credential is created after start with AlterUserScramCredentials
  through the PLAINTEXT listener, as ``kafka-configs.sh --alter --add-config`` would);
- ``StandardAuthorizer`` with ``super.users=User:ANONYMOUS;User:conf-admin`` and Kafka's default
  ``allow.everyone.if.no.acl.found=false``: the harness's set-up admin and the inter-broker and
  controller traffic use the PLAINTEXT listeners (principal ``User:ANONYMOUS``), so only the
  scenarios' SASL principal ``User:alice`` is judged by ACLs, which each case creates for itself.

Passwords are made per run. The picklable description a case sees is ``TargetInfo.security``
(:meth:`SecurityProfile.info`). The module also has the wire-level SASL helpers (SaslHandshake v1,
SaslAuthenticate v1, PLAIN and SCRAM through the ``scramp`` package) and a TLS wire connection.
"""

from __future__ import annotations

import secrets
import ssl
from pathlib import Path

from conformance import procs, wire
from conformance.reference import ReferenceKafka
from conformance.targets import CommandTarget
from conformance.tls_ca import TestCA

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ADMIN_USER = "conf-admin"
USER = "alice"
PRINCIPAL = f"User:{USER}"
SCRAM_ITERATIONS = 4096
SASL_AUTHENTICATION_FAILED = 58


class SecurityProfile:
    """The security set-up of one broker: CA and key store in ``directory``, two free ports on
    ``host`` (SASL_PLAINTEXT and SSL), per-run passwords; :meth:`properties` gives the broker's
    configuration, :meth:`provision` the SCRAM credential after start."""

    def __init__(self, directory: Path, host: str) -> None:
        self.host = host
        self.ca = TestCA(Path(directory))
        self.server = self.ca.issue("broker", hosts=("localhost", host))
        self.sasl_port = procs.free_port(host)
        self.ssl_port = procs.free_port(host)
        self.password = secrets.token_urlsafe(12)
        self.admin_password = secrets.token_urlsafe(12)

    @property
    def sasl_bootstrap(self) -> str:
        return f"{self.host}:{self.sasl_port}"

    @property
    def ssl_bootstrap(self) -> str:
        return f"{self.host}:{self.ssl_port}"

    def listeners(self) -> str:
        """The listeners added beside the harness's PLAINTEXT one."""
        return f"SASL_PLAINTEXT://{self.sasl_bootstrap},SSL://{self.ssl_bootstrap}"

    def properties(self) -> dict[str, str]:
        """Broker properties (the same keys for kcompat and Kafka) except ``listeners``."""
        jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="{ADMIN_USER}" password="{self.admin_password}" '
                f'user_{ADMIN_USER}="{self.admin_password}" user_{USER}="{self.password}";')
        return {
            "listener.security.protocol.map":
                "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            **self.ca.broker_ssl_props(self.server),
            "authorizer.class.name": AUTHORIZER,
            "super.users": f"User:ANONYMOUS;User:{ADMIN_USER}",
        }

    def info(self) -> dict:
        """What a case needs (picklable): addresses, the CA, the user and passwords."""
        return {"sasl_bootstrap": self.sasl_bootstrap, "ssl_bootstrap": self.ssl_bootstrap,
                "ca_path": str(self.ca.ca_path), "user": USER, "password": self.password,
                "principal": PRINCIPAL, "admin_user": ADMIN_USER, "admin_password": self.admin_password,
                "mechanisms": ["PLAIN", "SCRAM-SHA-512"]}

    def provision(self, bootstrap: str, timeout: float = 60.0) -> None:
        """Create ``alice``'s SCRAM-SHA-512 credential through ``bootstrap`` (PLAINTEXT, a super
        user) and wait until a SCRAM login and a TLS connection succeed."""
        from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                           UserScramCredentialUpsertion)

        admin = AdminClient({"bootstrap.servers": bootstrap})
        upsert = UserScramCredentialUpsertion(USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512,
                                                                        SCRAM_ITERATIONS),
                                              self.password.encode(), secrets.token_bytes(16))
        admin.alter_user_scram_credentials([upsert])[USER].result(timeout)

        def ready() -> bool:
            with wire.Connection(self.sasl_bootstrap, 5) as conn:
                if sasl_login(conn, "SCRAM-SHA-512", USER, self.password)["error"] != 0:
                    return False
            with tls_connection(self.ssl_bootstrap, str(self.ca.ca_path), 5) as conn:
                return wire.api_versions(conn, 0).error_code == 0

        procs.wait_until(ready, timeout, interval=0.25, what=f"SCRAM login and TLS at {self.sasl_bootstrap}")


class _Secured:
    """Mixin for a :class:`~conformance.targets.ProcessTarget`: a :class:`SecurityProfile` in the
    target's work directory, provisioned after every start; ``security`` is its :meth:`info`."""

    profile: SecurityProfile

    def start(self) -> None:
        super().start()
        try:
            self.profile.provision(self.bootstrap)
        except Exception as e:
            self.kill()
            raise RuntimeError(f"{self.label}: security set-up failed: {e}\n{self.log_tail()}") from None

    @property
    def security(self) -> dict:
        return self.profile.info()

    def describe(self) -> dict:
        d = super().describe()
        d["security"] = {"listeners": self.profile.listeners(), "authorizer": AUTHORIZER,
                         "super.users": self.profile.properties()["super.users"]}
        return d


class SecureCommandTarget(_Secured, CommandTarget):
    """The ``kcompat`` preset of ``--broker-cmd`` with the security listeners (``--override``s)."""

    def __init__(self, command: str, workdir: Path, **kw) -> None:
        super().__init__(command, workdir, **kw)
        self.profile = SecurityProfile(self.workdir / "security", self.host)

    def argv(self) -> list[str]:
        argv = super().argv()
        plain = f"listeners=PLAINTEXT://{self.host}:{self.port}"
        argv[argv.index(plain)] = f"{plain},{self.profile.listeners()}"
        for key, value in self.profile.properties().items():
            argv += ["--override", f"{key}={value}"]
        return argv


class SecureReferenceKafka(_Secured, ReferenceKafka):
    """The reference Kafka with the same security listeners and authorizer."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.profile = SecurityProfile(self.workdir / "security", self.host)

    def server_properties(self) -> dict[str, str]:
        props = super().server_properties()
        props["listeners"] += "," + self.profile.listeners()
        props["advertised.listeners"] += "," + self.profile.listeners()
        props.update(self.profile.properties())
        return props


# -- wire helpers ------------------------------------------------------------------------------------

def tls_connection(bootstrap: str, ca_path: str, timeout: float = 10.0) -> wire.Connection:
    """A :class:`wire.Connection` over TLS, verifying the broker's certificate against ``ca_path``."""
    conn = wire.Connection(bootstrap, timeout)
    host = bootstrap.rsplit(":", 1)[0]
    try:
        conn.sock = ssl.create_default_context(cafile=ca_path).wrap_socket(conn.sock, server_hostname=host)
    except Exception:
        conn.close()
        raise
    return conn


def sasl_handshake(conn: wire.Connection, mechanism: str) -> tuple[int, list[str]]:
    """SaslHandshake v1: (error code, the broker's enabled mechanisms)."""
    r = conn.request(17, 1, wire.Writer().string(mechanism).getvalue())
    error = r.i16()
    return error, r.array(r.string)


def sasl_authenticate(conn: wire.Connection, token: bytes) -> dict:
    """SaslAuthenticate v1: {"error", "message", "auth_bytes", "session_lifetime_ms"}."""
    r = conn.request(36, 1, wire.Writer().bytes_(token).getvalue())
    return {"error": r.i16(), "message": r.string(), "auth_bytes": r.bytes_(), "session_lifetime_ms": r.i64()}


def sasl_login(conn: wire.Connection, mechanism: str, user: str, password: str) -> dict:
    """Handshake and authenticate with PLAIN or SCRAM-SHA-*; the last SaslAuthenticate answer (with
    ``"handshake"``: the handshake's error code). A failed exchange stops at the failing step."""
    error, mechanisms = sasl_handshake(conn, mechanism)
    if error:
        return {"error": error, "message": None, "handshake": error, "mechanisms": mechanisms}
    if mechanism == "PLAIN":
        res = sasl_authenticate(conn, b"\0" + user.encode() + b"\0" + password.encode())
    else:
        import scramp

        client = scramp.ScramClient([mechanism], user, password)
        res = sasl_authenticate(conn, client.get_client_first().encode())
        if res["error"] == 0:
            client.set_server_first(res["auth_bytes"].decode())
            res = sasl_authenticate(conn, client.get_client_final().encode())
            if res["error"] == 0:
                client.set_server_final(res["auth_bytes"].decode())
    res["handshake"] = 0
    return res

