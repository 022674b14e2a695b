"""The admin pages for chains (SPEC §7, §8): one chain, an uploaded proof, operations, the audit."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from reviewportal.adminportal import access, presenters
from reviewportal.adminportal.forms import (
    VerifyProofForm,
)
from reviewportal.adminportal.views import GET_POST, _render
from reviewportal.viewhelpers import refusal_words as _refusal
from verification.kernel.canonical import loads_strict
from verification.kernel.errors import KernelError
from verification.kernel.reasons import Reason
from verification.runs.selectors import verification_get
from verification.trust import selectors as trust_selectors
from verification.trust.services import audit, checkpoints


@require_GET
@access.chains_inspector
def chain(request: HttpRequest, verification_id: Any) -> HttpResponse:
    """The strict verifier's report of one verification's chain: every step for every entry (SPEC §7)."""
    verification = verification_get(verification_id)
    if verification is None:
        raise Http404("no such verification")
    report = presenters.verification_chain(verification)
    findings = trust_selectors.audit_findings_of(verification)
    return _render(
        request, "adminportal/chain.html", {"verification": verification, "report": report, "findings": findings}
    )


def _too_large() -> KernelError:
    return KernelError(Reason.PAYLOAD_TOO_LARGE, f"the proof is larger than {trust_selectors.MAX_PROOF_BYTES} bytes")


def _read_upload(form: VerifyProofForm) -> bytes:
    """The proof's bytes exactly as uploaded (or as pasted, UTF-8); ``payload-too-large`` above the limit."""
    upload = form.cleaned_data.get("proof_file")
    if upload is not None:
        if upload.size is not None and upload.size > trust_selectors.MAX_PROOF_BYTES:
            raise _too_large()
        data = bytes(upload.read(trust_selectors.MAX_PROOF_BYTES + 1))
    else:
        data = str(form.cleaned_data.get("proof_text") or "").strip().encode("utf-8", errors="surrogatepass")
    if len(data) > trust_selectors.MAX_PROOF_BYTES:
        raise _too_large()
    return data


def _proof_of(data: bytes) -> tuple[bytes, bool]:
    """One bundle format (issue 14): a proof bundle ``{"proof", "jwks"}`` as History downloads it gives its proof, read
    the way ``manage.py verify_proof --bundle`` reads it (re-serialized; the envelopes inside are strings, so their
    exact bytes are kept); anything else is taken as a bare proof. The bundle's key set is ignored: here the pinned
    proof-signing keys decide. (The proof bytes and whether they came from a bundle.)"""
    try:
        document = loads_strict(data)
    except KernelError:
        return data, False  # the verifier names what is wrong with it
    if isinstance(document, dict) and set(document) == {"proof", "jwks"} and isinstance(document["proof"], dict):
        return json.dumps(document["proof"], ensure_ascii=False).encode("utf-8"), True
    return data, False


@GET_POST
@access.chains_inspector
def verify_proof(request: HttpRequest) -> HttpResponse:
    """Verify an uploaded (or pasted) proof against the pinned proof-signing keys and a head the admin enters."""
    form = VerifyProofForm(request.POST or None, request.FILES or None)
    context: dict[str, Any] = {"form": form, "report": None, "refusal": None}
    if request.method == "POST" and form.is_valid():
        try:
            data = _read_upload(form)
        except KernelError as exc:
            context["refusal"] = _refusal(exc)
        else:
            data, context["from_bundle"] = _proof_of(data)
            context["report"] = presenters.uploaded_proof_report(
                data,
                trusted_head=form.cleaned_data["trusted_head"].strip(),
                verification_id=form.cleaned_data["verification_id"].strip(),
                submission_hash=form.cleaned_data["submission_hash"].strip(),
            )
    return _render(request, "adminportal/verify_proof.html", context)


@require_GET
@never_cache
@access.chains_inspector
def operations(request: HttpRequest) -> HttpResponse:
    """Verifications queued or running longer than ``REVIEWPORTAL_STUCK_AFTER_SECONDS``: the sweeper publishes their
    runs again; what stays here needs an operator (a worker that does not start, a broker that does not answer)."""
    from verification.runs.operations import stuck

    found = stuck(now=timezone.now(), after_seconds=int(settings.REVIEWPORTAL_STUCK_AFTER_SECONDS))
    return _render(
        request,
        "adminportal/operations.html",
        {
            "stuck": found,
            "now": timezone.now(),
            "sweep_after": settings.REVIEWPORTAL_SWEEP_AFTER_SECONDS,
            "sweep_interval": settings.REVIEWPORTAL_SWEEP_INTERVAL_SECONDS,
        },
    )


@require_GET
@access.chains_inspector
def audit_page(request: HttpRequest) -> HttpResponse:
    return _render(
        request,
        "adminportal/audit.html",
        {
            "runs": trust_selectors.latest_audit_runs(10),
            "checkpoints": trust_selectors.checkpoint_tail(10),
            "checkpoint_path": checkpoints.checkpoint_log_path(),
            "findings": trust_selectors.audit_findings(),
        },
    )


@require_POST
@access.chains_inspector
def audit_run(request: HttpRequest) -> HttpResponse:
    """Run the audit now (the same service the beat task and ``manage.py audit_chains`` call)."""
    report = audit.audit_run(by=request.user)
    if report.skipped:
        messages.info(request, "Another audit run is in progress; try again in a moment.")
    elif report.ok:
        messages.success(
            request, f"Audit: {report.chains} chains, {report.receipts} receipts verified; no tampering found."
        )
    else:
        messages.error(
            request,
            f"Audit: {len(report.tamper)} tamper problem(s) found, {report.findings_raised} new finding(s) raised.",
        )
    return redirect("adminportal:audit")
