"""The code primitives against RFC 6238 and the backup-code format."""
import base64
import re
from datetime import UTC, datetime
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from controlplane.mfa import totp
from tests.mfa.conftest import rfc6238

RFC_SECRET = base64.b32encode(b"12345678901234567890").decode()


@pytest.mark.parametrize("unix_time, expected", [
    # RFC 6238 Appendix B, SHA-1 column (8 digits there; the last 6 are the 6-digit code).
    (59, "94287082"), (1111111109, "07081804"), (1111111111, "14050471"),
    (1234567890, "89005924"), (2000000000, "69279037"), (20000000000, "65353130"),
])
def test_the_test_helper_and_the_server_match_the_rfc_vectors(unix_time, expected):
    when = datetime.fromtimestamp(unix_time, UTC)
    assert rfc6238(RFC_SECRET, when, digits=8) == expected
    assert totp.matching_step(RFC_SECRET, expected[-6:], when) == unix_time // 30


def test_a_secret_has_160_bits_of_unpadded_base32():
    secrets = {totp.new_secret() for _ in range(50)}
    assert len(secrets) == 50
    for secret in secrets:
        assert re.fullmatch(r"[A-Z2-7]{32}", secret)
        assert len(base64.b32decode(secret)) == 20


def test_drift_of_one_step_either_way_is_accepted_and_two_is_not():
    secret, now = totp.new_secret(), datetime(2030, 1, 1, 12, 0, 15, tzinfo=UTC)
    step = int(now.timestamp()) // 30
    for offset in (-1, 0, 1):
        assert totp.matching_step(secret, rfc6238(secret, now, offset), now) == step + offset
    for offset in (-2, 2):
        code = rfc6238(secret, now, offset)
        if code not in {rfc6238(secret, now, o) for o in (-1, 0, 1)}:  # a 1-in-a-million collision
            assert totp.matching_step(secret, code, now) is None


def test_provisioning_uri_names_the_issuer_and_the_account():
    uri = totp.provisioning_uri("JBSWY3DPEHPK3PXP", account="ada@example.com", issuer="Acme: Staging")
    parts = urlsplit(uri)
    assert (parts.scheme, parts.netloc) == ("otpauth", "totp")
    issuer, _, account = parts.path.lstrip("/").partition(":")
    assert unquote(issuer) == "Acme: Staging" and unquote(account) == "ada@example.com"
    assert "%3A" in issuer  # the issuer's own colon cannot split the label
    query = parse_qs(parts.query)
    assert query["secret"] == ["JBSWY3DPEHPK3PXP"] and query["issuer"] == ["Acme: Staging"]
    assert query["digits"] == ["6"] and query["period"] == ["30"] and query["algorithm"] == ["SHA1"]


def test_backup_codes_have_the_spec_form_and_an_unambiguous_alphabet():
    codes = [totp.new_backup_code() for _ in range(200)]
    assert all(re.fullmatch(r"[A-Z0-9]{4}-[A-Z0-9]{4}-[A-Z0-9]{4}", c) for c in codes)
    used = set("".join(codes).replace("-", ""))
    assert not used & set("01OIL")
    assert len(set(codes)) == 200


@pytest.mark.parametrize("typed", ["ABCD-EFGH-JKMN", "abcd-efgh-jkmn", "ABCDEFGHJKMN", "abcdEFGHjkmn"])
def test_backup_codes_are_recognised_with_or_without_dashes_in_any_case(typed):
    assert totp.canonical_backup_code(typed) == "ABCDEFGHJKMN"


@pytest.mark.parametrize("typed", ["ABCD-EFGH-JKM", "ABCD--EFGH-JKMN", "ABCDEFGHJKMNP", "ABCD_EFGH_JKMN", "123456"])
def test_other_strings_are_not_backup_codes(typed):
    assert totp.canonical_backup_code(typed) is None
