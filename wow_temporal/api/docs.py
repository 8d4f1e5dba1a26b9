"""The `/docs` page: Swagger UI served by the app itself, so the docs work without internet.

FastAPI's default page loads Swagger UI from a CDN and is blank offline. Here its files come
with the `fastapi-offline` package (Swagger UI 5, which reads OpenAPI 3.1) and are served
under `ASSETS_URL`, public like the page.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_URL = "/docs"
ASSETS_URL = "/docs/assets"
"""Where Swagger UI's JavaScript, CSS and favicon are served (every path under it is public)."""


def _assets() -> Path:
    """Swagger UI's files as the installed `fastapi-offline` package holds them."""
    found = resources.files("fastapi_offline").joinpath("static")
    if not isinstance(found, Path) or not (found / "swagger-ui-bundle.js").is_file():
        raise RuntimeError(f"Swagger UI's files are not where fastapi-offline keeps them: {found}")
    return found


def install_docs(app: FastAPI) -> None:
    """Serve Swagger UI at `DOCS_URL` over the app's OpenAPI, from files served at `ASSETS_URL`."""
    app.mount(ASSETS_URL, StaticFiles(directory=_assets()), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get(DOCS_URL, include_in_schema=False)
    async def docs(request: Request) -> HTMLResponse:
        """Swagger UI, with every asset from this app (a root path, behind a proxy, is kept)."""
        root: str = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
        )
