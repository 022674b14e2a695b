"""Reads about actors: actors, tokens, portal users and their leases."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, Q, QuerySet

from verification.actors.models import Actor, ApiToken


def actor_get(name: str) -> Actor | None:
    return Actor.objects.filter(name=name).first()


def actor_of_user(user: Any) -> Actor | None:
    """The actor a portal user acts as, or None."""
    return Actor.objects.filter(user=user).first()


def tokens_of(actor: Actor) -> QuerySet[ApiToken]:
    """An actor's tokens, newest first (the plaintext is never stored; ``prefix`` identifies each)."""
    return ApiToken.objects.filter(actor=actor).order_by("-created_at", "-id")


def portal_users() -> QuerySet[Any]:
    """Every portal user by username, their groups (roles) prefetched."""
    return get_user_model().objects.order_by("username").prefetch_related("groups")


def actors_by_user() -> dict[Any, Actor]:
    """The actor of each portal user that has one, by user id."""
    return {a.user_id: a for a in Actor.objects.filter(user__isnull=False)}


def active_tokens_by_user() -> dict[Any, int]:
    """How many unrevoked API tokens each user's actor holds, by user id (users without one are absent)."""
    return dict(
        ApiToken.objects.filter(revoked_at__isnull=True, actor__user__isnull=False)
        .values_list("actor__user_id")
        .annotate(n=Count("id"))
    )


def user_get(user_id: Any) -> Any:
    try:
        pk = int(user_id)
    except (TypeError, ValueError):
        return None
    return get_user_model().objects.filter(pk=pk).first()


def token_rows(*, actor: str = "", state: str = "") -> QuerySet[ApiToken]:
    """API tokens newest first, with actor, boundary, scopes, who issued and who revoked each."""
    queryset = ApiToken.objects.select_related("actor", "actor__user", "created_by", "revoked_by")
    if actor:
        queryset = queryset.filter(actor__name=actor)
    if state == "active":
        queryset = queryset.filter(revoked_at__isnull=True)
    elif state == "revoked":
        queryset = queryset.filter(revoked_at__isnull=False)
    return queryset.order_by("-created_at", "-id")


def token_get(token_id: Any) -> ApiToken | None:
    try:
        pk = int(token_id)
    except (TypeError, ValueError):
        return None
    return ApiToken.objects.select_related("actor").filter(pk=pk).first()


def token_actors() -> QuerySet[Actor]:
    """The actors a token can be issued to: everyone but the portal's own service actor, whose users are active."""
    from verification.actors.services.actors import PORTAL_ACTOR_NAME

    return (
        Actor.objects.exclude(name=PORTAL_ACTOR_NAME)
        .filter(Q(user__isnull=True) | Q(user__is_active=True))
        .order_by("name")
    )
