"""The dashboard: one static HTML page that polls the JSON API (no build step)."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, RedirectResponse

router = APIRouter(tags=["dashboard"])


@router.get("/dashboard", response_class=HTMLResponse, summary="The dashboard page")
def dashboard() -> HTMLResponse:
    page = (resources.files("regimetune.api") / "static" / "index.html").read_text()
    return HTMLResponse(page)


@router.get("/", include_in_schema=False)
def root() -> RedirectResponse:
    return RedirectResponse("/dashboard")
