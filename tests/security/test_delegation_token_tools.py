"""Delegation tokens (KIP-48) with Kafka 4.3.1's own tools against a real kcompat process:
``kafka-delegation-tokens.sh`` (``org.apache.kafka.tools.DelegationTokenCommand``) creates a token
for alice (SASL/PLAIN) with a maximum lifetime and bob as renewer, describes it, renews it as bob
and expires it; in between the Java console producer and consumer authenticate with the token
(SCRAM-SHA-512 with ``tokenauth=true``, as Spark's executors do), act as alice, and cannot log in
once the token is expired."""

from __future__ import annotations

import re
import uuid

import pytest

from conformance import maven
from conformance.clients.java import JavaTools
from tests.security.sasl_support import PASSWORDS, logged
from tests.security.token_support import token_broker

_ROW = re.compile(r"^(\S{22})\s+(\S{88})\s+(User:\S+)\s+(User:\S+)\s+(\[.*?\])\s+(\S+)\s+(\S+)\s+(\S+)\s*$", re.M)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("token-tools")
    broker, addrs = token_broker()
    with broker:
        tools = JavaTools(str(maven.resolve_kafka("4.3.1")), root)
        yield broker, tools, addrs


def _plain_config(tools, user: str):
    return tools.properties(f"plain-{user}", {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
                            f'username="{user}" password="{PASSWORDS[user]}";'})


def _token_config(tools, token_id: str, hmac: str):
    return tools.properties(f"token-{token_id}", {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                            f'username="{token_id}" password="{hmac}" tokenauth="true";'})


def _tokens(tools, addr, config, *args, check=True):
    return tools.run("org.apache.kafka.tools.DelegationTokenCommand",
                     ["--bootstrap-server", addr, "--command-config", str(config), *args], timeout=120, check=check)


def test_delegation_token_lifecycle_with_kafka_tools(setup):
    broker, tools, addrs = setup
    sasl = addrs["SASL_PLAINTEXT"]
    alice, bob = _plain_config(tools, "alice"), _plain_config(tools, "bob")
    out = _tokens(tools, sasl, alice, "--create", "--max-life-time-period", "3600000",
                  "--renewer-principal", "User:bob").stdout
    rows = _ROW.findall(out)
    assert len(rows) == 1, out
    token_id, hmac, owner, requester, renewers, *_dates = rows[0]
    assert (owner, requester, renewers) == ("User:alice", "User:alice", "[User:bob]")
    assert f"Created delegation token with tokenId : {token_id}" in out

    # Kafka 4.3.1's tool sends an empty owner list without --owner-principal, which describes no
    # token (Kafka's brokers answer so too: test_delegation_token_reference); bob, a renewer, sees it
    assert "Total number of tokens : 0" in _tokens(tools, sasl, bob, "--describe").stdout
    described = _tokens(tools, sasl, bob, "--describe", "--owner-principal", "User:alice").stdout
    assert [r[0] for r in _ROW.findall(described)] == [token_id] and "Total number of tokens : 1" in described
    assert [r[:5] for r in _ROW.findall(described)] == [rows[0][:5]]

    # a client authenticating with the token (no long-lived credential) produces and consumes as alice
    token_config = _token_config(tools, token_id, hmac)
    topic = f"token-topic-{uuid.uuid4().hex[:6]}"
    lines = [f"t{i}" for i in range(5)]
    tools.run("org.apache.kafka.tools.ConsoleProducer",
              ["--bootstrap-server", sasl, "--topic", topic, "--command-config", str(token_config)],
              input="\n".join(lines) + "\n", timeout=120)
    res = tools.run("org.apache.kafka.tools.consumer.ConsoleConsumer",
                    ["--bootstrap-server", sasl, "--topic", topic, "--command-config", str(token_config),
                     "--from-beginning", "--max-messages", "5", "--timeout-ms", "60000"], timeout=120)
    assert res.stdout.split() == lines
    assert logged(broker, "SASL SCRAM-SHA-512 authentication of User:alice from")
    # token requests over a token-authenticated connection are refused
    refused = _tokens(tools, sasl, token_config, "--describe", "--owner-principal", "User:alice", check=False)
    assert "not allowed" in (refused.stderr + refused.stdout).lower(), refused.summary()

    renewed = _tokens(tools, sasl, bob, "--renew", "--hmac", hmac, "--renew-time-period", "600000").stdout
    assert "Completed renew operation. New expiry date" in renewed
    expired = _tokens(tools, sasl, alice, "--expire", "--hmac", hmac, "--expiry-time-period", "-1").stdout
    assert "Completed expire operation" in expired
    assert "Total number of tokens : 0" in _tokens(tools, sasl, alice, "--describe", "--owner-principal",
                                                   "User:alice").stdout

    failed = tools.run("org.apache.kafka.tools.consumer.ConsoleConsumer",
                       ["--bootstrap-server", sasl, "--topic", topic, "--command-config", str(token_config),
                        "--from-beginning", "--max-messages", "1", "--timeout-ms", "20000"], timeout=120, check=False)
    assert "SaslAuthenticationException" in failed.stderr + failed.stdout, failed.summary()
