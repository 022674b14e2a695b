"""Prometheus metrics at ``/metrics`` (issue 15, "Seeing it in production"): how fast, how many, how backed up.

Two sources, each where it is exact and cheap:

- **Events are counted in the process where they happen** (prometheus-client; the counters are in
  ``verification/metrics.py``): run latency by verdict, submissions and runs by status, refusals by reason code,
  Celery retries. Under gunicorn and Celery's prefork pool every worker is its own process, so set
  ``PROMETHEUS_MULTIPROC_DIR`` (an empty directory, the same for the web and the workers of a host, wiped at each
  start): prometheus-client then keeps each process's values in a file there and the scrape sums them
  (``MultiProcessCollector``); gunicorn's ``child_exit`` hook should call
  ``prometheus_client.multiprocess.mark_process_dead(worker.pid)``. Without it (one process, ``runserver``, the
  tests) the values are this process's own.
- **State is read from the database at scrape time**: queue depth by reason (from the rollup the database keeps,
  ``review_selectors.count_queue_reasons``: a handful of rows whatever the queue's length), verifications waiting or
  running or failed, reviewer claims and decisions in the last minute. The database is the one place that knows it
  across hosts and restarts, and nothing is written per event to keep it.

Access (never public: the figures describe the workload): a request passes with ``Authorization: Bearer <token>``
equal to ``REVIEWPORTAL_METRICS_TOKEN`` (when set), or from an address inside ``REVIEWPORTAL_METRICS_NETWORKS``
(comma-separated CIDRs; default loopback only). Anything else is 403, in plain text.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Iterator
from datetime import timedelta
from typing import Any, Final

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from verification.metrics import REFUSALS, RETRIES, RUN_SECONDS, RUNS, SUBMISSIONS

TOKEN_SETTING: Final = "REVIEWPORTAL_METRICS_TOKEN"  # noqa: S105 - the setting's name, not a secret
NETWORKS_SETTING: Final = "REVIEWPORTAL_METRICS_NETWORKS"
DEFAULT_NETWORKS: Final = "127.0.0.1/32,::1/128"

class DatabaseCollector(Collector):
    """The state gauges, read when scraped."""

    def collect(self) -> Iterator[Any]:
        from verification.reviews.models import ReviewDecision, ReviewLease
        from verification.reviews.selectors import count_queue_reasons
        from verification.runs.models import Verification

        now = timezone.now()
        depth = GaugeMetricFamily(
            "reviewportal_queue_depth", "Items in the reviewer queue, by reason (as read now)", labels=["reason"]
        )
        for reason, n in count_queue_reasons(now=now):
            depth.add_metric([reason], n)
        yield depth
        waiting = GaugeMetricFamily(
            "reviewportal_verifications", "Verifications without a receipt, by status (queued, running, failed)",
            labels=["status"],
        )
        unrun = Verification.objects.filter(verdict__isnull=True)
        waiting.add_metric(["queued"], unrun.filter(failed_at__isnull=True, started_at__isnull=True).count())
        waiting.add_metric(["running"], unrun.filter(failed_at__isnull=True, started_at__isnull=False).count())
        waiting.add_metric(["failed"], unrun.filter(failed_at__isnull=False).count())
        yield waiting
        minute = now - timedelta(minutes=1)
        yield GaugeMetricFamily(
            "reviewportal_review_claims_per_minute", "Reviewer claims (leases taken) in the last minute",
            value=ReviewLease.objects.filter(claimed_at__gte=minute).count(),
        )
        yield GaugeMetricFamily(
            "reviewportal_decisions_per_minute", "Reviewer decisions recorded in the last minute",
            value=ReviewDecision.objects.filter(created_at__gte=minute).count(),
        )


def _registry() -> CollectorRegistry:
    """The scrape's registry: every process's event counts (multiprocess) or this one's, and the database's state."""
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(registry)
    else:
        for collector in (RUN_SECONDS, SUBMISSIONS, RUNS, REFUSALS, RETRIES):
            registry.register(collector)
    registry.register(DatabaseCollector())
    return registry


def _setting(name: str, default: str) -> str:
    value = getattr(settings, name, None)
    if value is None:
        value = os.environ.get(name, default)
    return str(value)


def allowed(request: HttpRequest) -> bool:
    """A configured token in the Authorization header, or a client address inside the configured networks."""
    token = _setting(TOKEN_SETTING, "")
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer ") and hmac.compare_digest(header[7:].encode(), token.encode()):
        return True
    try:
        client = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    for text in _setting(NETWORKS_SETTING, DEFAULT_NETWORKS).split(","):
        if text.strip():
            try:
                if client in ipaddress.ip_network(text.strip(), strict=False):
                    return True
            except ValueError:
                continue  # a malformed entry admits nobody
    return False


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not allowed(request):
        return HttpResponse("metrics: not for this client\n", status=403, content_type="text/plain; charset=utf-8")
    return HttpResponse(generate_latest(_registry()), content_type=CONTENT_TYPE_LATEST)
