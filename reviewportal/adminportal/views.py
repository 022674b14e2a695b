"""The admin pages (issue 7): thin views, one access decorator each, one service call, a render (STYLE §10).

Every refusal is shown with its code and the registry's words (SPEC §11). Every page works without JavaScript; htmx
only swaps the security log's and the evidence list's rows in place (``request.htmx``: the fragment, otherwise the
page), and every ``hx-get`` also has an ``href`` or a form action. Actions with consequences (rotate, revoke,
unpin, redact, deactivate) are a GET confirmation page naming them, then a POST.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Final
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.db import DatabaseError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST, require_safe

from reviewportal import prg
from reviewportal.adminportal import access
from reviewportal.adminportal.forms import (
    ActorCreateForm,
    DeactivateForm,
    PinForm,
    RedactForm,
    RevokeForm,
    RolesForm,
    RotateForm,
    TokenCreateForm,
    UnpinForm,
    UserCreateForm,
    VerifyProofForm,
)
from verification import csv_export
from verification.actors import selectors as actors_selectors
from verification.actors.models import Actor
from verification.actors.services import users
from verification.evidence import selectors as evidence_selectors
from verification.evidence.selectors import evidence_get
from verification.kernel.canonical import loads_strict
from verification.kernel.errors import KernelError
from verification.kernel.reasons import Reason, explain
from verification.runs.selectors import verification_get
from verification.trust import selectors as trust_selectors
from verification.trust.models import SecurityEventKind
from verification.trust.services import audit, checkpoints, keys, security_log
from verification.trust.services.security_log import client_address
from verification.trust.signing import SigningKeyUnavailable

GET_POST: Final = require_http_methods(["GET", "POST"])
LOG_CSV_HEADER: Final = ("id", "created_at", "kind", "actor", "username", "target", "ip_address", "detail")


def _refusal(exc: KernelError) -> dict[str, str]:
    """A refusal in plain words: the code, its registered sentence, and the specific detail (SPEC §11)."""
    return {"code": exc.reason.value, "text": explain(exc.reason), "detail": exc.detail}


def _render(request: HttpRequest, template: str, context: dict[str, Any], status: int = 200) -> HttpResponse:
    """Every admin page shows the portal's own key (SPEC §8: confirm it out of band) and the sections it may open."""
    base = {"portal_key": trust_selectors.portal_key(), "admin_sections": access.sections(request.user)}
    return render(request, template, {**base, **context}, status=status)


def _htmx(request: HttpRequest) -> bool:
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.history_restore_request


def _page_size() -> int:
    return int(getattr(settings, "REVIEWPORTAL_ADMIN_PAGE_SIZE", 50))


# --- public: the portal's keys -------------------------------------------------------------------------------------


@require_safe
def public_keys(request: HttpRequest) -> HttpResponse:
    """No sign-in: the portal's fingerprints, so anyone can confirm them out of band before pinning (SPEC §8, §12)."""
    response = render(
        request,
        "adminportal/public_keys.html",
        {"portal_key": trust_selectors.portal_key(), "keys": trust_selectors.portal_keys()},
    )
    response["Cache-Control"] = "public, max-age=60"
    return response


# --- home -------------------------------------------------------------------------------------------------------------


@require_GET
@access.admin_required
def home(request: HttpRequest) -> HttpResponse:
    runs = audit.latest_runs(1)
    return _render(request, "adminportal/home.html", {"last_run": runs[0] if runs else None})


# --- keys -----------------------------------------------------------------------------------------------------------


def _keys_context(**extra: Any) -> dict[str, Any]:
    return {
        "keys": trust_selectors.portal_keys(),
        "pins": trust_selectors.pins_in_force(),
        "pin_log": trust_selectors.pin_log_rows(),
        "form": PinForm(),
        "refusal": None,
        **extra,
    }


@require_GET
@access.keys_admin
def keys_page(request: HttpRequest) -> HttpResponse:
    """The keys; after a refused pin (Post/Redirect/Get), the form as typed with its refusal."""
    state = prg.kept(request, KEPT_PIN)
    data = prg.kept_data(state)
    if state is None or data is None:
        return _render(request, "adminportal/keys.html", _keys_context())
    form = PinForm(data)
    form.is_valid()  # the same field errors again
    return _render(request, "adminportal/keys.html", _keys_context(form=form, refusal=state.get("refusal")))


#: The keys of forms kept across a refusal's redirect (reviewportal.prg).
KEPT_PIN: Final = "admin.pin"
KEPT_TOKEN: Final = "admin.token"  # noqa: S105 - a session key, not a secret


def _kept_roles(user_id: Any) -> str:
    return f"admin.roles:{user_id}"


@require_POST
@access.keys_admin
def key_pin(request: HttpRequest) -> HttpResponse:
    """Pin a pasted key for one purpose, only if the typed out-of-band fingerprint matches (``services.keys``)."""
    form = PinForm(request.POST)
    back = reverse("adminportal:keys") + "#pin"
    if not form.is_valid():
        return prg.refuse(request, KEPT_PIN, back, fields=request.POST)
    data = form.cleaned_data
    try:
        entry = keys.key_pin(
            actor_user=request.user,
            jwk_or_pem_text=data["key_text"],
            purpose=data["purpose"],
            typed_fingerprint=data["fingerprint"],
            channel=data["channel"],
            note=data["note"],
        )
    except KernelError as exc:
        if _denied(exc):
            return _render(request, "adminportal/keys.html", _keys_context(form=form, refusal=_refusal(exc)), 403)
        # Post/Redirect/Get (issue 14): the keys page shows the form as typed and the refusal; reload never re-pins.
        return prg.refuse(request, KEPT_PIN, back, fields=request.POST, refusal=_refusal(exc))
    prg.drop(request, KEPT_PIN)
    messages.success(request, f"Pinned {entry.key_id} for {entry.purpose} (pin log entry {entry.pk}).")
    return redirect(reverse("adminportal:keys") + "#pin-log")


@GET_POST
@access.keys_admin
def key_unpin(request: HttpRequest, key_id: str) -> HttpResponse:
    purpose = request.POST.get("purpose") or request.GET.get("purpose", "")
    pin = trust_selectors.pin_of(key_id, purpose)
    if pin is None:
        raise Http404("this key is not pinned for that purpose")
    form = UnpinForm(request.POST or None, initial={"purpose": purpose})
    context: dict[str, Any] = {"pin": pin, "fingerprint": trust_selectors.grouped(pin.fingerprint), "form": form}
    if request.method == "POST" and form.is_valid():
        try:
            keys.key_unpin(
                actor_user=request.user,
                key_id=key_id,
                purpose=form.cleaned_data["purpose"],
                channel=form.cleaned_data["channel"],
                note=form.cleaned_data["note"],
            )
        except KernelError as exc:
            context["refusal"] = _refusal(exc)
            return _render(request, "adminportal/key_unpin.html", context, 403 if _denied(exc) else 200)
        messages.success(request, f"Unpinned {key_id} for {form.cleaned_data['purpose']}: a new pin-log entry.")
        return redirect(reverse("adminportal:keys") + "#pin-log")
    return _render(request, "adminportal/key_unpin.html", context)


def _denied(exc: KernelError) -> bool:
    return exc.reason is Reason.PERMISSION_DENIED


@GET_POST
@access.keys_admin
def key_revoke(request: HttpRequest, key_id: str) -> HttpResponse:
    """Revoke a key for good (SPEC §8), behind a page naming the consequences."""
    if not trust_selectors.known_key(key_id):
        raise Http404("no such key")
    own = trust_selectors.portal_key_get(key_id)
    form = RevokeForm(request.POST or None)
    context: dict[str, Any] = {
        "key_id": key_id,
        "own": trust_selectors.key_row(own) if own is not None else None,
        "active": own is not None and own.status == "active",
        "form": form,
    }
    if request.method == "POST" and form.is_valid():
        try:
            keys.key_revoke(
                key_id=key_id,
                reason=form.cleaned_data["reason"],
                channel=form.cleaned_data["channel"],
                actor_user=request.user,
            )
        except KernelError as exc:
            context["refusal"] = _refusal(exc)
            return _render(request, "adminportal/key_revoke.html", context, 403 if _denied(exc) else 200)
        messages.success(request, f"Revoked {key_id}: it is listed at revoked.json and fails verification from now.")
        return redirect(reverse("adminportal:keys") + "#pin-log")
    return _render(request, "adminportal/key_revoke.html", context)


@GET_POST
@access.keys_admin
def key_rotate(request: HttpRequest) -> HttpResponse:
    """Retire the active key and make a new one active (SPEC §8), behind a page naming the consequences."""
    form = RotateForm(request.POST or None)
    context: dict[str, Any] = {"form": form}
    if request.method == "POST" and form.is_valid():
        try:
            old, new = security_log.signing_key_rotate_as_admin(user=request.user)
        except SigningKeyUnavailable as exc:
            context["refusal"] = _refusal(exc)
            return _render(request, "adminportal/key_rotate.html", context)
        except KernelError as exc:
            context["refusal"] = _refusal(exc)
            return _render(request, "adminportal/key_rotate.html", context, 403 if _denied(exc) else 200)
        retired = f"retired {old.key_id}; " if old is not None else ""
        messages.success(request, f"Rotated: {retired}{new.key_id} is now active. Publish its fingerprint.")
        return redirect("adminportal:keys")
    return _render(request, "adminportal/key_rotate.html", context)


# --- receipt chains ---------------------------------------------------------------------------------------------------


@require_GET
@access.chains_inspector
def chain(request: HttpRequest, verification_id: Any) -> HttpResponse:
    """The strict verifier's report of one verification's chain: every step for every entry (SPEC §7)."""
    verification = verification_get(verification_id)
    if verification is None:
        raise Http404("no such verification")
    report = trust_selectors.verification_chain(verification)
    findings = verification.findings.filter(kind__in=["tamper", "revoked_key"]).order_by("-id")
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
            context["report"] = trust_selectors.uploaded_proof_report(
                data,
                trusted_head=form.cleaned_data["trusted_head"].strip(),
                verification_id=form.cleaned_data["verification_id"].strip(),
                submission_hash=form.cleaned_data["submission_hash"].strip(),
            )
    return _render(request, "adminportal/verify_proof.html", context)


# --- operations: verifications queued or running too long (issue 16) -------------------------------------------------


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


# --- the audit --------------------------------------------------------------------------------------------------------


@require_GET
@access.chains_inspector
def audit_page(request: HttpRequest) -> HttpResponse:
    return _render(
        request,
        "adminportal/audit.html",
        {
            "runs": audit.latest_runs(10),
            "checkpoints": checkpoints.checkpoint_tail(10),
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


# --- evidence ---------------------------------------------------------------------------------------------------------


@require_GET
@access.evidence_inspector
def evidence_list(request: HttpRequest) -> HttpResponse:
    filters = {name: request.GET.get(name, "").strip() for name in ("q", "state")}
    cursor = request.GET.get("cursor", "").strip() or None
    refusal = None
    try:
        rows, next_cursor = evidence_selectors.evidence_list(filters=filters, cursor=cursor, limit=_page_size())
    except KernelError as exc:
        refusal = _refusal(exc)
        filters, cursor = {"q": "", "state": ""}, None
        rows, next_cursor = evidence_selectors.evidence_list(filters={}, cursor=None, limit=_page_size())
    query = {k: v for k, v in filters.items() if v}
    here = reverse("adminportal:evidence")
    context = {
        "rows": rows,
        "filters": filters,
        "list_refusal": refusal,
        "states": trust_selectors.EVIDENCE_STATES,
        "next_url": f"{here}?{urlencode({**query, 'cursor': next_cursor})}" if next_cursor else None,
        "first_url": f"{here}?{urlencode(query)}" if cursor else None,
    }
    if _htmx(request):
        return _render(request, "adminportal/_evidence_rows.html", context)
    return _render(request, "adminportal/evidence_list.html", context)


@require_GET
@access.evidence_inspector
def evidence_detail(request: HttpRequest, evidence_id: Any) -> HttpResponse:
    evidence = evidence_get(evidence_id)
    if evidence is None:
        raise Http404("no such evidence")
    detail = evidence_selectors.evidence_detail(evidence)
    return _render(request, "adminportal/evidence_detail.html", {"detail": detail})


@GET_POST
@access.evidence_inspector
def evidence_redact(request: HttpRequest, evidence_id: Any) -> HttpResponse:
    """Redact an artifact with a reason: bytes leave the store, the digest stays, rechecks answer evidence-redacted."""
    evidence = evidence_get(evidence_id)
    if evidence is None:
        raise Http404("no such evidence")
    form = RedactForm(request.POST or None)
    detail = evidence_selectors.evidence_detail(evidence)
    context: dict[str, Any] = {"evidence": evidence, "form": form, "detail": detail}
    if request.method == "POST" and form.is_valid():
        try:
            security_log.evidence_redact_as_admin(
                user=request.user, evidence=evidence, reason=form.cleaned_data["reason"],
                ip_address=client_address(request),
            )
        except KernelError as exc:
            context["refusal"] = _refusal(exc)
            return _render(request, "adminportal/evidence_redact.html", context, 403 if _denied(exc) else 200)
        messages.success(request, "Redacted: the bytes are gone from the store; the digest and the record stay.")
        return redirect("adminportal:evidence-detail", evidence_id=evidence.pk)
    return _render(request, "adminportal/evidence_redact.html", context)


# --- users and tokens -------------------------------------------------------------------------------------------------


def _user_or_404(user_id: Any) -> Any:
    user = actors_selectors.user_get(user_id)
    if user is None:
        raise Http404("no such user")
    return user


@require_GET
@access.users_admin
def users_page(request: HttpRequest) -> HttpResponse:
    return _render(request, "adminportal/users.html", {"rows": actors_selectors.user_rows()})


@GET_POST
@access.users_admin
def user_create(request: HttpRequest) -> HttpResponse:
    form = UserCreateForm(request.POST or None)
    context: dict[str, Any] = {"form": form}
    if request.method == "POST" and form.is_valid() and not _user_problems(form):
        data = form.cleaned_data
        try:
            user = users.user_create(
                by=request.user, username=data["username"], password=data["password"], roles=data["roles"],
                email=data["email"] or "",
            )
        except KernelError as exc:
            context["refusal"] = _refusal(exc)
            return _render(request, "adminportal/user_create.html", context, 403 if _denied(exc) else 200)
        messages.success(request, f"Created {user.get_username()}.")
        return redirect("adminportal:user-detail", user_id=user.pk)
    return _render(request, "adminportal/user_create.html", context)


def _user_problems(form: UserCreateForm) -> bool:
    """Web words (issue 14): every problem the service's validators find (a weak password, a bad username), each
    beside its field and all at once, instead of the API's one ``invalid-request``. True if there were any."""
    from django.contrib.auth import get_user_model

    data = form.cleaned_data
    candidate = get_user_model()(username=data["username"].strip(), email=(data["email"] or "").strip())
    problems = users.user_problems(candidate, data["password"])
    for name, texts in problems.items():
        for text in texts:
            form.add_error(name if name in form.fields else None, text)
    return bool(problems)


def _user_context(user: Any, **extra: Any) -> dict[str, Any]:
    actor = Actor.objects.filter(user=user).first()
    return {
        "subject": user,
        "roles": users.roles_of(user),
        "roles_form": RolesForm(initial={"roles": users.roles_of(user)}),
        "actor": actor,
        "tokens": actors_selectors.token_rows(actor=actor.name) if actor is not None else [],
        "leases": actors_selectors.leases_held(user),
        "log": trust_selectors.security_log_of_user(user),
        **extra,
    }


@require_GET
@access.users_admin
def user_detail(request: HttpRequest, user_id: Any) -> HttpResponse:
    user = _user_or_404(user_id)
    state = prg.kept(request, _kept_roles(user.pk))
    data = prg.kept_data(state)
    if state is None or data is None:
        return _render(request, "adminportal/user_detail.html", _user_context(user))
    form = RolesForm(data)
    form.is_valid()
    context = _user_context(user, roles_form=form, refusal=state.get("refusal"))
    return _render(request, "adminportal/user_detail.html", context)


@require_POST
@access.users_admin
def user_roles(request: HttpRequest, user_id: Any) -> HttpResponse:
    user = _user_or_404(user_id)
    form = RolesForm(request.POST)
    key, back = _kept_roles(user.pk), reverse("adminportal:user-detail", kwargs={"user_id": user.pk}) + "#roles"
    if not form.is_valid():
        return prg.refuse(request, key, back, fields=request.POST)
    try:
        chosen = users.user_set_roles(by=request.user, user=user, roles=form.cleaned_data["roles"])
    except KernelError as exc:
        # Post/Redirect/Get (issue 14), a permission refusal included (its words are on the user's page)
        return prg.refuse(request, key, back, fields=request.POST, refusal=_refusal(exc))
    prg.drop(request, key)
    messages.success(request, f"{user.get_username()}: roles {', '.join(chosen) or 'none'}.")
    return redirect("adminportal:user-detail", user_id=user.pk)


@GET_POST
@access.users_admin
def user_deactivate(request: HttpRequest, user_id: Any) -> HttpResponse:
    """Deactivate at once: leases released, tokens revoked, sessions refused — behind a page naming it."""
    user = _user_or_404(user_id)
    form = DeactivateForm(request.POST or None)
    context = _user_context(user, form=form)
    if request.method == "POST" and form.is_valid():
        try:
            done = users.user_deactivate(by=request.user, user=user, reason=form.cleaned_data["reason"])
        except KernelError as exc:
            context["refusal"] = _refusal(exc)
            return _render(request, "adminportal/user_deactivate.html", context, 403 if _denied(exc) else 200)
        messages.success(
            request,
            f"Deactivated {user.get_username()}: {done.leases_released} lease(s) released, "
            f"{done.tokens_revoked} token(s) revoked; their sessions no longer work.",
        )
        return redirect("adminportal:user-detail", user_id=user.pk)
    return _render(request, "adminportal/user_deactivate.html", context)


@require_POST
@access.users_admin
def user_reactivate(request: HttpRequest, user_id: Any) -> HttpResponse:
    user = _user_or_404(user_id)
    try:
        users.user_reactivate(by=request.user, user=user)
    except KernelError as exc:
        return _render(request, "adminportal/user_detail.html", _user_context(user, refusal=_refusal(exc)), 403)
    messages.success(request, f"Reactivated {user.get_username()} (issue new API tokens: revoked ones stay revoked).")
    return redirect("adminportal:user-detail", user_id=user.pk)


def _tokens_context(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    actor = request.GET.get("actor", "").strip()
    state = request.GET.get("state", "").strip()
    return {
        "tokens": actors_selectors.token_rows(actor=actor, state=state)[:500],
        "actors": actors_selectors.token_actors(),
        "filters": {"actor": actor, "state": state},
        "form": TokenCreateForm(),
        "actor_form": ActorCreateForm(),
        "created": None,
        "raw": None,
        "refusal": None,
        **extra,
    }


#: The session key of the one-time store for a token just issued (issue 14: Post/Redirect/Get).
ISSUED_TOKEN: Final = "adminportal.issued_token"  # noqa: S105 - a session key, not a secret


@require_GET
@access.users_admin
@never_cache
def tokens_page(request: HttpRequest) -> HttpResponse:
    """The tokens; right after issuing one, its plaintext once (taken from the one-time store: a reload shows it no
    more and issues nothing)."""
    issued = request.session.pop(ISSUED_TOKEN, None)
    extra: dict[str, Any] = {}
    if isinstance(issued, dict):
        token = actors_selectors.token_get(issued.get("id"))
        if token is not None:
            extra = {"created": token, "raw": str(issued.get("raw", ""))}
    state = prg.kept(request, KEPT_TOKEN)
    data = prg.kept_data(state)
    if state is not None and data is not None:  # a refused issue (Post/Redirect/Get): the form as typed
        form = TokenCreateForm(data)
        form.is_valid()
        extra.update(form=form, refusal=state.get("refusal"))
    return _render(request, "adminportal/tokens.html", _tokens_context(request, **extra))


@require_POST
@access.users_admin
@never_cache
def token_create(request: HttpRequest) -> HttpResponse:
    """Issue a token: the plaintext is in this one response and nowhere else (never stored, never shown again)."""
    form = TokenCreateForm(request.POST)
    back = reverse("adminportal:tokens") + "#issue"
    if not form.is_valid():
        return prg.refuse(request, KEPT_TOKEN, back, fields=request.POST)
    actor = actors_selectors.token_actors().filter(name=form.cleaned_data["actor"]).first()
    if actor is None:
        refusal = {"code": Reason.NOT_FOUND.value, "text": explain(Reason.NOT_FOUND), "detail": "no such actor"}
        return prg.refuse(request, KEPT_TOKEN, back, fields=request.POST, refusal=refusal)
    try:
        token, raw = users.token_create(
            by=request.user, actor=actor, boundary=form.cleaned_data["boundary"], scopes=form.cleaned_data["scopes"]
        )
    except KernelError as exc:
        if _denied(exc):
            context = _tokens_context(request, form=form, refusal=_refusal(exc))
            return _render(request, "adminportal/tokens.html", context, 403)
        return prg.refuse(request, KEPT_TOKEN, back, fields=request.POST, refusal=_refusal(exc))
    prg.drop(request, KEPT_TOKEN)
    # Post/Redirect/Get (issue 14): the plaintext waits in the session for the next GET of the tokens page, which
    # takes it out; a reload of that page issues nothing and shows no secret.
    request.session[ISSUED_TOKEN] = {"id": token.pk, "raw": raw}
    return redirect(reverse("adminportal:tokens") + "#token-created")


@GET_POST
@access.users_admin
def token_revoke(request: HttpRequest, token_id: Any) -> HttpResponse:
    """Revoke a token, behind a page naming it and its consequences (like key revocation, issue 14)."""
    token = actors_selectors.token_get(token_id)
    if token is None:
        raise Http404("no such token")
    if request.method != "POST" or request.POST.get("confirm") != "yes":
        back = request.GET.get("next") or request.POST.get("next") or reverse("adminportal:tokens")
        return _render(request, "adminportal/token_revoke.html", {"token": token, "next": back})
    if token.revoked_at is not None:
        messages.info(request, f"Token {token.prefix}… of {token.actor.name} was already revoked.")
        return redirect(request.POST.get("next", "") if _safe_next(request) else reverse("adminportal:tokens"))
    users.token_revoke_as_admin(by=request.user, token=token)
    messages.success(request, f"Revoked token {token.prefix}… of {token.actor.name}: it stops working at once.")
    return redirect(request.POST.get("next", "") if _safe_next(request) else reverse("adminportal:tokens"))


def _safe_next(request: HttpRequest) -> bool:
    from django.utils.http import url_has_allowed_host_and_scheme

    target = request.POST.get("next", "")
    return bool(target) and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()})


@require_POST
@access.users_admin
def actor_create(request: HttpRequest) -> HttpResponse:
    form = ActorCreateForm(request.POST)
    if not form.is_valid():
        return _render(request, "adminportal/tokens.html", _tokens_context(request, actor_form=form))
    try:
        actor = users.machine_actor_create(
            by=request.user, name=form.cleaned_data["name"], kind=form.cleaned_data["kind"]
        )
    except KernelError as exc:
        context = _tokens_context(request, actor_form=form, refusal=_refusal(exc))
        return _render(request, "adminportal/tokens.html", context, 403 if _denied(exc) else 200)
    messages.success(request, f"Created actor {actor.name} ({actor.kind}); issue it a token below.")
    return redirect("adminportal:tokens")


# --- the security log ------------------------------------------------------------------------------------------------


def _log_filters(request: HttpRequest) -> dict[str, str]:
    return {name: request.GET.get(name, "").strip() for name in trust_selectors.SECURITY_FILTERS}


@require_GET
@access.security_log_reader
def security_log_page(request: HttpRequest) -> HttpResponse:
    """The security log, filterable; htmx swaps the rows in place (``#security-log``)."""
    filters = _log_filters(request)
    cursor = request.GET.get("cursor", "").strip() or None
    refusal = None
    try:
        rows, next_cursor = trust_selectors.security_log_page(filters=filters, cursor=cursor, limit=_page_size())
    except KernelError as exc:
        refusal = _refusal(exc)
        filters, cursor = dict.fromkeys(trust_selectors.SECURITY_FILTERS, ""), None
        rows, next_cursor = trust_selectors.security_log_page(filters={}, cursor=None, limit=_page_size())
    query = {k: v for k, v in filters.items() if v}
    here = reverse("adminportal:security-log")
    context = {
        "rows": rows,
        "filters": filters,
        "list_refusal": refusal,
        "kinds": [(k.value, k.label) for k in SecurityEventKind],
        "csv_url": f"{reverse('adminportal:security-log-csv')}?{urlencode(query)}",
        "next_url": f"{here}?{urlencode({**query, 'cursor': next_cursor})}" if next_cursor else None,
        "first_url": f"{here}?{urlencode(query)}" if cursor else None,
    }
    if _htmx(request):
        return _render(request, "adminportal/_security_log_rows.html", context)
    return _render(request, "adminportal/security_log.html", context)


@require_GET
@access.security_log_reader
def security_log_csv(request: HttpRequest) -> HttpResponseBase:
    """The filtered log as CSV, streamed (every matching entry, newest first)."""
    try:
        rows = trust_selectors.security_log_rows(_log_filters(request))
        first = next(rows, None)
    except KernelError as exc:
        return HttpResponse(f"{exc.reason.value}: {exc.detail}\n", status=400, content_type="text/plain")
    except DatabaseError:  # pragma: no cover - surfaced as a server error by Django otherwise
        raise

    def entries() -> Iterator[list[Any]]:
        entry = first
        while entry is not None:
            yield [
                entry.pk,
                entry.created_at.isoformat(),
                entry.kind,
                entry.actor_label,
                entry.user.get_username() if entry.user else "",
                entry.target,
                entry.ip_address,
                json.dumps(entry.detail, sort_keys=True, ensure_ascii=False),
            ]
            entry = next(rows, None)

    plain, safe = csv_export.plain_cell, csv_export.safe_cell
    lines = csv_export.stream(LOG_CSV_HEADER, entries(), [plain, plain, plain, safe, safe, safe, plain, safe])

    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    response = StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="security-log-{stamp}.csv"'
    response["Cache-Control"] = "no-store"
    return response
