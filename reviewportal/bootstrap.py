"""One-time setup that must happen before Django starts: ``python -m reviewportal.bootstrap``.

Creates the var directory (mode 0700) and ``var/secret_key`` (mode 0600) with an exclusive create, so two processes
cannot race and an existing key is never replaced. Idempotent. Plain Python: needs no Django settings.
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


def main() -> int:
    directory = var_dir()
    if ensure_var_dir(directory):
        print(f"bootstrap: created {directory}")
    if env_str("SECRET_KEY") is not None:
        print("bootstrap: SECRET_KEY is set in the environment; no key file needed")
    elif ensure_secret_key(directory):
        print(f"bootstrap: created {directory / SECRET_KEY_FILE} (mode 0600)")
    else:
        print(f"bootstrap: kept the existing {directory / SECRET_KEY_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
