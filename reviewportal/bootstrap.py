"""One-time setup that must happen before Django starts: ``python -m reviewportal.bootstrap``.

Creates the var directory (mode 0700) and ``var/secret_key`` (mode 0600) with an exclusive create, so two processes
cannot race and an existing key is never replaced; creates the SQLite database file with mode 0600 (or narrows an
existing one), and warns when the var directory is open to the group or other users (``make run`` runs this first).
Idempotent. Plain Python: needs no Django settings.
"""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
from pathlib import Path

from reviewportal.config import SECRET_KEY_FILE, env_str, var_dir


def ensure_var_dir(directory: Path) -> bool:
    """Create the var directory if absent; True when it was created."""
    if directory.is_dir():
        return False
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    return True


def ensure_secret_key(directory: Path) -> bool:
    """Create ``<directory>/secret_key`` if absent; True when it was created.

    The key is written to a private temporary file first and then hard-linked into place: ``os.link`` fails if the
    target exists, so the file appears complete or not at all, and a concurrent run keeps the first key.
    """
    target = directory / SECRET_KEY_FILE
    if target.exists():
        return False
    fd, tmp = tempfile.mkstemp(prefix=".secret_key.", dir=directory)  # mkstemp creates the file with mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(secrets.token_urlsafe(50) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.link(tmp, target)
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)
    return True


def sqlite_path(directory: Path) -> Path | None:
    """The SQLite database file the portal will open: ``<var>/reviewportal.sqlite3`` by default, the path of a
    ``sqlite:///`` DATABASE_URL, or None for any other database."""
    url = env_str("DATABASE_URL")
    if url is None:
        return directory / "reviewportal.sqlite3"
    if url.lower().startswith("sqlite:///") and url[len("sqlite:///"):] not in ("", ":memory:"):
        return Path(url[len("sqlite:///"):])
    return None


def ensure_private_database(path: Path) -> str:
    """Create the SQLite database file empty with mode 0600 (exclusive create: an empty file is an empty database),
    or narrow an existing one to 0600. SQLite gives its -wal and -shm files the database file's mode. Returns what
    was done: ``created``, ``narrowed`` or ``kept``."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if path.stat().st_mode & 0o077:
            os.chmod(path, 0o600)
            return "narrowed"
        return "kept"
    os.close(fd)
    return "created"


def readable_by_others(directory: Path) -> bool:
    """True when the var directory lets its group or other users in (it holds the key, the database, the logs)."""
    return bool(directory.stat().st_mode & 0o077)


def main() -> int:
    directory = var_dir()
    if ensure_var_dir(directory):
        print(f"bootstrap: created {directory}")
    if readable_by_others(directory):
        mode = oct(directory.stat().st_mode & 0o777)
        print(
            f"bootstrap: WARNING: {directory} has mode {mode}: group or other users can reach the secret key and the "
            f"database; run: chmod 700 {directory}",
            file=sys.stderr,
        )
    database = sqlite_path(directory)
    if database is not None and database.parent.is_dir():
        done = ensure_private_database(database)
        if done != "kept":
            print(f"bootstrap: {done} {database} (mode 0600)")
    if env_str("SECRET_KEY") is not None:
        print("bootstrap: SECRET_KEY is set in the environment; no key file needed")
    elif ensure_secret_key(directory):
        print(f"bootstrap: created {directory / SECRET_KEY_FILE} (mode 0600)")
    else:
        print(f"bootstrap: kept the existing {directory / SECRET_KEY_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
