"""The portal's event counters (Prometheus; served at ``/metrics`` by ``reviewportal/metrics.py``, which says how
they add up across gunicorn and Celery processes). Counting never raises into the caller's work."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

#: Seconds from the start of ``verification_run`` to its commit: the signed run, by the verdict it issued.
RUN_SECONDS = Histogram(
    "reviewportal_run_seconds",
    "Duration of a verification run (evaluate, sign, store, commit), by the verdict it issued",
    ["verdict"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
SUBMISSIONS = Counter("reviewportal_submissions", "Verification submissions, by status (created, replayed)", ["status"])
RUNS = Counter(
    "reviewportal_runs",
    "Verification runs, by status (signed: a receipt issued now; already-run: a redelivery found seq 0; "
    "not-owed: failed before; failed: recorded as failed after the last attempt)",
    ["status"],
)
REFUSALS = Counter("reviewportal_refusals", "API refusals, by reason code (verification/kernel/reasons.py)", ["reason"])
RETRIES = Counter(
    "reviewportal_celery_retries",
    "Celery task retries after an operational error, by task (an eager attempt after the first included)",
    ["task"],
)


def observe_run(*, status: str, verdict: str | None = None, seconds: float | None = None) -> None:
    RUNS.labels(status).inc()
    if verdict is not None and seconds is not None:
        RUN_SECONDS.labels(verdict).observe(seconds)


def count_submission(*, created: bool) -> None:
    SUBMISSIONS.labels("created" if created else "replayed").inc()


def count_refusal(reason: str) -> None:
    REFUSALS.labels(reason).inc()


def count_retry(task: str) -> None:
    RETRIES.labels(task).inc()
