"""The admin pages for keys and the pin log (SPEC §8): the list, pin, unpin, revoke, rotate."""

from __future__ import annotations

from typing import Any, Final

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from reviewportal import prg
from reviewportal.adminportal import access, presenters
from reviewportal.adminportal.forms import (
    PinForm,
    RevokeForm,
    RotateForm,
    UnpinForm,
)
from reviewportal.adminportal.views import GET_POST, _denied, _render
from reviewportal.viewhelpers import refusal_words as _refusal
from verification.kernel.errors import KernelError
from verification.kernel.keys import group_fingerprint
from verification.trust import selectors as trust_selectors
from verification.trust.services import keys, security_log
from verification.trust.signing import SigningKeyUnavailable


def _keys_context(**extra: Any) -> dict[str, Any]:
    return {
        "keys": presenters.portal_keys(),
        "pins": presenters.pins_in_force(),
        "pin_log": presenters.pin_log_rows(),
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
    context: dict[str, Any] = {"pin": pin, "fingerprint": group_fingerprint(pin.fingerprint), "form": form}
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
        "own": presenters.key_row(own) if own is not None else None,
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
