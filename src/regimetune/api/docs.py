"""``/docs`` (Swagger UI) and ``/redoc`` served with their JavaScript and CSS from the app
itself, so the API's documentation works without internet.

FastAPI's default pages load Swagger UI and ReDoc from a CDN: offline (an air-gapped cluster,
a laptop on a plane) ``/docs`` is blank. This follows FastAPI's "self-hosting JavaScript and
CSS for docs" recipe with the assets the ``fastapi-offline`` package ships (Swagger UI 5, which
reads OpenAPI 3.1, and ReDoc; MIT), mounted under :data:`ASSETS_URL`.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/static/docs"
_ASSETS_PACKAGE = ("fastapi_offline", "static")


def install_offline_docs(app: FastAPI, *, docs_url: str = "/docs", redoc_url: str = "/redoc") -> None:
    """Add the documentation pages and their assets to ``app`` (built with ``docs_url=None``
    and ``redoc_url=None``, so FastAPI adds no CDN pages of its own)."""
    app.mount(ASSETS_URL, StaticFiles(packages=[_ASSETS_PACKAGE]), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"
    redirect_url = f"{docs_url}/oauth2-redirect"
    favicon = f"{ASSETS_URL}/favicon.png"

    @app.get(docs_url, include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=redirect_url,
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=favicon,
        )

    @app.get(redirect_url, include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(redoc_url, include_in_schema=False)
    def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=favicon,
            with_google_fonts=False,
        )


__all__ = ["ASSETS_URL", "install_offline_docs"]
