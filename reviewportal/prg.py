"""Post/Redirect/Get for the portal's action URLs (issue 14): an address that only takes a POST (pin a key, set
roles, issue a token, close a finding) answers a GET (a reload, the back button, a copied address bar) with a
redirect to the page the action belongs to, never the browser's blank 405.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect


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
