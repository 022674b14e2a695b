"""Refusals of the service layer: ``ServiceError`` carries a registry code (SPEC §11) and an HTTP status.

The API maps any ``KernelError`` to ``{"error": {"code", "message", "details"}}``; a ``ServiceError`` says which
status to answer with (``http_status``). Statuses used by the services:

- 400 a malformed or inconsistent submission (``invalid-request``, ``unknown-field``, ``bad-base64``,
  ``unknown-scope``);
- 403 the authenticated actor may not do this (``permission-denied``, ``actor-cannot-author-result``,
  ``self-contract-acceptance``, ``unnamed-actor``);
- 404 an id that names nothing (``not-found``, raised as ``verification.services.NotFound``);
- 409 the request conflicts with recorded state: ``idempotency-conflict`` (same key, different body),
  ``actor-name-taken``, ``not-pending`` (no check awaits this result), ``pending-expired`` (the result came after
  its deadline: SPEC §2), ``not-awaiting-evidence``;
- 413 ``payload-too-large`` (inline evidence above ``REVIEWPORTAL_API_MAX_INLINE_EVIDENCE_BYTES``);
- 422 refusals of well-formed input by a rule of the domain: ``source-signature-invalid``,
  ``mismatch-not-from-oracle``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verification.kernel.errors import KernelError
from verification.kernel.reasons import Reason


class ServiceError(KernelError):
    """A refusal by a service, with the HTTP status the API answers it with (``http_status``)."""

    def __init__(
        self,
        reason: Reason,
        detail: str = "",
        *,
        status: int = 400,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(reason, detail, details=details)
        self.http_status = status


class PermissionRefused(KernelError):
    """The acting user may not do this (reason ``permission-denied``)."""

    def __init__(self, detail: str) -> None:
        super().__init__(Reason.PERMISSION_DENIED, detail)


class NotFound(KernelError):
    """The record named does not exist (reason ``not-found``)."""

    def __init__(self, detail: str, **details: Any) -> None:
        super().__init__(Reason.NOT_FOUND, detail, details=details)
