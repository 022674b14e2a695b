"""The portal's private signing key: where it lives and how it is loaded (SPEC §8).

The private key never enters the database. It comes from, in this order:
1. ``REVIEWPORTAL_SIGNING_KEY``: the PKCS#8 PEM text itself (a deployment secret);
2. ``REVIEWPORTAL_SIGNING_KEY_FILE``: a path to that PEM (a mounted secret);
3. ``<VAR_DIR>/keys/<key_id>.pem``: a file of mode 0600 in a directory of mode 0700, written only by
   ``manage.py create_signing_key`` / ``rotate_signing_key`` with an exclusive create.

Which key is active is the database's ``SigningKey`` row; the private key must match it. The web and worker
processes call ``require_signing_key()`` at start-up and refuse to start, with one line, without a usable key.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Final, NoReturn

from django.conf import settings
from django.db import DatabaseError

from verification.kernel.errors import KernelError, KeyRefused
from verification.kernel.keys import PrivateKey
from verification.kernel.reasons import Reason

if TYPE_CHECKING:
    from verification.trust.models import SigningKey

ENV_PEM: Final = "REVIEWPORTAL_SIGNING_KEY"
ENV_FILE: Final = "REVIEWPORTAL_SIGNING_KEY_FILE"
KEYS_DIRNAME: Final = "keys"
NO_KEY_LINE: Final = "reviewportal: no signing key: run 'manage.py create_signing_key'"
_KEY_ID_RE: Final = re.compile(r"ed25519-[0-9a-f]{16}")
#: gunicorn's "worker failed to boot" code: its master stops instead of respawning workers that cannot start.
STARTUP_EXIT_CODE: Final = 3


class SigningKeyUnavailable(KernelError):
    """The portal has no usable active signing key (reason ``no-signing-key``); ``detail`` says why."""

    def __init__(self, detail: str) -> None:
        super().__init__(Reason.NO_SIGNING_KEY, detail)


# --- where keys live -----------------------------------------------------------------------------------------------


def keys_dir() -> Path:
    return Path(settings.VAR_DIR) / KEYS_DIRNAME


def key_path(key_id: str) -> Path:
    if _KEY_ID_RE.fullmatch(key_id) is None:  # the id becomes a file name: nothing but the derived form
        raise SigningKeyUnavailable(f"not a key id: {key_id!r}")
    return keys_dir() / f"{key_id}.pem"


def _env(name: str) -> str | None:
    value = os.environ.get(name, "")
    return value if value.strip() else None


def secret_source() -> str | None:
    """The environment variable the private key comes from, or None when it comes from ``<var>/keys``."""
    if _env(ENV_PEM) is not None:
        return ENV_PEM
    if _env(ENV_FILE) is not None:
        return ENV_FILE
    return None


def configured_secret() -> PrivateKey | None:
    """The private key provisioned through the environment, or None when neither variable is set."""
    pem, path = _env(ENV_PEM), _env(ENV_FILE)
    if pem is not None and path is not None:
        raise SigningKeyUnavailable(f"both {ENV_PEM} and {ENV_FILE} are set; set one")
    if pem is not None:
        try:
            return PrivateKey.from_pem(pem.encode("utf-8"))
        except KeyRefused as exc:
            raise SigningKeyUnavailable(f"{ENV_PEM} does not hold an Ed25519 PKCS#8 PEM ({exc.detail})") from None
    if path is not None:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise SigningKeyUnavailable(f"{ENV_FILE}={path}: {exc.strerror}") from None
        try:
            return PrivateKey.from_pem(data)
        except KeyRefused as exc:
            raise SigningKeyUnavailable(f"{ENV_FILE}={path} is not an Ed25519 PKCS#8 PEM ({exc.detail})") from None
    return None


def _ensure_keys_dir() -> Path:
    directory = keys_dir()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)  # noqa: S103 - owner only; mkdir's mode is filtered by the umask
    return directory


def write_private_key(key: PrivateKey) -> Path:
    """Write ``<keys>/<key_id>.pem`` with an exclusive create (mode 0600); FileExistsError if it exists."""
    _ensure_keys_dir()
    path = key_path(key.public_key.key_id)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, key.to_pem())
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    os.close(fd)
    return path


def read_private_key_file(path: Path) -> PrivateKey:
    """Load a key file written by ``write_private_key``; refuse one that other users can read or change."""
    try:
        mode = path.stat().st_mode
        data = path.read_bytes()
    except FileNotFoundError:
        raise SigningKeyUnavailable(f"{path} does not exist") from None
    except OSError as exc:
        raise SigningKeyUnavailable(f"cannot read {path}: {exc.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SigningKeyUnavailable(f"{path} is accessible to other users (mode {mode & 0o777:o}); chmod 600")
    try:
        return PrivateKey.from_pem(data)
    except KeyRefused as exc:
        raise SigningKeyUnavailable(f"{path} is not an Ed25519 PKCS#8 PEM ({exc.detail})") from None


def discard_private_key_file(key_id: str) -> bool:
    """Remove a retired or revoked key's private file (it will never sign again); True when one was removed."""
    try:
        key_path(key_id).unlink()
    except FileNotFoundError:
        return False
    return True


# --- the active key ------------------------------------------------------------------------------------------------

_cache_lock = threading.Lock()
_cache: dict[str, PrivateKey] = {}


def clear_cache() -> None:
    """Forget loaded private keys (tests; a process that changed its environment)."""
    with _cache_lock:
        _cache.clear()


def private_key_for(row: SigningKey) -> PrivateKey:
    """The private key of ``row``, from the environment or its key file; it must match the row's public key."""
    with _cache_lock:
        cached = _cache.get(row.key_id)
    if cached is not None:
        return cached
    secret = configured_secret()
    if secret is not None:
        if secret.public_key.key_id != row.key_id:
            raise SigningKeyUnavailable(
                f"the key in {secret_source()} is {secret.public_key.key_id}, but the active "
                f"key is {row.key_id}; run 'manage.py rotate_signing_key' to make it the active key"
            )
        key = secret
    else:
        key = read_private_key_file(key_path(row.key_id))
    if key.public_key.raw != bytes(row.public_key) or key.public_key.key_id != row.key_id:
        raise SigningKeyUnavailable(f"the private key for {row.key_id} does not match its public key")
    with _cache_lock:
        _cache[row.key_id] = key
    return key


def private_key_for_id(key_id: str) -> PrivateKey:
    """The private key of the portal's key ``key_id`` (cached after the first load and check)."""
    from verification.trust.models import SigningKey

    with _cache_lock:
        cached = _cache.get(key_id)
    if cached is not None:
        return cached
    row = SigningKey.objects.filter(key_id=key_id).first()
    if row is None:
        raise SigningKeyUnavailable(f"no signing key {key_id}")
    return private_key_for(row)


def active_signer() -> tuple[SigningKey, PrivateKey]:
    """The active ``SigningKey`` row and its private key; ``SigningKeyUnavailable`` otherwise."""
    from verification.trust.models import SigningKey

    row = SigningKey.objects.filter(status=SigningKey.Status.ACTIVE).first()
    if row is None:
        raise SigningKeyUnavailable("no active signing key")
    return row, private_key_for(row)


def require_signing_key() -> None:
    """Start-up gate of the web and worker processes: exit with one line unless a usable active key exists.

    Called from ``reviewportal/wsgi.py`` and ``asgi.py`` (so also by ``runserver``, which loads WSGI_APPLICATION) and
    from the Celery ``worker_init`` signal. Not called by management commands (migrate must run first) nor by tests.
    """
    try:
        active_signer()
    except SigningKeyUnavailable as exc:
        missing = exc.detail == "no active signing key"
        _refuse_start(NO_KEY_LINE if missing else f"reviewportal: no signing key: {exc.detail}")
    except DatabaseError as exc:
        _refuse_start(f"reviewportal: cannot read the signing keys ({type(exc).__name__}): run 'manage.py migrate'")


def _refuse_start(line: str) -> NoReturn:
    print(line, file=sys.stderr, flush=True)
    raise SystemExit(STARTUP_EXIT_CODE)
