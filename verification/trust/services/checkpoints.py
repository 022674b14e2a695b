"""The audit's checkpoint log (SPEC §8): a file outside the database, only appended to; its last trusted line.

The line format and its signature are the kernel's (``verification.kernel.checkpoint``)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Final

from verification.kernel.checkpoint import (
    Checkpoint,
    CheckpointRefused,
    parse_checkpoint,
    sign_checkpoint,
    verify_checkpoint,
)
from verification.kernel.findings import FindingKind
from verification.kernel.reasons import Reason
from verification.kernel.verifier import TrustedKey
from verification.trust import root as trust
from verification.trust import signing
from verification.trust.models import AuditRun
from verification.trust.services.audit_report import AuditReport, Problem
from verification.trust.signing import SigningKeyUnavailable

CHECKPOINT_FILENAME: Final = "checkpoints.log"


def checkpoint_log_path() -> Path:
    """``settings.REVIEWPORTAL_CHECKPOINT_LOG``, else ``<VAR_DIR>/checkpoints.log`` (resolved on every call)."""
    return trust.var_file("REVIEWPORTAL_CHECKPOINT_LOG", CHECKPOINT_FILENAME)


def append_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    """Append one line (O_APPEND, then fsync): the log is only ever added to."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (checkpoint.as_line() + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def read_checkpoints(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of every non-blank line of the log; nothing when the file does not exist yet."""
    try:
        handle = path.open("r", encoding="utf-8", errors="replace", newline="\n")
    except FileNotFoundError:
        return
    with handle:
        for number, text in enumerate(handle, start=1):
            stripped = text.rstrip("\n")
            if stripped.strip():
                yield number, stripped


def trusted_checkpoint(path: Path, keys: Mapping[str, TrustedKey], report: AuditReport) -> Checkpoint | None:
    """The last line of the log signed by a portal key trusted for proof-signing (``trust.trusted_keys``), not revoked.

    A malformed line, or one whose key is unknown or whose signature fails, is a tamper problem and set aside; a line
    signed by a since-revoked key is set aside with a note (nothing it says can be trusted any more)."""
    own = {k.key.key_id for k in trust.own_keys()}
    last: Checkpoint | None = None
    set_aside_revoked = 0
    present: set[tuple[int, str]] = set()
    for number, text in read_checkpoints(path):
        try:
            checkpoint = parse_checkpoint(text, line=number)
        except CheckpointRefused as exc:
            report.problems.append(_log_problem(number, exc.reason, exc.detail))
            continue
        present.add((checkpoint.tree_size, checkpoint.root_hash))
        entry = keys.get(checkpoint.key_id)
        if checkpoint.key_id not in own or entry is None:
            report.problems.append(
                _log_problem(
                    number,
                    Reason.UNKNOWN_KEY,
                    f"line {number}: signed by {checkpoint.key_id!r}, not a portal key pinned for proof-signing",
                )
            )
            continue
        if not verify_checkpoint(checkpoint, entry.key):
            report.problems.append(
                _log_problem(number, Reason.SIGNATURE_FAILURE, f"line {number}: the signature does not verify")
            )
            continue
        if entry.revoked:
            set_aside_revoked += 1
            continue
        if last is not None and checkpoint.tree_size < last.tree_size:
            report.problems.append(
                _log_problem(
                    number,
                    Reason.CHECKPOINT_INCONSISTENT,
                    f"line {number}: the tree shrank from {last.tree_size} to {checkpoint.tree_size} leaves",
                )
            )
            continue
        last = checkpoint
    # The database remembers the last checkpoint an audit wrote: a log that lost it was cut or replaced.
    written = AuditRun.objects.filter(checkpoint_written=True).order_by("-id").first()
    if written is not None and (written.tree_size, written.root_hash) not in present:
        report.problems.append(
            Problem(
                FindingKind.TAMPER,
                Reason.CHECKPOINT_INCONSISTENT,
                ("checkpoint-log", "missing", f"{written.tree_size}:{written.root_hash}"),
                f"audit run {written.pk} appended a checkpoint of {written.tree_size} leaves (root "
                f"{written.root_hash}) that {path} no longer holds: lines were removed or the log was replaced",
            )
        )
    if set_aside_revoked:
        report.notes.append(
            f"{set_aside_revoked} checkpoint(s) signed by a since-revoked key were set aside (SPEC §8: nothing "
            "signed by a revoked key is trusted)"
        )
    return last


def _log_problem(line: int, code: Reason, detail: str) -> Problem:
    return Problem(FindingKind.TAMPER, code, ("checkpoint-log", f"line {line}", code.value), detail)


def write_checkpoint(path: Path, checkpoint: Checkpoint | None, report: AuditReport, now: datetime) -> None:
    if checkpoint is not None and checkpoint.tree_size == report.tree_size:
        return  # nothing new: the last checkpoint still describes the tree
    try:
        _, private_key = signing.active_signer()
    except SigningKeyUnavailable as exc:
        report.notes.append(f"no checkpoint written: {exc.reason.value} ({exc.detail})")
        return
    written = sign_checkpoint(
        private_key=private_key, tree_size=report.tree_size, root_hash=report.root_hash, timestamp=now
    )
    append_checkpoint(path, written)
    report.written = written
