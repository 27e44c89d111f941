"""A Django project in one module, served through Django's ASGI handler, for
tests/integration/test_frameworks_asgi.py."""

from __future__ import annotations

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    SECRET_KEY="tests-only",
    MIDDLEWARE=["django.middleware.common.CommonMiddleware"],
    USE_TZ=True,
)
django.setup()

from django.core.asgi import get_asgi_application  # noqa: E402 (after settings)
from django.http import HttpResponse, JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402


def hello(request):
    return HttpResponse(f"hello {request.GET.get('name', 'django')}", content_type="text/plain")


def echo(request):
    return JsonResponse({"method": request.method, "length": len(request.body)})


async def async_view(request, name):
    return JsonResponse({"async": True, "path": request.path, "name": name})


urlpatterns = [path("", hello), path("echo", echo), path("async/<str:name>", async_view)]

application = get_asgi_application()
