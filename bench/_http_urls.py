"""The portal's URLs plus ``/_bench/trivial``: a view that reads the signed-in user (as every reviewer page does, so
the session is loaded) and answers a few bytes; the baseline of ``bench_queue``'s HTTP ratios."""

from django.http import HttpRequest, HttpResponse
from django.urls import path

from reviewportal.urls import urlpatterns as portal_urlpatterns


def trivial(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok" if request.user.is_authenticated else "anonymous", content_type="text/plain")


urlpatterns = [path("_bench/trivial", trivial), *portal_urlpatterns]
