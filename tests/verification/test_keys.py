"""The portal's signing keys and the pin log (SPEC §8)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.conftest import DATABASE_VARIABLES
from tests.verification.conftest import REPO_ROOT, run_manage
from verification.errors import NotFound, PermissionRefused
from verification.kernel.errors import KeyRefused
from verification.kernel.keys import PrivateKey
from verification.kernel.reasons import Reason
from verification.trust import signing
from verification.trust.models import PinEntry, SigningKey
from verification.trust.selectors import pin_state, published_keys, revoked_keys, trusted_keys
from verification.trust.services.keys import (
    SYSTEM_CREATE,
    key_pin,
    key_revoke,
    key_unpin,
    signing_key_create,
    signing_key_rotate,
)
from verification.trust.signing import SigningKeyUnavailable

#: What a subprocess must not inherit from this run (prefixes; the CI pass sets some).
_INHERITED_NOT = (*DATABASE_VARIABLES, "REVIEWPORTAL_SIG")


def _okp(x: str) -> str:
    return json.dumps({"kty": "OKP", "crv": "Ed25519", "x": x})


def _other_key() -> PrivateKey:
    return PrivateKey.from_seed(bytes(range(32)))


# --- create_signing_key ------------------------------------------------------------------------------------------


def test_create_signing_key_writes_a_private_file_records_and_pins_the_key(var_dir: Path, db: None) -> None:
    out = StringIO()
    call_command("create_signing_key", stdout=out)
    row = SigningKey.objects.get()
    assert row.status == SigningKey.Status.ACTIVE
    path = var_dir / "keys" / f"{row.key_id}.pem"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    private = PrivateKey.from_pem(path.read_bytes())
    assert private.public_key.raw == bytes(row.public_key)
    assert row.fingerprint == private.public_key.fingerprint
    assert row.key_id == "ed25519-" + row.fingerprint[:16]
    # Printed for out-of-band confirmation, in groups of four.
    assert f"fingerprint: {private.public_key.fingerprint_grouped}" in out.getvalue()
    # Pinned for proof-signing by the system, in the pin log.
    pin = PinEntry.objects.get()
    assert (pin.action, pin.purpose, pin.key_id) == ("pin", "proof-signing", row.key_id)
    assert (pin.actor_user, pin.actor_label, pin.channel) == (None, SYSTEM_CREATE, "local key creation")
    assert list(trusted_keys("proof-signing")) == [row.key_id]
    assert trusted_keys("evidence-source") == {}


def test_create_signing_key_twice_is_a_no_op(var_dir: Path, db: None) -> None:
    call_command("create_signing_key", stdout=StringIO())
    first = SigningKey.objects.get()
    out = StringIO()
    call_command("create_signing_key", stdout=out)
    assert "already active" in out.getvalue()
    assert list(SigningKey.objects.all()) == [first]
    assert PinEntry.objects.count() == 1
    assert len(list((var_dir / "keys").iterdir())) == 1


def test_create_signing_key_refuses_when_the_active_keys_file_is_gone(signing_key: SigningKey) -> None:
    signing.key_path(signing_key.key_id).unlink()
    signing.clear_cache()
    with pytest.raises(CommandError, match="no-signing-key"):
        call_command("create_signing_key", stdout=StringIO())
    assert SigningKey.objects.count() == 1


def test_a_key_file_readable_by_others_is_refused(signing_key: SigningKey) -> None:
    path = signing.key_path(signing_key.key_id)
    os.chmod(path, 0o644)  # noqa: S103
    signing.clear_cache()
    with pytest.raises(SigningKeyUnavailable, match="chmod 600"):
        signing.active_signer()


def test_the_key_file_is_never_overwritten(var_dir: Path) -> None:
    key = _other_key()
    signing.write_private_key(key)
    with pytest.raises(FileExistsError):
        signing.write_private_key(key)


@pytest.mark.slow
def test_concurrent_creation_from_separate_processes_gives_exactly_one_key(tmp_path: Path) -> None:
    var = tmp_path / "var"
    var.mkdir()
    migrate = run_manage(["migrate", "-v", "0"], var)
    assert migrate.returncode == 0, migrate.stderr
    env = {key: value for key, value in os.environ.items() if not key.startswith(_INHERITED_NOT)}
    env.update(
        DJANGO_SETTINGS_MODULE="reviewportal.settings_test",
        REVIEWPORTAL_VAR_DIR=str(var),
        DATABASE_URL=f"sqlite:///{var / 'db.sqlite3'}",
    )
    processes = [
        subprocess.Popen(
            [sys.executable, "manage.py", "create_signing_key"],
            cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for _ in range(4)
    ]
    outputs = [process.communicate(timeout=120) for process in processes]
    assert [process.returncode for process in processes] == [0, 0, 0, 0], outputs
    fingerprints = {line for out, _ in outputs for line in out.splitlines() if line.startswith("fingerprint:")}
    assert len(fingerprints) == 1  # every process reports the same key
    assert sum("created signing key" in out for out, _ in outputs) == 1
    assert len(list((var / "keys").glob("*.pem"))) == 1
    import sqlite3

    db = sqlite3.connect(var / "db.sqlite3")
    try:
        assert db.execute("SELECT count(*) FROM verification_signingkey").fetchone() == (1,)
        assert db.execute("SELECT count(*) FROM verification_pinentry").fetchone() == (1,)
    finally:
        db.close()


@pytest.mark.slow
def test_the_web_process_refuses_to_start_without_a_key(tmp_path: Path) -> None:
    var = tmp_path / "var"
    var.mkdir()
    assert run_manage(["migrate", "-v", "0"], var).returncode == 0
    env = {key: value for key, value in os.environ.items() if not key.startswith(_INHERITED_NOT)}
    env.update(REVIEWPORTAL_VAR_DIR=str(var), DATABASE_URL=f"sqlite:///{var / 'db.sqlite3'}", SECRET_KEY="x" * 50)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.pop("REVIEWPORTAL_TESTING", None)
    for code in ("import reviewportal.wsgi", "import reviewportal.asgi"):
        proc = subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
        )
        assert proc.returncode == signing.STARTUP_EXIT_CODE
        assert proc.stderr.strip().splitlines() == [signing.NO_KEY_LINE]
    # runserver loads the WSGI application, so `make run` refuses the same way.
    proc = subprocess.run(
        [sys.executable, "manage.py", "runserver", "127.0.0.1:0", "--noreload"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == signing.STARTUP_EXIT_CODE
    assert proc.stderr.strip().splitlines()[-1] == signing.NO_KEY_LINE
    # With a key, the WSGI module loads.
    created = run_manage(["create_signing_key"], var)
    assert created.returncode == 0, created.stderr
    proc = subprocess.run(
        [sys.executable, "-c", "import reviewportal.wsgi"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_require_signing_key_exits_with_one_line(var_dir: Path, db: None, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as excinfo:
        signing.require_signing_key()
    assert excinfo.value.code == signing.STARTUP_EXIT_CODE
    assert capsys.readouterr().err == signing.NO_KEY_LINE + "\n"
    signing_key_create()
    signing.require_signing_key()  # returns quietly


def test_the_worker_refuses_to_start_without_a_key(var_dir: Path, db: None) -> None:
    from celery.signals import worker_init

    from reviewportal.celery import _require_signing_key

    connected = [ref() for _, ref in worker_init.receivers]
    assert _require_signing_key in connected
    with pytest.raises(SystemExit) as excinfo:
        _require_signing_key(sender=None)
    assert excinfo.value.code == signing.STARTUP_EXIT_CODE


# --- the key from the environment ---------------------------------------------------------------------------------


def test_a_key_from_the_environment_is_used_and_not_written(
    var_dir: Path, db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = _other_key()
    monkeypatch.setenv(signing.ENV_PEM, key.to_pem().decode())
    row, created = signing_key_create()
    assert created and row.key_id == key.public_key.key_id
    assert not (var_dir / "keys").exists()
    assert signing.active_signer()[1].public_key == key.public_key


def test_a_key_file_named_in_the_environment_is_used(
    var_dir: Path, db: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    key = _other_key()
    path = tmp_path / "secret.pem"
    path.write_bytes(key.to_pem())
    monkeypatch.setenv(signing.ENV_FILE, str(path))
    row, _ = signing_key_create()
    assert row.key_id == key.public_key.key_id


def test_an_environment_key_that_is_not_the_active_one_is_refused(
    signing_key: SigningKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(signing.ENV_PEM, _other_key().to_pem().decode())
    signing.clear_cache()
    with pytest.raises(SigningKeyUnavailable, match="rotate_signing_key"):
        signing.active_signer()
    # Rotation makes the provisioned key the active one.
    old, new = signing_key_rotate()
    assert old is not None and old.key_id == signing_key.key_id
    assert new.key_id == _other_key().public_key.key_id
    assert signing.active_signer()[0] == new


def test_both_environment_variables_at_once_are_refused(var_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(signing.ENV_PEM, _other_key().to_pem().decode())
    monkeypatch.setenv(signing.ENV_FILE, "/nonexistent")
    with pytest.raises(SigningKeyUnavailable, match="set one"):
        signing.configured_secret()


def test_garbage_in_the_environment_is_refused(var_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(signing.ENV_PEM, "not a key")
    with pytest.raises(SigningKeyUnavailable) as excinfo:
        signing.configured_secret()
    assert excinfo.value.reason is Reason.NO_SIGNING_KEY


# --- rotation and revocation --------------------------------------------------------------------------------------


def test_rotate_signing_key_retires_publishes_and_pins(
    signing_key: SigningKey, django_capture_on_commit_callbacks: Any
) -> None:
    out = StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("rotate_signing_key", stdout=out)
    old = SigningKey.objects.get(key_id=signing_key.key_id)
    new = SigningKey.objects.get(status=SigningKey.Status.ACTIVE)
    assert old.status == SigningKey.Status.RETIRED and old.retired_at is not None
    assert f"retired {old.key_id}" in out.getvalue() and new.key_id in out.getvalue()
    assert [k.key_id for k in published_keys()] == [old.key_id, new.key_id]
    assert set(trusted_keys("proof-signing")) == {old.key_id, new.key_id}
    # The retired key never signs again: its private file is gone; the new one is in place.
    assert not signing.key_path(old.key_id).exists()
    assert signing.key_path(new.key_id).exists()
    assert PinEntry.objects.filter(key_id=new.key_id, action="pin", purpose="proof-signing").count() == 1


def test_revoke_signing_key(signing_key: SigningKey, django_capture_on_commit_callbacks: Any) -> None:
    err = StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("revoke_signing_key", signing_key.key_id, reason="key file leaked", stdout=StringIO(), stderr=err)
    row = SigningKey.objects.get()
    assert row.status == SigningKey.Status.REVOKED and row.revoked_at is not None
    assert row.revoked_reason == "key file leaked"
    assert "create_signing_key" in err.getvalue()  # the portal cannot sign now: say what to do
    entry = PinEntry.objects.get(action="revoke")
    assert (entry.key_id, entry.purpose, entry.reason) == (signing_key.key_id, None, "key file leaked")
    assert list(published_keys()) == [] and list(revoked_keys()) == [row]
    assert not signing.key_path(signing_key.key_id).exists()
    # A new key can be created afterwards; the revoked one stays revoked.
    call_command("create_signing_key", stdout=StringIO())
    assert SigningKey.objects.filter(status="active").count() == 1
    assert trusted_keys("proof-signing")[signing_key.key_id].revoked


def test_revoke_signing_key_refusals(signing_key: SigningKey) -> None:
    with pytest.raises(CommandError, match="not-found"):
        call_command("revoke_signing_key", "ed25519-0000000000000000", reason="x")
    with pytest.raises(CommandError, match="revocation-reason-required"):
        call_command("revoke_signing_key", signing_key.key_id, reason="  ")
    call_command("revoke_signing_key", signing_key.key_id, reason="lost", stdout=StringIO(), stderr=StringIO())
    with pytest.raises(CommandError, match="revoked-key"):
        call_command("revoke_signing_key", signing_key.key_id, reason="again")
    assert PinEntry.objects.filter(action="revoke").count() == 1


def key_admin_portal_key() -> str:
    """The portal's own key, which the ``key_admin`` fixture creates (its pin is the first pin-log entry)."""
    return SigningKey.objects.get(status="active").key_id


# --- pinning -------------------------------------------------------------------------------------------------------


def test_pin_accepts_the_fingerprint_or_the_thumbprint(key_admin: Any) -> None:
    public = _other_key().public_key
    entry = key_pin(
        actor_user=key_admin, jwk_or_pem_text=json.dumps(public.to_jwk()), purpose="evidence-source",
        typed_fingerprint=public.fingerprint_grouped.upper(), channel="signal call with the source", note="source A",
    )
    assert (entry.action, entry.purpose, entry.key_id, entry.actor_user) == ("pin", "evidence-source", public.key_id,
                                                                              key_admin)
    assert entry.actor_label == "user: ada" and entry.fingerprint == public.fingerprint
    key_unpin(actor_user=key_admin, key_id=public.key_id, purpose="evidence-source", channel="email")
    assert not pin_state().is_pinned(public.key_id, "evidence-source")
    key_pin(
        actor_user=key_admin, jwk_or_pem_text=public.to_pem(), purpose="evidence-source",
        typed_fingerprint=public.thumbprint(), channel="in person",
    )
    assert public.key_id in trusted_keys("evidence-source")
    assert public.key_id not in trusted_keys("proof-signing")
    assert [e.action for e in PinEntry.objects.all()][1:] == ["pin", "unpin", "pin"]  # after the portal key's pin


@pytest.mark.parametrize(
    ("text", "fingerprint", "reason"),
    [
        ("not a key", None, Reason.MALFORMED_KEY),
        (_okp("AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), None, Reason.SMALL_ORDER_KEY),  # the identity point
        (_okp("7________________________________________38"), None, Reason.NON_CANONICAL_KEY),  # y = p + 2
        ("KID", None, Reason.KID_MISMATCH),
        ("JWK", "0" * 64, Reason.FINGERPRINT_MISMATCH),
        ("JWK", "not a fingerprint", Reason.FINGERPRINT_MISMATCH),
    ],
)
def test_pin_refusals(key_admin: Any, text: str, fingerprint: str | None, reason: Reason) -> None:
    public = _other_key().public_key
    if text == "KID":
        text = json.dumps({"kty": "OKP", "crv": "Ed25519", "x": public.x, "kid": "ed25519-0000000000000000"})
    elif text == "JWK":
        text = json.dumps({"kty": "OKP", "crv": "Ed25519", "x": public.x})
    with pytest.raises(KeyRefused) as excinfo:
        key_pin(
            actor_user=key_admin, jwk_or_pem_text=text, purpose="proof-signing",
            typed_fingerprint=fingerprint or public.fingerprint, channel="phone",
        )
    assert excinfo.value.reason is reason
    assert not PinEntry.objects.exclude(key_id=key_admin_portal_key()).exists()


def test_pin_twice_unpin_unpinned_and_pin_revoked_are_refused(key_admin: Any) -> None:
    public = _other_key().public_key

    def pin() -> Any:
        return key_pin(actor_user=key_admin, jwk_or_pem_text=public.to_pem(), purpose="proof-signing",
                       typed_fingerprint=public.fingerprint, channel="phone")

    pin()
    with pytest.raises(KeyRefused) as excinfo:
        pin()
    assert excinfo.value.reason is Reason.KEY_ALREADY_PINNED
    with pytest.raises(KeyRefused) as excinfo:
        key_unpin(actor_user=key_admin, key_id=public.key_id, purpose="evidence-source", channel="phone")
    assert excinfo.value.reason is Reason.KEY_NOT_PINNED
    key_revoke(actor_user=key_admin, key_id=public.key_id, reason="issuer compromised", channel="issuer's notice")
    assert trusted_keys("proof-signing")[public.key_id].revoked
    key_unpin(actor_user=key_admin, key_id=public.key_id, purpose="proof-signing", channel="phone")
    with pytest.raises(KeyRefused) as excinfo:
        pin()
    assert excinfo.value.reason is Reason.REVOKED_KEY
    assert [e.action for e in PinEntry.objects.exclude(key_id=key_admin_portal_key())] == ["pin", "revoke", "unpin"]


def test_a_pin_names_its_channel(key_admin: Any) -> None:
    public = _other_key().public_key
    with pytest.raises(KeyRefused) as excinfo:
        key_pin(actor_user=key_admin, jwk_or_pem_text=public.to_pem(), purpose="proof-signing",
                typed_fingerprint=public.fingerprint, channel="  ")
    assert excinfo.value.reason is Reason.PIN_CHANNEL_REQUIRED


def test_only_key_admins_change_the_pin_log(db: None, django_user_model: Any) -> None:
    public = _other_key().public_key
    reviewer = django_user_model.objects.create_user(username="rita", password="x" * 20)
    with pytest.raises(PermissionRefused) as excinfo:
        key_pin(actor_user=reviewer, jwk_or_pem_text=public.to_pem(), purpose="proof-signing",
                typed_fingerprint=public.fingerprint, channel="phone")
    assert excinfo.value.reason is Reason.PERMISSION_DENIED
    with pytest.raises(PermissionRefused):
        key_revoke(actor_user=reviewer, key_id=public.key_id, reason="x", channel="phone")
    assert not PinEntry.objects.exists()


def test_revoking_an_unknown_key_is_not_found(key_admin: Any) -> None:
    with pytest.raises(NotFound):
        key_revoke(actor_user=key_admin, key_id="ed25519-0123456789abcdef", reason="x", channel="phone")


def test_a_pin_entry_written_around_the_service_is_never_trusted(signing_key: SigningKey) -> None:
    """A refused key (here the identity point, small order) can only enter the pin log by a direct database write.

    It must not become trusted, and reading the trust root must not fail because of it: the audit reports it.
    """
    from django.utils import timezone

    identity = "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"  # base64url of the encoding 01 00 .. 00
    forged = json.dumps({"kty": "OKP", "crv": "Ed25519", "x": identity})
    PinEntry.objects.create(
        action="pin",
        purpose="proof-signing",
        key_id="ed25519-0000000000000000",
        jwk=forged,
        fingerprint="0" * 64,
        actor_label="direct write",
        created_at=timezone.now(),
        channel="none",
    )
    with pytest.raises(KeyRefused) as refused:
        from verification.kernel.keys import PublicKey

        PublicKey.from_jwk(json.loads(forged))
    assert refused.value.reason is Reason.SMALL_ORDER_KEY
    trusted = trusted_keys("proof-signing")
    assert set(trusted) == {signing_key.key_id}
