"""Numbers at the boundary (SPEC §3): the ranges a run can compute with, in one place.

Every number a client sends is checked against these when it is received (the API's serializers, the rubric
parser, the services that take a body), so a value that was accepted never makes a later run fail: no timedelta
or datetime overflow, no infinite or NaN weight sum. The serializers publish the same bounds in the OpenAPI schema.
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta
from typing import Final

#: Dates are between 1970 and 9999, in UTC after their offset.
DATE_MIN: Final = datetime(1970, 1, 1, tzinfo=UTC)
DATE_MAX: Final = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
#: Days a filter names (``since``/``until``): the same years, as calendar days.
DAY_MIN: Final = DATE_MIN.date()
DAY_MAX: Final = DATE_MAX.date()
#: Durations (deadlines, ages) are whole seconds, at least 1 and at most 100 years (of 365.25 days).
DURATION_MIN_SECONDS: Final = 1
DURATION_MAX_SECONDS: Final = 36525 * 86400  # 100 years of 365.25 days
#: Sizes and offsets (a citation's code-point span) are at most this (evidence is far smaller: 1 MiB inline).
OFFSET_MAX: Final = 2**31 - 1
#: Weights are finite, positive, and at most 10^6 (a sum of every criterion's weight stays finite).
WEIGHT_MAX: Final = 1_000_000.0


class OutOfRange(ValueError):
    """A number outside its range; the message says which range, the caller names the field."""


def duration_seconds(value: object) -> int:
    """A whole number of seconds in [1, 100 years], or ``OutOfRange``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise OutOfRange("must be a whole number of seconds")
    if not DURATION_MIN_SECONDS <= value <= DURATION_MAX_SECONDS:
        raise OutOfRange(f"must be between {DURATION_MIN_SECONDS} and {DURATION_MAX_SECONDS} seconds (100 years)")
    return value


def duration(value: object) -> timedelta:
    """``duration_seconds`` as a timedelta."""
    return timedelta(seconds=duration_seconds(value))


def weight(value: object) -> float:
    """A finite positive weight of at most 10^6, or ``OutOfRange``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise OutOfRange("must be a number")
    try:
        number = float(value)
    except OverflowError:
        raise OutOfRange(f"must be a finite number above 0 and at most {WEIGHT_MAX:g}") from None
    if not math.isfinite(number) or not 0.0 < number <= WEIGHT_MAX:
        raise OutOfRange(f"must be a finite number above 0 and at most {WEIGHT_MAX:g}")
    return number


def day(value: str) -> date:
    """A ``YYYY-MM-DD`` day between 1970-01-01 and 9999-12-31, or ``OutOfRange``."""
    try:
        parsed = date.fromisoformat(value)
    except (TypeError, ValueError):
        raise OutOfRange("must be a date, YYYY-MM-DD") from None
    if not DAY_MIN <= parsed <= DAY_MAX:
        raise OutOfRange(f"must be between {DAY_MIN.isoformat()} and {DAY_MAX.isoformat()}")
    return parsed


def day_after(value: date) -> date | None:
    """The next day, or None after the last day there is (an inclusive ``until`` of 9999-12-31 bounds nothing)."""
    return None if value >= DAY_MAX else value + timedelta(days=1)


def moment(value: datetime) -> datetime:
    """An aware datetime whose UTC instant lies in [1970-01-01, 9999-12-31T23:59:59.999999Z], or ``OutOfRange``."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise OutOfRange("must carry a UTC offset")
    try:
        in_utc = value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise OutOfRange("must be between 1970-01-01 and 9999-12-31 in UTC") from None
    if not DATE_MIN <= in_utc <= DATE_MAX:
        raise OutOfRange("must be between 1970-01-01 and 9999-12-31 in UTC")
    return value


__all__ = [
    "DATE_MAX",
    "DATE_MIN",
    "DAY_MAX",
    "DAY_MIN",
    "DURATION_MAX_SECONDS",
    "DURATION_MIN_SECONDS",
    "OFFSET_MAX",
    "WEIGHT_MAX",
    "OutOfRange",
    "day",
    "day_after",
    "duration",
    "duration_seconds",
    "moment",
    "weight",
]
