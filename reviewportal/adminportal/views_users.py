"""The admin pages for people and machines: portal users and their roles, API tokens, actors."""

from __future__ import annotations

from typing import Any, Final

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from reviewportal import prg
from reviewportal.adminportal import access, presenters
from reviewportal.adminportal.forms import (
    ActorCreateForm,
    DeactivateForm,
    RolesForm,
    TokenCreateForm,
    UserCreateForm,
)
from reviewportal.adminportal.views import GET_POST, _denied, _render
from reviewportal.viewhelpers import refusal_words as _refusal
from verification.actors import selectors as actors_selectors
from verification.actors.services import users
from verification.kernel.errors import KernelError
from verification.kernel.reasons import Reason, explain
from verification.reviews import selectors as reviews_selectors
from verification.trust import selectors as trust_selectors

KEPT_TOKEN: Final = "admin.token"  # noqa: S105 - a session key, not a secret


def _kept_roles(user_id: Any) -> str:
    return f"admin.roles:{user_id}"


def _user_or_404(user_id: Any) -> Any:
    user = actors_selectors.user_get(user_id)
    if user is None:
        raise Http404("no such user")
    return user


@require_GET
@access.users_admin
def users_page(request: HttpRequest) -> HttpResponse:
    return _render(request, "adminportal/users.html", {"rows": presenters.user_rows()})


@GET_POST
@access.users_admin
def user_create(request: HttpRequest) -> HttpResponse:
    form = UserCreateForm(request.POST or None)
    context: dict[str, Any] = {"form": form}
    if request.method == "POST" and form.is_valid() and not _user_problems(form):
        data = form.cleaned_data
        try:
            user = users.user_create(
                by=request.user,
                username=data["username"],
                password=data["password"],
                roles=data["roles"],
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
    actor = actors_selectors.actor_of_user(user)
    return {
        "subject": user,
        "roles": users.roles_of(user),
        "roles_form": RolesForm(initial={"roles": users.roles_of(user)}),
        "actor": actor,
        "tokens": actors_selectors.token_rows(actor=actor.name) if actor is not None else [],
        "leases": reviews_selectors.leases_held(user),
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
