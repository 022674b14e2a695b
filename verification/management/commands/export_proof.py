"""``manage.py export_proof ID [--out FILE]``: write a verification's proof for ``verify_proof`` (SPEC §7).

The proof goes to FILE (or stdout); the trusted head, the verification id and the submission hash go to stderr, so
the caller can pass them to ``verify_proof`` (which never takes them from the proof itself).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from verification.runs.selectors import verification_get
from verification.trust.selectors import proof_for


class Command(BaseCommand):
    help = "Write a verification's proof document (for manage.py verify_proof); print head and subject to stderr."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("verification_id", metavar="ID")
        parser.add_argument("--out", metavar="FILE", help="write the proof here (default: stdout)")

    def handle(self, *args: Any, **options: Any) -> None:
        verification = verification_get(options["verification_id"])
        if verification is None:
            raise CommandError(f"not-found: no verification {options['verification_id']!r}")
        proof = proof_for(verification)
        if proof is None:
            raise CommandError(f"not-found: verification {verification.id} has no receipts yet")
        text = json.dumps(proof, indent=2, ensure_ascii=False) + "\n"
        if options["out"]:
            path = Path(options["out"])
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)
            self.stderr.write(f"wrote {path} ({len(proof['entries'])} entries)")
        else:
            self.stdout.write(text, ending="")
        self.stderr.write(f"head: {proof['proof_head_hash']}")
        self.stderr.write(f"verification-id: {verification.id}")
        self.stderr.write(f"submission-hash: {verification.submission_hash}")
