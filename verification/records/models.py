"""Dashboard rollup tables, kept by database triggers (``verification.records.rollups``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class QueueBacklogMember(models.Model):
    """One span of a verification's time line in which it reads as a queue member (``rollups``: the head columns
    until its first PENDING deadline, then each stored read phase), with its reason as read.

    The span is [``due_at``, ``until_at``) exactly (``due_at`` NULL: from the beginning; ``until_at`` NULL: for ever):
    the verification is a member at ``now`` by this row iff ``due_at <= now < until_at``. ``due_hour``: the hour
    ``due_at`` falls in (-1: from the beginning); ``until_hour``: the hour ``until_at`` falls in (``rollups.FOREVER``:
    never). The counts group the rows by their hours; the instants serve the rows with an edge inside the current hour
    (``review_selectors.count_queue_reasons``)."""

    verification_id = models.UUIDField(db_index=True)
    submitted_hour = models.BigIntegerField()
    due_hour = models.BigIntegerField(db_index=True)
    until_hour = models.BigIntegerField(db_index=True)
    reason = models.CharField(max_length=64, default="")
    due_at = models.DateTimeField(null=True)
    until_at = models.DateTimeField(null=True)


class QueueBacklogCount(models.Model):
    """How many ``QueueBacklogMember`` rows share a submission hour and span hours (the backlog dashboard's input)."""

    submitted_hour = models.BigIntegerField()
    due_hour = models.BigIntegerField()
    until_hour = models.BigIntegerField()
    n = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["submitted_hour", "due_hour", "until_hour"], name="queuebacklogcount_key"),
        ]


class QueueReasonCount(models.Model):
    """How many ``QueueBacklogMember`` rows share a reason and span hours (the queue's counts per reason,
    ``review_selectors.queue_counts``)."""

    reason = models.CharField(max_length=64)
    due_hour = models.BigIntegerField()
    until_hour = models.BigIntegerField()
    n = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["reason", "due_hour", "until_hour"], name="queuereasoncount_key"),
        ]


class DecisionDayCount(models.Model):
    """Reviewer actions per UTC day, reviewer and action (decisions per day, per-reviewer counts)."""

    day = models.DateField()
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    action = models.CharField(max_length=16)
    n = models.IntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["day", "user", "action"], name="decisiondaycount_key")]


class DecisionDelay(models.Model):
    """From submission to a person's PASS or FAIL, per decision (the time-to-decision percentiles), in seconds."""

    decision_id = models.BigIntegerField(primary_key=True)
    decided_at = models.DateTimeField()
    seconds = models.FloatField()

    class Meta:
        indexes = [models.Index(fields=["decided_at", "seconds"], name="decisiondelay_period_idx")]


class VerificationDayCount(models.Model):
    """Completed automated outcomes and abstains (UNKNOWN, NOT_RUN) per UTC day of ``Verification.created_at``."""

    day = models.DateField(primary_key=True)
    completed = models.IntegerField(default=0)
    abstained = models.IntegerField(default=0)


class FindingDayCount(models.Model):
    """Findings raised and closed per UTC day (``FindingEvent`` actions)."""

    day = models.DateField()
    action = models.CharField(max_length=16)
    n = models.IntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["day", "action"], name="findingdaycount_key")]


class OpenFindingCount(models.Model):
    """Findings without a ``closed`` event, per kind."""

    kind = models.CharField(max_length=32, primary_key=True)
    n = models.IntegerField(default=0)
