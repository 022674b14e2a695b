"""The well-known key endpoints and the proof endpoints (SPEC §7, §8)."""

from __future__ import annotations

import base64
import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from verification.kernel.canonical import loads_strict
from verification.kernel.keys import PublicKey, load_jwks
from verification.kernel.verifier import TrustedKey, verify_strict
from verification.trust import signing
from verification.trust.models import SigningKey
from verification.trust.services.keys import signing_key_rotate

JWKS_URL = "/.well-known/acretix-verify/keys.json"
REVOKED_URL = "/.well-known/acretix-verify/revoked.json"


def _private_encodings(seed: bytes) -> list[bytes]:
    """Every spelling of the private seed we could think of leaking."""
    spellings = [
        seed.hex(),
        seed.hex().upper(),
        base64.b64encode(seed).decode(),
        base64.b64encode(seed).decode().rstrip("="),
        base64.urlsafe_b64encode(seed).decode(),
        base64.urlsafe_b64encode(seed).decode().rstrip("="),
        base64.b32encode(seed).decode(),
    ]
    return [s.encode() for s in spellings] + [seed]


def _assert_no_private_material(body: bytes, seeds: list[bytes]) -> None:
    assert b"PRIVATE" not in body and b"-----BEGIN" not in body
    for seed in seeds:
        for spelling in _private_encodings(seed):
            assert spelling not in body
    for jwk in json.loads(body)["keys"]:
        assert set(jwk) == {"kty", "crv", "x", "kid", "use", "alg"}  # no "d", nothing else


# --- keys.json and revoked.json ------------------------------------------------------------------------------------


def test_jwks_serves_active_and_retired_keys_publicly(client: Client, signing_key: SigningKey) -> None:
    first_seed = signing.active_signer()[1].seed
    retired, new = signing_key_rotate()
    signing.clear_cache()
    second_seed = signing.active_signer()[1].seed
    response = client.get(JWKS_URL)  # anonymous
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "public, max-age=300"
    body = response.content
    keys = load_jwks(loads_strict(body))  # every key passes the kernel's import checks
    assert [k.key_id for k in keys] == [signing_key.key_id, new.key_id]
    assert keys[0] == signing_key.public
    for jwk in json.loads(body)["keys"]:
        assert (jwk["kty"], jwk["crv"], jwk["use"], jwk["alg"]) == ("OKP", "Ed25519", "sig", "EdDSA")
    _assert_no_private_material(body, [first_seed, second_seed])


def test_a_revoked_key_leaves_the_jwks_and_is_listed_in_revoked_json(client: Client, signing_key: SigningKey) -> None:
    seed = signing.active_signer()[1].seed
    call_command(
        "revoke_signing_key", signing_key.key_id, reason="backup tape lost", stdout=StringIO(), stderr=StringIO()
    )
    jwks = client.get(JWKS_URL)
    assert json.loads(jwks.content) == {"keys": []}
    _assert_no_private_material(jwks.content, [seed])
    response = client.get(REVOKED_URL)
    assert response.status_code == 200
    assert response["Cache-Control"].startswith("public, max-age=")
    (entry,) = json.loads(response.content)["revoked"]
    row = SigningKey.objects.get()
    assert entry["kid"] == signing_key.key_id and entry["reason"] == "backup tape lost"
    assert row.revoked_at is not None
    assert entry["revoked_at"] == row.revoked_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_revoked_json_is_empty_without_revocations(client: Client, signing_key: SigningKey) -> None:
    assert json.loads(client.get(REVOKED_URL).content) == {"revoked": []}


def test_the_well_known_endpoints_answer_only_safe_methods(client: Client, signing_key: SigningKey) -> None:
    assert client.post(JWKS_URL).status_code == 405
    assert client.head(JWKS_URL).status_code == 200


# --- the proof endpoints -----------------------------------------------------------------------------------------


@pytest.fixture
def staff_client(client: Client, django_user_model: Any) -> Client:
    user = django_user_model.objects.create_user(username="sam", password="x" * 20, is_staff=True)
    client.force_login(user)
    return client


def _assert_error(response: Any, status: int, code: str) -> None:
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    error = json.loads(response.content)["error"]
    assert set(error) == {"code", "message", "details"} and error["code"] == code and error["message"]


@pytest.mark.parametrize("suffix", ["proof", "proof/envelope"])
def test_proof_endpoints_need_an_authenticated_staff_user(
    client: Client, django_user_model: Any, chain: tuple[Any, list[Any]], suffix: str
) -> None:
    verification, _ = chain
    url = f"/v1/verifications/{verification.id}/{suffix}"
    _assert_error(client.get(url), 401, "not-authenticated")
    client.force_login(django_user_model.objects.create_user(username="rita", password="x" * 20))
    _assert_error(client.get(url), 403, "permission-denied")


@pytest.mark.parametrize("suffix", ["proof", "proof/envelope"])
def test_an_admin_group_member_may_read_proofs(client: Client, key_admin: Any, chain: Any, suffix: str) -> None:
    verification, _ = chain
    client.force_login(key_admin)
    assert client.get(f"/v1/verifications/{verification.id}/{suffix}").status_code == 200


@pytest.mark.parametrize("suffix", ["proof", "proof/envelope"])
@pytest.mark.parametrize("ident", ["00000000-0000-4000-8000-000000000000", "not-a-uuid"])
def test_unknown_verifications_are_404(staff_client: Client, signing_key: SigningKey, suffix: str, ident: str) -> None:
    _assert_error(staff_client.get(f"/v1/verifications/{ident}/{suffix}"), 404, "not-found")


def test_a_verification_without_receipts_has_no_proof(staff_client: Client, make_verification: Any) -> None:
    verification = make_verification()
    _assert_error(staff_client.get(f"/v1/verifications/{verification.id}/proof"), 404, "not-found")


def test_the_served_proof_verifies_with_the_served_keys(
    staff_client: Client, chain: tuple[Any, list[Any]], signing_key: SigningKey
) -> None:
    verification, receipts = chain
    response = staff_client.get(f"/v1/verifications/{verification.id}/proof")
    assert response.status_code == 200
    assert response["Cache-Control"] == "private, no-store"
    proof = loads_strict(response.content)
    assert proof["proof_head_hash"] == receipts[-1].content_hash
    jwks = load_jwks(loads_strict(staff_client.get(JWKS_URL).content))
    report = verify_strict(
        proof,
        keys={k.key_id: TrustedKey(k) for k in jwks},
        trusted_head=proof["proof_head_hash"],
        expected_verification_id=str(verification.id),
        expected_submission_hash=verification.submission_hash,
    )
    assert report.entries_verified == 3


def test_the_envelope_endpoint_serves_the_exact_signed_bytes(
    staff_client: Client, chain: tuple[Any, list[Any]], signing_key: SigningKey
) -> None:
    verification, receipts = chain
    response = staff_client.get(f"/v1/verifications/{verification.id}/proof/envelope")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.content == receipts[-1].envelope.encode("utf-8")
    assert response["ETag"] == f'"{receipts[-1].content_hash}"'
    signature = base64.b64decode(receipts[-1].signature)
    public: PublicKey = signing_key.public
    assert public.verify(signature, b"acretix-verify/proof-sig/2:" + receipts[-1].content_hash.encode())


# --- the proof endpoints are API views: the API's session rule for them, its negotiation, methods and throttle ------


@pytest.mark.parametrize("suffix", ["proof", "proof/envelope"])
@pytest.mark.parametrize("role", ["reviewer", "manager"])
def test_a_session_that_reads_the_api_but_is_neither_staff_nor_admin_may_not_read_proofs(
    client: Client, django_user_model: Any, chain: tuple[Any, list[Any]], suffix: str, role: str
) -> None:
    from django.contrib.auth.models import Group

    verification, _ = chain
    user = django_user_model.objects.create_user(username="rita", password="x" * 20)
    user.groups.add(Group.objects.get(name=role))
    client.force_login(user)
    assert client.get("/v1/events").status_code == 200  # the API's session read
    _assert_error(client.get(f"/v1/verifications/{verification.id}/{suffix}"), 403, "permission-denied")


@pytest.mark.parametrize("suffix", ["proof", "proof/envelope"])
def test_a_superuser_may_read_proofs(client: Client, django_user_model: Any, chain: Any, suffix: str) -> None:
    verification, _ = chain
    client.force_login(django_user_model.objects.create_superuser(username="root", password="x" * 20))
    assert client.get(f"/v1/verifications/{verification.id}/{suffix}").status_code == 200


@pytest.mark.parametrize("suffix", ["proof", "proof/envelope"])
def test_proofs_answer_json_whatever_the_accept_header_and_only_to_get_and_head(
    staff_client: Client, chain: tuple[Any, list[Any]], suffix: str
) -> None:
    verification, _ = chain
    url = f"/v1/verifications/{verification.id}/{suffix}"
    response = staff_client.get(url, HTTP_ACCEPT="text/html")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "private, no-store"
    head = staff_client.head(url)
    assert head.status_code == 200 and head.content == b""
    for method in ("post", "put", "delete"):
        refused = getattr(staff_client, method)(url, HTTP_ACCEPT="text/html")
        _assert_error(refused, 405, "method-not-allowed")
        assert refused["Cache-Control"] == "private, no-store"


@pytest.mark.parametrize("suffix", ["proof", "proof/envelope"])
def test_an_anonymous_refusal_carries_the_bearer_challenge_and_no_store(
    client: Client, chain: Any, suffix: str
) -> None:
    verification, _ = chain
    response = client.get(f"/v1/verifications/{verification.id}/{suffix}")
    _assert_error(response, 401, "not-authenticated")
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert response["Cache-Control"] == "private, no-store"


def test_unknown_verifications_name_their_id(staff_client: Client, signing_key: SigningKey) -> None:
    response = staff_client.get("/v1/verifications/not-a-uuid/proof")
    assert json.loads(response.content)["error"]["details"] == {"verification_id": "not-a-uuid"}


def test_proofs_count_against_the_apis_rate(staff_client: Client, chain: Any, settings: Any) -> None:
    from django.core.cache import cache

    verification, _ = chain
    cache.clear()
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token": "2/minute"}}
    try:
        for _ in range(2):
            assert staff_client.get(f"/v1/verifications/{verification.id}/proof").status_code == 200
        refused = staff_client.get(f"/v1/verifications/{verification.id}/proof/envelope")
        _assert_error(refused, 429, "rate-limited")
        assert int(refused["Retry-After"]) >= 1
    finally:
        cache.clear()
