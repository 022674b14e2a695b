"""``manage.py audit_chains [--json]``: run the continuous audit once (issue 7 §5; ``services.audit.audit_run``).

Re-verifies every receipt chain with the strict verifier, checks the portal's signing keys against the pin log,
extends the RFC 6962 tree over all receipts, checks it against the last signed checkpoint and appends a new one to
the checkpoint log (``REVIEWPORTAL_CHECKPOINT_LOG``, default ``<var>/checkpoints.log``). Every problem becomes a
finding (once per state). Exit 0 when nothing was tampered with (chains signed by a revoked key are findings of
their own kind, SPEC §8), 1 when something was, 2 when another run held the lock.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from verification.trust.services.audit import audit_run


class Command(BaseCommand):
    help = "Re-verify every receipt chain, check the keys and the Merkle checkpoint; raise findings for what fails."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print the run's summary as JSON on stdout")

    def handle(self, *args: Any, **options: Any) -> None:
        report = audit_run()
        if options["json"]:
            self.stdout.write(json.dumps(report.summary(), indent=2))
        else:
            self._describe(report)
        self.stdout.flush()
        if report.skipped:
            raise SystemExit(2)
        if not report.ok:
            raise SystemExit(1)

    def _describe(self, report: Any) -> None:
        if report.skipped:
            self.stderr.write("audit skipped: another run holds the lock")
            return
        self.stdout.write(
            f"audit: {report.chains} chain(s), {report.receipts} receipt(s), tree of {report.tree_size} leaves, "
            f"root {report.root_hash}"
        )
        if report.checkpoint is None:
            self.stdout.write("no trusted checkpoint to compare with (first run, or all set aside)")
        else:
            said = "consistent" if report.consistent else "NOT consistent"
            last = report.checkpoint
            self.stdout.write(f"{said} with checkpoint line {last.line} ({last.tree_size} leaves)")
        if report.written is not None:
            written = report.written
            self.stdout.write(f"checkpoint appended: {written.tree_size} leaves, signed by {written.key_id}")
        for note in report.notes:
            self.stdout.write(f"note: {note}")
        for problem in report.problems:
            self.stdout.write(f"{problem.kind.value}: {problem.code.value}: {problem.detail}")
        self.stdout.write(f"{report.findings_raised} new finding(s); {'ok' if report.ok else 'TAMPERING FOUND'}")
