"""The content-addressed evidence store (issue 4 §1): bytes kept in Django storage under their sha256.

By default the filesystem at ``<VAR_DIR>/evidence`` (``REVIEWPORTAL_VAR_DIR``; ``DurableFileSystemStorage``); a
deployment can configure another backend as ``STORAGES["evidence"]``. A name is ``<aa>/<bb>/<64 hex>``: the same
bytes are stored once, and a stored file is never rewritten. Reads answer ``None`` when the bytes are gone, so the
run records ``missing-evidence-integrity-proof`` instead of failing (SPEC §2).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Final

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, Storage, storages

STORAGE_ALIAS: Final = "evidence"
DIRNAME: Final = "evidence"
_DIGEST_RE: Final = re.compile(r"sha256:([0-9a-f]{64})")


def evidence_storage() -> Storage:
    """The evidence store: ``STORAGES["evidence"]`` when configured, else the filesystem under ``<VAR_DIR>/evidence``.

    Looked up on every call: the var dir is a setting that tests (and a reconfigured process) change; the filesystem
    store of one location is built once (a new ``FileSystemStorage`` connects a settings signal receiver: a fifth of
    a verification's storage work).
    """
    if STORAGE_ALIAS in getattr(settings, "STORAGES", {}):
        return storages[STORAGE_ALIAS]
    return _filesystem_storage(str(Path(settings.VAR_DIR) / DIRNAME))


@functools.lru_cache(maxsize=8)
def _filesystem_storage(location: str) -> FileSystemStorage:
    return DurableFileSystemStorage(location=location, file_permissions_mode=0o600, directory_permissions_mode=0o700)


class DurableFileSystemStorage(FileSystemStorage):
    """``FileSystemStorage`` whose saved file is whole and on disk before ``save`` returns.

    A submission's evidence is stored before its rows are committed, and the 202 says both are kept: Django's own
    ``_save`` writes the final name in place and leaves the bytes to the page cache, so a crash of the machine could
    leave the committed row naming a missing or cut-short file (and a cut-short file would then be taken as stored
    by the next ``put`` of the same bytes). Here the bytes go to a temporary file in the target directory, which is
    flushed to disk (``fsync``), then renamed to the final name (a file appears there whole or not at all) and the
    directory entry is flushed too (with any directory made for it)."""

    def _save(self, name: str, content: Any) -> str:
        full = self.path(name)
        directory = os.path.dirname(full)
        made = self._make_directories(directory)
        fd, incoming = tempfile.mkstemp(dir=directory, prefix=".incoming-")
        try:
            with os.fdopen(fd, "wb") as handle:
                for chunk in content.chunks():
                    handle.write(chunk if isinstance(chunk, bytes) else chunk.encode("utf-8"))
                handle.flush()
                os.fsync(handle.fileno())
            if self.file_permissions_mode is not None:
                os.chmod(incoming, self.file_permissions_mode)
            # Atomic: the name holds the whole file or what it held before (a copy of the same bytes, if another
            # writer stored them meanwhile: the name is their digest).
            os.replace(incoming, full)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(incoming)
            raise
        for path in (directory, *(os.path.dirname(d) for d in reversed(made))):  # the deepest first
            _fsync_directory(path)
        return name.replace("\\", "/")

    def _make_directories(self, directory: str) -> list[str]:
        """Make ``directory`` and its missing parents (mode ``directory_permissions_mode``); the ones made."""
        missing: list[str] = []
        path = directory
        while not os.path.isdir(path):
            missing.append(path)
            path = os.path.dirname(path)
        made = []
        for path in reversed(missing):
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                continue  # made meanwhile by another writer
            if self.directory_permissions_mode is not None:
                os.chmod(path, self.directory_permissions_mode)
            made.append(path)
        return made


def _fsync_directory(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def name_for(digest: str) -> str:
    """The storage name of the bytes with ``digest`` (``sha256:<hex>``); ValueError for anything else."""
    match = _DIGEST_RE.fullmatch(digest)
    if match is None:
        raise ValueError(f"not a sha256 digest: {digest!r}")
    hexdigest = match.group(1)
    return f"{hexdigest[:2]}/{hexdigest[2:4]}/{hexdigest}"


def put(content: bytes) -> str:
    """Store ``content`` (once) and return its digest ``sha256:<hex>``."""
    digest = "sha256:" + hashlib.sha256(content).hexdigest()
    storage = evidence_storage()
    name = name_for(digest)
    if not storage.exists(name):
        saved = storage.save(name, ContentFile(content))
        if saved != name:  # a concurrent writer stored the same bytes first; keep one copy
            storage.delete(saved)
    return digest


def read(digest: str) -> bytes | None:
    """The stored bytes with ``digest``, or None when they are gone or unreadable (never raises for that)."""
    try:
        name = name_for(digest)
    except ValueError:
        return None
    try:
        with evidence_storage().open(name, "rb") as handle:
            data = handle.read()
    except (FileNotFoundError, OSError):
        return None
    return data if isinstance(data, bytes) else bytes(data)


def remove(digest: str) -> bool:
    """Delete the stored bytes (redaction by an admin, or a test simulating loss); True when something was removed."""
    storage = evidence_storage()
    name = name_for(digest)
    if not storage.exists(name):
        return False
    storage.delete(name)
    return True
