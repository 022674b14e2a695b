"""Fixtures for the verification app: a signing key in a throwaway var dir, verifications, users, chains."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATABASE_VARIABLES

REPO_ROOT = Path(__file__).resolve().parents[2]
RUBRIC_HASH = "1" * 64
SUBMISSION_HASH = "2" * 64

# What a subprocess must not inherit from this run (the CI pass may set some of them).
_CONFIG_VARIABLES = (
    *DATABASE_VARIABLES,
    "CELERY_BROKER_URL",
    "CELERY_RESULT_BACKEND",
    "SECRET_KEY",
    "REVIEWPORTAL_VAR_DIR",
    "REVIEWPORTAL_SIGNING_KEY",
    "REVIEWPORTAL_SIGNING_KEY_FILE",
    "DJANGO_SETTINGS_MODULE",
)


def run_manage(args: list[str], var: Path, **env_overrides: str) -> subprocess.CompletedProcess[str]:
    """``manage.py <args>`` in a subprocess with the test settings, its own var dir and a SQLite file there."""
    env = {key: value for key, value in os.environ.items() if key not in _CONFIG_VARIABLES}
    env["DJANGO_SETTINGS_MODULE"] = "reviewportal.settings_test"
    env["REVIEWPORTAL_VAR_DIR"] = str(var)
    env["DATABASE_URL"] = f"sqlite:///{var / 'db.sqlite3'}"
    env.update(env_overrides)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def var_dir(settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh var dir for this test; no signing key from the environment; no cached private key."""
    from verification.trust import signing

    monkeypatch.delenv(signing.ENV_PEM, raising=False)
    monkeypatch.delenv(signing.ENV_FILE, raising=False)
    settings.VAR_DIR = tmp_path / "var"
    signing.clear_cache()
    yield settings.VAR_DIR
    signing.clear_cache()


@pytest.fixture
def signing_key(db: None, var_dir: Path) -> Any:
    """The portal's active signing key, created as ``manage.py create_signing_key`` does (pinned for proof-signing)."""
    from verification.trust.services.keys import signing_key_create

    row, created = signing_key_create()
    assert created
    return row


@pytest.fixture
def make_verification(db: None) -> Callable[..., Any]:
    from verification.runs.models import Verification

    def make(rubric_hash: str = RUBRIC_HASH, submission_hash: str = SUBMISSION_HASH) -> Verification:
        return Verification.objects.create(rubric_hash=rubric_hash, submission_hash=submission_hash)

    return make


def issue_chain(verification: Any) -> list[Any]:
    """A real chain of three receipts: run -> result -> decision (the decision supersedes the result)."""
    from verification.trust.services.receipts import receipt_issue

    run = receipt_issue(
        verification=verification,
        kind="run",
        payload={
            "verdict": "PENDING",
            "determination": None,
            "authority": "deterministic",
            "actor": "portal",
            "flagged": False,
            "checks": [{"criterion": "c1", "authority": "imported", "verdict": "PENDING", "reason": "result-awaited"}],
            "integrity_proof": [],
        },
    )
    result = receipt_issue(
        verification=verification,
        kind="result",
        payload={
            "verdict": "UNKNOWN",
            "determination": "cannot_determine",
            "authority": "imported",
            "actor": {"id": "external-verifier-1", "kind": "external verifier"},
            "flagged": True,
            "flag_reason": "needs_review: imported-result",
            "supersedes_receipt_id": run.content_hash,
        },
    )
    decision = receipt_issue(
        verification=verification,
        kind="decision",
        payload={
            "verdict": "PASS",
            "determination": "met",
            "authority": "human",
            "actor": "user:alice",
            "flagged": False,
            "rationale": "checked the cited log by hand",
            "supersedes_receipt_id": result.content_hash,
        },
    )
    return [run, result, decision]


@pytest.fixture
def chain(signing_key: Any, make_verification: Callable[..., Any]) -> tuple[Any, list[Any]]:
    verification = make_verification()
    return verification, issue_chain(verification)


@pytest.fixture
def key_admin(db: None, django_user_model: Any, signing_key: Any) -> Any:
    """A member of the admin role (verification/actors/roles.py), who may change the pin log (the portal's key exists:
    every pin-log change is signed into the pin journal by it)."""
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user(username="ada", password="correct horse battery staple")
    user.groups.add(Group.objects.get(name="admin"))
    return user
