"""The trust root: which keys the portal trusts, for which purpose, and which are revoked (SPEC §8).

``trusted_keys(purpose)`` is the one answer. It reads nothing from the database:
- the portal's own keys, derived from the private key material outside the database (``signing.configured_secret``
  or the key files in ``<var>/keys``), are trusted for proof-signing;
- every key recorded in the **pin journal** (``kernel.journal``), a file beside the checkpoint log
  (``settings.REVIEWPORTAL_PIN_JOURNAL``, default ``<var>/pin-journal.log``), verified line by line and anchored in
  that private key material, is trusted for the purposes it is pinned for, with its revocation.

The database's pin log and signing-key table are a cache of the journal: a key they list but the journal does not is
never trusted, never published, and the audit reports it (``key-not-in-pin-journal``). A journal that does not verify
trusts nothing beyond the portal's own keys (and the audit reports ``pin-journal-invalid``).

``journal_append`` is called by ``services.keys`` in the same call that writes the pin log: every pin, unpin,
rotation, revocation and key creation, signed by the portal's key (loaded by ``signing``, never from the database).
The parsed journal is cached, keyed by the file's size, mtime and inode, so reads stay cheap.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from django.conf import settings

from verification.kernel.journal import JournalKey, JournalRefused, JournalState, build_line, verify_journal
from verification.kernel.keys import PrivateKey, PublicKey
from verification.kernel.reasons import Reason
from verification.kernel.verifier import TrustedKey
from verification.trust import signing
from verification.trust.signing import SigningKeyUnavailable

JOURNAL_FILENAME: Final = "pin-journal.log"
PROOF_SIGNING: Final = "proof-signing"


def var_file(setting: str, filename: str) -> Path:
    """``settings.<setting>`` when set, else ``<VAR_DIR>/<filename>``: the files kept outside the database (the pin
    journal, the audit's checkpoint log), resolved on every call."""
    configured = getattr(settings, setting, None)
    if configured:
        return Path(configured)
    return Path(settings.VAR_DIR) / filename


def journal_path() -> Path:
    """``settings.REVIEWPORTAL_PIN_JOURNAL``, else ``<VAR_DIR>/pin-journal.log`` (resolved on every call)."""
    return var_file("REVIEWPORTAL_PIN_JOURNAL", JOURNAL_FILENAME)


# --- the portal's own keys, from private material outside the database ----------------------------------------------

_lock = threading.Lock()
_own_cache: dict[tuple[Any, ...], dict[str, PrivateKey]] = {}
_journal_cache: dict[Path, tuple[tuple[Any, ...], JournalState | None, JournalRefused | None]] = {}
_trust_cache: dict[tuple[Any, ...], dict[str, TrustedKey]] = {}


def clear_cache() -> None:
    with _lock:
        _own_cache.clear()
        _journal_cache.clear()
        _trust_cache.clear()


def _own_stamp() -> tuple[Any, ...]:
    directory = signing.keys_dir()
    try:
        stat = directory.stat()
        dir_stamp: tuple[Any, ...] = (stat.st_mtime_ns, stat.st_ino)
    except OSError:
        dir_stamp = ()
    return (os.environ.get(signing.ENV_PEM), os.environ.get(signing.ENV_FILE), str(directory), dir_stamp)


def own_private_keys() -> dict[str, PrivateKey]:
    """The portal's private keys: the one in the environment, else every usable key file in ``<var>/keys``."""
    stamp = _own_stamp()
    with _lock:
        cached = _own_cache.get(stamp)
    if cached is not None:
        return cached
    keys: dict[str, PrivateKey] = {}
    try:
        secret = signing.configured_secret()
    except SigningKeyUnavailable:
        secret = None
    if secret is not None:
        keys[secret.public_key.key_id] = secret
    elif signing.secret_source() is None:
        try:
            paths = sorted(signing.keys_dir().glob("ed25519-*.pem"))
        except OSError:
            paths = []
        for path in paths:
            try:
                key = signing.read_private_key_file(path)
            except SigningKeyUnavailable:
                continue
            if path.stem == key.public_key.key_id:
                keys[key.public_key.key_id] = key
    with _lock:
        _own_cache.clear()
        _own_cache[stamp] = keys
    return keys


# --- the journal ---------------------------------------------------------------------------------------------------


def _stamp(path: Path) -> tuple[Any, ...] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return (stat.st_size, stat.st_mtime_ns, stat.st_ino)


def _lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="strict")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise JournalRefused(Reason.PIN_JOURNAL_INVALID, f"{path}: cannot be read ({type(exc).__name__})") from None
    return [line for line in text.split("\n") if line.strip()]


def journal_exists() -> bool:
    return _stamp(journal_path()) is not None


def journal_state() -> tuple[JournalState | None, JournalRefused | None]:
    """The verified journal folded (None and the refusal when it does not verify; an empty state when absent)."""
    _, state, error = _snapshot()
    return state, error


def _snapshot() -> tuple[tuple[Any, ...], JournalState | None, JournalRefused | None]:
    path = journal_path()
    anchors = frozenset(own_private_keys())
    stamp = (_stamp(path), anchors)
    with _lock:
        cached = _journal_cache.get(path)
    if cached is not None and cached[0] == stamp:
        return cached
    state: JournalState | None
    error: JournalRefused | None = None
    try:
        state = verify_journal(_lines(path), anchors=anchors)
    except JournalRefused as exc:
        state, error = None, exc
    with _lock:
        _journal_cache[path] = (stamp, state, error)
    return stamp, state, error


def trusted_keys(purpose: str) -> Mapping[str, TrustedKey]:
    """The keys trusted for ``purpose`` (``proof-signing`` or ``evidence-source``), with their revocation state.

    Pinned in the verified journal for that purpose, plus (for proof-signing) the portal's own keys from private
    material that the journal does not know (yet). Nothing from the database. A key absent here gives
    ``unknown-key`` to the verifier."""
    stamp, state, _ = _snapshot()
    own = own_private_keys()
    key = (purpose, str(journal_path()), stamp)
    with _lock:
        cached = _trust_cache.get(key)
    if cached is not None:
        return cached
    trusted: dict[str, TrustedKey] = {}
    if state is not None:
        for (key_id, pinned_for), _event in state.pinned.items():
            if pinned_for == purpose:
                trusted[key_id] = TrustedKey(state.keys[key_id].key, revoked=state.is_revoked(key_id))
    if purpose == PROOF_SIGNING:
        for key_id, private in own.items():
            # The journal's word stands for a key it knows (an admin may unpin even the portal's own key).
            if key_id not in trusted and (state is None or key_id not in state.keys):
                revoked = state is not None and state.is_revoked(key_id)
                trusted[key_id] = TrustedKey(private.public_key, revoked=revoked)
    with _lock:
        if len(_trust_cache) > 16:
            _trust_cache.clear()
        _trust_cache[key] = trusted
    return trusted


def is_trusted_signer(key_id: str) -> bool:
    """May a receipt signed by ``key_id`` yield a verdict? Trusted for proof-signing (revoked keys included: their
    receipts stay on record and are reported by the audit as a finding of their own kind, SPEC §8)."""
    return key_id in trusted_keys(PROOF_SIGNING)


@dataclass(frozen=True)
class OwnKey:
    key: PublicKey
    status: str
    created_at: str
    revoked_at: str | None
    revoked_reason: str


def own_keys() -> list[OwnKey]:
    """The portal's own keys as the trust root knows them (journal first, then private material), oldest first."""
    state, _ = journal_state()
    out: dict[str, OwnKey] = {}
    if state is not None:
        for key_id, known in state.own_keys().items():
            out[key_id] = _own(known)
    for key_id, private in own_private_keys().items():
        if key_id not in out:
            revoked = state.keys.get(key_id) if state is not None else None
            if revoked is not None and revoked.revoked_at is not None:
                out[key_id] = OwnKey(private.public_key, "revoked", "", revoked.revoked_at, revoked.revoked_reason)
            else:
                out[key_id] = OwnKey(private.public_key, "active", "", None, "")
    return sorted(out.values(), key=lambda k: (k.created_at, k.key.key_id))


def _own(known: JournalKey) -> OwnKey:
    status = "revoked" if known.revoked_at is not None else str(known.own_status)
    return OwnKey(known.key, status, known.created_at, known.revoked_at, known.revoked_reason)


def published_keys() -> list[PublicKey]:
    """The JWKS: the portal's own active and retired keys the trust root knows; never a revoked one."""
    return [k.key for k in own_keys() if k.status != "revoked"]


def revoked_own_keys() -> list[OwnKey]:
    """The portal's own revoked keys, by revocation time (revoked.json)."""
    return sorted((k for k in own_keys() if k.status == "revoked"), key=lambda k: (k.revoked_at or "", k.key.key_id))


# --- appending -----------------------------------------------------------------------------------------------------


@contextmanager
def _locked(path: Path) -> Iterator[int]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # closing releases the lock


def _private_for(key_id: str) -> PrivateKey:
    """The private key of the journal's active key, from the environment or its key file (never the database)."""
    key = own_private_keys().get(key_id)
    if key is None:
        key = signing.read_private_key_file(signing.key_path(key_id))
    return key


def journal_append(event: Mapping[str, Any], *, signer: PrivateKey | None = None) -> str:
    """Append one event, chained to the last line and signed: by ``signer`` (a new own key, self-signed), else by
    the journal's active key. ``SigningKeyUnavailable`` when the journal has no usable active key;
    ``JournalRefused`` when the journal on disk does not verify (nothing is appended to a broken journal)."""
    path = journal_path()
    with _locked(path) as fd:
        state = verify_journal(_lines(path))
        if signer is None:
            if state.active is None:
                raise SigningKeyUnavailable(
                    f"the pin journal {path} has no active portal key: run 'manage.py create_signing_key' (a new "
                    "install) or 'manage.py seal_pin_journal' (an existing deployment) first"
                )
            signer = _private_for(state.active)
        line = build_line(seq=state.size, prev_hash=state.head, event=event, signer=signer)
        os.write(fd, (line + "\n").encode("utf-8"))
        os.fsync(fd)
    return line


# --- sealing an existing deployment's pin log into a new journal ------------------------------------------------------


class JournalExists(Exception):
    """``seal``: a pin journal exists already (sealing is a one-time step)."""


def seal(events: list[dict[str, Any]], *, active: PrivateKey, active_since: str) -> Path:
    """Write a new journal: the ``active`` key's own-key line (self-signed), then ``events`` signed by it.

    Exclusive create (``JournalExists`` if a journal is there); the lines are verified before the file appears."""
    path = journal_path()
    if _stamp(path) is not None and _lines(path):
        raise JournalExists(f"{path} exists already")
    genesis = {
        "action": "own-key", "key_id": active.public_key.key_id, "jwk": active.public_key.to_jwk(),
        "status": "active", "at": active_since, "by": "system: seal_pin_journal",
        "channel": "seal of the existing pin log",
    }
    lines: list[str] = []
    head: str | None = None
    for index, event in enumerate([genesis, *events]):
        line = build_line(seq=index, prev_hash=head, event=event, signer=active)
        lines.append(line)
        head = verify_journal(lines).head
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if _lines(path):
            raise JournalExists(f"{path} exists already") from None
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC, 0o600)  # an empty file (e.g. touched): nothing to lose
    try:
        os.write(fd, "".join(line + "\n" for line in lines).encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    return path
