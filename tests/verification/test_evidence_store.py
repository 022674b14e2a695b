"""The evidence store keeps what it was given (``evidence.storage``): a stored file is whole and on disk before
``put`` returns (the submission's 202 then says its bytes are kept, as its committed rows are), a write cut short
leaves nothing under the final name, and the same bytes are stored once."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from verification.evidence import storage

CONTENT = b"release-notes v1.2\n- fix: retry on timeout\n"


@pytest.fixture
def store(settings: Any, tmp_path: Path) -> Path:
    settings.VAR_DIR = str(tmp_path)
    settings.STORAGES = {k: v for k, v in settings.STORAGES.items() if k != storage.STORAGE_ALIAS}
    return tmp_path / storage.DIRNAME


def _stored(store: Path, digest: str) -> Path:
    return store / storage.name_for(digest)


def test_a_stored_file_is_flushed_to_disk_with_its_directory_before_put_returns(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc to name the flushed file descriptors")
    flushed: list[str] = []
    fsync = os.fsync

    def recorded(fd: int) -> None:
        flushed.append(os.readlink(f"/proc/self/fd/{fd}"))
        fsync(fd)

    monkeypatch.setattr(os, "fsync", recorded)
    digest = storage.put(CONTENT)
    path = _stored(store, digest)
    assert path.read_bytes() == CONTENT
    # The bytes (under their temporary name), then the directory that now lists the file, then the directories
    # made for it in their parents.
    assert flushed[0].startswith(str(path.parent / ".incoming-")), flushed
    assert flushed[1:] == [str(path.parent), str(path.parent.parent), str(store), str(store.parent)], flushed
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temporary file left
    flushed.clear()
    assert storage.put(CONTENT) == digest  # stored once: nothing written again
    assert flushed == []


def test_a_write_cut_short_leaves_nothing_under_the_final_name(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails before the rename (simulated): the name holds nothing, so the next ``put`` of the same
    bytes writes them instead of taking a cut-short file for stored."""

    def crash(source: str, target: str) -> None:
        raise OSError("the disk is full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        storage.put(CONTENT)
    assert not any(p.is_file() for p in store.rglob("*"))  # neither the final name nor the temporary file
    monkeypatch.undo()
    digest = storage.put(CONTENT)
    path = _stored(store, digest)
    assert storage.read(digest) == CONTENT
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_bytes_another_writer_stored_first_are_kept(store: Path) -> None:
    digest = storage.put(CONTENT)
    path = _stored(store, digest)
    before = path.stat().st_ino
    saved = storage.evidence_storage().save(storage.name_for(digest), io.BytesIO(CONTENT))
    if saved != storage.name_for(digest):  # Django picked another name for the second copy: put removes it
        storage.evidence_storage().delete(saved)
    assert storage.put(CONTENT) == digest
    assert path.stat().st_ino == before and path.read_bytes() == CONTENT
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
