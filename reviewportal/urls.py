from django.contrib.auth import views as auth_views
from django.urls import include, path

from reviewportal import metrics, views
from verification.api import urls as api_urls

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("metrics", metrics.metrics_view, name="metrics"),  # Prometheus: a token or a network only (metrics.py)
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(template_name="login.html", redirect_authenticated_user=True),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),  # POST only (Django 5)
    # the reviewer queue, review pages and the CSP report endpoint (reviewportal/portal/urls.py)
    path("", include("reviewportal.portal.urls")),
    # the admin pages under /admin/ and the public key page /keys/ (reviewportal/adminportal/urls.py)
    path("", include("reviewportal.adminportal.urls")),
    # verdict history, subject timelines, findings, dashboards and exports (reviewportal/history/urls.py)
    path("", include("reviewportal.history.urls")),
    # the well-known key endpoints and /v1/verifications/<id>/proof[/envelope] (verification/urls.py)
    path("", include("verification.urls")),
    # the JSON API under /v1/, its schema at /api/schema/ and docs at /api/docs/ (verification/api/urls.py)
    path("", include("verification.api.urls")),
    # anything else under /v1/: the API's JSON 404
    *api_urls.fallback_patterns,
]

# The portal's own error pages (issue 14: navigation, the user's roles, what the page needed): reviewportal/errors.py
handler400 = "reviewportal.errors.bad_request"
handler403 = "reviewportal.errors.permission_denied"
handler404 = "reviewportal.errors.page_not_found"
handler500 = "reviewportal.errors.server_error"
