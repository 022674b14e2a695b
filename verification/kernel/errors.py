"""One error hierarchy with stable reason codes (STYLE §5)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verification.kernel.reasons import Reason, explain


class KernelError(Exception):
    """Base of every refusal the kernel raises. ``reason`` is a code from the registry (SPEC §11)."""

    def __init__(self, reason: Reason, detail: str = "", *, details: Mapping[str, Any] | None = None) -> None:
        self.reason = Reason(reason)
        self.detail = detail
        self.details: Mapping[str, Any] = dict(details or {})
        super().__init__(f"{self.reason.value}: {detail or explain(self.reason)}")

    def diagnostics(self) -> str:
        """A human-readable account: the code, its registered words, and the specific detail."""
        text = f"{self.reason.value} — {explain(self.reason)}"
        if self.detail:
            text += f" ({self.detail})"
        return text


class StrictJSONError(KernelError):
    """Bytes meant to be hashed or signed are not strict JSON (SPEC §7)."""


class KeyRefused(KernelError):
    """A public key was refused where it entered (SPEC §7, §8)."""


class ProofVerificationError(KernelError):
    """The strict verifier refused a proof; ``reason`` is the first failing step's code (SPEC §7)."""


class ExpressionError(KernelError):
    """The obligation expression parser refused its input (SPEC §5)."""


class RubricError(KernelError):
    """A rubric was refused at registration (SPEC §5)."""


class DecisionRefused(KernelError):
    """A human decision was refused; no receipt may be issued (SPEC §2, §9)."""


class InvariantError(KernelError):
    """A value that the kernel's types forbid was constructed (e.g. a MISMATCH outside the oracle seam)."""
