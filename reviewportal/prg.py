"""Post/Redirect/Get for the portal's action URLs (issue 14): an address that only takes a POST (pin a key, set
roles, issue a token, close a finding) answers a GET (a reload, the back button, a copied address bar) with a
redirect to the page the action belongs to, never the browser's blank 405.

A refused form is Post/Redirect/Get too: ``refuse`` keeps what was typed and the refusal in the session under a key
(the page's) and redirects to that page's GET URL, which shows it (``kept``) until the form succeeds or is given up
(``drop``). The review decision and the admin and finding forms all use this one store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect

#: Session keys of kept forms start with this; the rest is the page's own key (``"review:<id>"``, ``"keys"``...).
FORM_PREFIX = "prg.form:"


def post_or_page(view: Callable[..., HttpResponse], page: str, *, keep: tuple[str, ...] = ()) -> Callable[..., Any]:
    """POST runs ``view``; GET and HEAD redirect (signed in) to the url named ``page``, with the url's arguments
    named in ``keep``. The page's own access check then decides what the user sees."""

    @login_required
    def to_page(request: HttpRequest, **kwargs: Any) -> HttpResponse:
        return redirect(page, **{name: kwargs[name] for name in keep if name in kwargs})

    def dispatch(request: HttpRequest, **kwargs: Any) -> HttpResponse:
        if request.method in ("GET", "HEAD"):
            return to_page(request, **kwargs)
        return view(request, **kwargs)

    dispatch.__name__ = dispatch.__qualname__ = getattr(view, "__name__", "action")
    dispatch.__doc__ = view.__doc__
    return dispatch


def keep(request: HttpRequest, key: str, state: dict[str, Any]) -> None:
    """Keep a refused form's ``state`` (JSON-ready: the typed fields, the refusal) for the page's next GET."""
    request.session[f"{FORM_PREFIX}{key}"] = state


def kept(request: HttpRequest, key: str) -> dict[str, Any] | None:
    """The kept state: the page after the redirect shows it, and so does a reload, until ``drop``."""
    value = request.session.get(f"{FORM_PREFIX}{key}")
    return value if isinstance(value, dict) else None


def drop(request: HttpRequest, key: str) -> None:
    request.session.pop(f"{FORM_PREFIX}{key}", None)


def refuse(
    request: HttpRequest, key: str, to: str, *, fields: QueryDict | None = None, omit: tuple[str, ...] = (),
    **state: Any,
) -> HttpResponse:
    """Keep the posted ``fields`` (without ``csrfmiddlewaretoken`` and the names in ``omit``, e.g. a password) and
    ``state`` (the refusal, field problems), then redirect to ``to`` (a GET URL). The page rebinds its form from
    ``kept(...)["data"]`` so the same field errors and values show."""
    data: dict[str, list[str]] = {}
    if fields is not None:
        data = {k: fields.getlist(k) for k in fields if k != "csrfmiddlewaretoken" and k not in omit}
    keep(request, key, {"data": data, **state})
    return redirect(to)


def kept_data(state: dict[str, Any] | None) -> QueryDict | None:
    """A kept form's fields as a QueryDict, to bind the page's form again (None when nothing is kept)."""
    if state is None or not isinstance(state.get("data"), dict):
        return None
    data = QueryDict(mutable=True)
    for name, values in state["data"].items():
        if isinstance(values, list):
            data.setlist(str(name), [str(v) for v in values])
    return data
