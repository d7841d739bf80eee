"""The controller's delegation token rules (KIP-48; Kafka 4.3 DelegationTokenControlManager) and
the image's replay of DelegationTokenRecord / RemoveDelegationTokenRecord, on a MetadataImage."""

from __future__ import annotations

import base64
import hashlib
import hmac

from kcompat.kraft import token_control as tc
from kcompat.kraft.image import MetadataImage
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.create_delegation_token import CreateDelegationTokenRequest as C
from kcompat.protocol.messages.expire_delegation_token import ExpireDelegationTokenRequest as X
from kcompat.protocol.messages.renew_delegation_token import RenewDelegationTokenRequest as RN
from kcompat.security.delegation_token import TokenCredentials, TokenSettings
from kcompat.security.principal import user

SETTINGS = TokenSettings(secret=b"s3cret", max_lifetime_ms=10_000, expiry_time_ms=3_000, check_interval_ms=1_000)
ALICE, BOB, CAROL = user("alice"), user("bob"), user("carol")
NOW = 1_000_000


def _apply(image, records):
    for r in records:
        image.apply(r, image.offset + 1)


def _create(image, now=NOW, **kw):
    req = C(renewers=[C.CreatableRenewers(principal_type="User", principal_name="bob")], max_lifetime_ms=-1)
    for k, v in kw.items():
        setattr(req, k, v)
    records, resp = tc.create_token(image, SETTINGS, req, ALICE, now)
    _apply(image, records)
    return resp


def test_create_gives_hmac_sha512_of_the_token_id_and_kafkas_timestamps():
    image = MetadataImage()
    resp = _create(image)
    assert resp.error_code == 0
    assert resp.hmac == hmac.new(b"s3cret", resp.token_id.encode(), hashlib.sha512).digest()
    assert (resp.issue_timestamp_ms, resp.expiry_timestamp_ms, resp.max_timestamp_ms) == (NOW, NOW + 3_000, NOW + 10_000)
    rec = image.delegation_tokens[resp.token_id]
    assert (rec.owner, rec.requester, rec.renewers) == ("User:alice", "User:alice", ["User:bob"])
    # a shorter requested lifetime caps both timestamps; a longer one is cut to the maximum
    short = _create(image, max_lifetime_ms=1_000)
    assert (short.expiry_timestamp_ms, short.max_timestamp_ms) == (NOW + 1_000, NOW + 1_000)
    assert _create(image, max_lifetime_ms=99_000).max_timestamp_ms == NOW + 10_000


def test_create_for_another_owner_and_invalid_renewers_and_disabled():
    image = MetadataImage()
    resp = _create(image, owner_principal_type="User", owner_principal_name="carol")
    assert (resp.principal_name, resp.token_requester_principal_name) == ("carol", "alice")
    assert image.delegation_tokens[resp.token_id].owner == "User:carol"
    bad = C(renewers=[C.CreatableRenewers(principal_type="Group", principal_name="g")], max_lifetime_ms=-1)
    records, resp = tc.create_token(image, SETTINGS, bad, ALICE, NOW)
    assert (records, resp.error_code) == ([], ErrorCode.INVALID_PRINCIPAL_TYPE)
    records, resp = tc.create_token(image, TokenSettings(secret=None), C(), ALICE, NOW)
    assert (records, resp.error_code) == ([], ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)


def test_renew_rules():
    image = MetadataImage()
    tok = _create(image)
    # the owner and the renewers may renew; the requester role alone does not count (carol: neither)
    records, resp = tc.renew_token(image, SETTINGS, RN(hmac=tok.hmac, renew_period_ms=1_000), CAROL, NOW)
    assert (records, resp.error_code) == ([], ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH)
    records, resp = tc.renew_token(image, SETTINGS, RN(hmac=tok.hmac, renew_period_ms=1_000), BOB, NOW + 500)
    assert resp.error_code == 0 and resp.expiry_timestamp_ms == NOW + 1_500
    _apply(image, records)
    assert image.delegation_tokens[tok.token_id].expiration_timestamp == NOW + 1_500
    # renew period capped by expiry.time.ms, then by the max timestamp
    _r, resp = tc.renew_token(image, SETTINGS, RN(hmac=tok.hmac, renew_period_ms=-1), ALICE, NOW + 1_000)
    assert resp.expiry_timestamp_ms == NOW + 4_000
    # past the expiry: DELEGATION_TOKEN_EXPIRED; an unknown hmac: NOT_FOUND
    _r, resp = tc.renew_token(image, SETTINGS, RN(hmac=tok.hmac, renew_period_ms=-1), ALICE, NOW + 1_501)
    assert resp.error_code == ErrorCode.DELEGATION_TOKEN_EXPIRED
    _r, resp = tc.renew_token(image, SETTINGS, RN(hmac=b"x" * 64, renew_period_ms=-1), ALICE, NOW)
    assert resp.error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND


def test_expire_rules_and_sweep():
    image = MetadataImage()
    a, b = _create(image), _create(image)
    records, resp = tc.expire_token(image, SETTINGS, X(hmac=a.hmac, expiry_time_period_ms=500), CAROL, NOW)
    assert resp.error_code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    records, resp = tc.expire_token(image, SETTINGS, X(hmac=a.hmac, expiry_time_period_ms=500), ALICE, NOW)
    assert resp.expiry_timestamp_ms == NOW + 500
    _apply(image, records)
    # a negative period removes the token at once, even one past its expiry
    records, resp = tc.expire_token(image, SETTINGS, X(hmac=a.hmac, expiry_time_period_ms=-1), BOB, NOW + 900)
    assert (resp.error_code, resp.expiry_timestamp_ms) == (0, NOW + 900)
    _apply(image, records)
    assert a.token_id not in image.delegation_tokens
    records, resp = tc.expire_token(image, SETTINGS, X(hmac=a.hmac, expiry_time_period_ms=-1), ALICE, NOW)
    assert resp.error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    # the sweep removes tokens past their expiry only
    assert tc.sweep_expired(image, NOW + 3_000) == []
    _apply(image, tc.sweep_expired(image, NOW + 3_001))
    assert b.token_id not in image.delegation_tokens


def test_tokens_survive_a_snapshot_and_give_scram_credentials():
    image = MetadataImage()
    tok = _create(image)
    copy = MetadataImage()
    _apply(copy, image.to_records())
    assert copy.delegation_tokens[tok.token_id].owner == "User:alice"
    owner, expiry, cred = TokenCredentials(copy, SETTINGS).lookup(2, tok.token_id)
    assert (owner, expiry, cred[3]) == ("alice", NOW + 3_000, 4096)
    # the credential's password is the base64 HMAC
    assert SETTINGS.password(tok.token_id) == base64.b64encode(tok.hmac).decode()
    assert TokenCredentials(copy, TokenSettings(secret=None)).lookup(2, tok.token_id) is None
    assert TokenCredentials(copy, SETTINGS).lookup(2, "no-such-token") is None


def test_a_metadata_version_before_3_6_iv2_has_no_tokens():
    image = MetadataImage()
    tok = _create(image)
    image.features["metadata.version"] = 13
    records, resp = tc.create_token(image, SETTINGS, C(renewers=[], max_lifetime_ms=-1), ALICE, NOW)
    assert (records, resp.error_code) == ([], ErrorCode.UNSUPPORTED_VERSION)
    for op, req in ((tc.renew_token, RN(hmac=tok.hmac, renew_period_ms=-1)),
                    (tc.expire_token, X(hmac=tok.hmac, expiry_time_period_ms=-1))):
        assert op(image, SETTINGS, req, ALICE, NOW)[1].error_code == ErrorCode.UNSUPPORTED_VERSION
    image.features["metadata.version"] = 14
    assert tc.create_token(image, SETTINGS, C(renewers=[], max_lifetime_ms=-1), ALICE, NOW)[1].error_code == 0
