"""A Starlette endpoint answering a 20 KiB JSON list (bench/compressors.py's, which
bench/run.py writes to bench/out/site/static for scenario J), GET /json.

`app` is the endpoint alone: corral compresses its answers itself (settings.http.compression).
`gzipped` is the same endpoint behind Starlette's GZipMiddleware at level 1, as an application
compresses under a server that does not (Uvicorn)."""

from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

BODY = (
    Path(__file__).resolve().parents[1] / "out" / "site" / "static" / "list-20k.json"
).read_bytes()


async def users(request: Request) -> Response:
    return Response(BODY, media_type="application/json")


app = Starlette(routes=[Route("/json", users)])
gzipped = GZipMiddleware(app, compresslevel=1)
