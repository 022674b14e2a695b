"""Services: every write of the domain goes through one of these keyword-only, typed, atomic functions (STYLE §9).

- ``verification.services.receipts``: ``receipt_issue`` (append a signed receipt to a verification's chain).
- ``verification.services.keys``: the portal's signing keys (create, rotate) and the pin log (pin, unpin, revoke).
"""

from __future__ import annotations

from typing import Any

from verification.kernel.errors import KernelError
from verification.kernel.reasons import Reason


class PermissionRefused(KernelError):
    """The acting user may not do this (reason ``permission-denied``)."""

    def __init__(self, detail: str) -> None:
        super().__init__(Reason.PERMISSION_DENIED, detail)


class NotFound(KernelError):
    """The record named does not exist (reason ``not-found``)."""

    def __init__(self, detail: str, **details: Any) -> None:
        super().__init__(Reason.NOT_FOUND, detail, details=details)
