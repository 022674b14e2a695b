"""A Celery worker with a slow run, for tests/verification/test_worker.py (the seam lives in the tests, not the app).

``python -m tests.verification.slow_worker <celery worker arguments>`` starts ``celery -A reviewportal worker`` after
wrapping ``verification.runs.services.run.receipt_issue_held`` (what ``verification_run`` signs with): a run
of a verification whose Idempotency-Key starts with ``slow-`` writes ``<SLOW_DIR>/<verification id>.<pid>`` and
sleeps ``SLOW_SECONDS`` inside the transaction that would sign, so the test can SIGKILL the pool child in the middle
of the run. The directory and the seconds come from ``REVIEWPORTAL_TEST_SLOW_DIR`` and
``REVIEWPORTAL_TEST_SLOW_SECONDS``, which only this launcher reads.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

SLOW_DIR_ENV = "REVIEWPORTAL_TEST_SLOW_DIR"
SLOW_SECONDS_ENV = "REVIEWPORTAL_TEST_SLOW_SECONDS"
SLOW_KEY_PREFIX = "slow-"


def install() -> None:
    """Wrap the run path's ``receipt_issue_held`` (a module global, looked up at each call)."""
    import django

    django.setup()
    from verification.runs.services import run

    directory = Path(os.environ[SLOW_DIR_ENV])
    seconds = float(os.environ.get(SLOW_SECONDS_ENV, "5"))
    original = run.receipt_issue_held

    def slow_receipt_issue(*, verification: Any, **kwargs: Any) -> Any:
        if (verification.idempotency_key or "").startswith(SLOW_KEY_PREFIX):
            Path(directory, f"{verification.pk}.{os.getpid()}").write_text(str(os.getpid()), encoding="ascii")
            time.sleep(seconds)
        return original(verification=verification, **kwargs)

    run.receipt_issue_held = slow_receipt_issue  # type: ignore[assignment]


def main(argv: list[str]) -> int:
    install()
    from reviewportal.celery import app

    app.worker_main(argv=argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
