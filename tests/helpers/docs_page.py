"""The check the control API and the domain host share: `/docs` needs no internet, every asset
of its Swagger UI is served by the app itself."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

import httpx

_ASSET_TYPES = {
    ".js": ("text/javascript", "application/javascript"),
    ".css": ("text/css",),
    ".png": ("image/png",),
}


async def assert_docs_served_offline(http: httpx.AsyncClient) -> None:
    """`/docs` loads nothing from outside; its CSS, script and icon are the app's, public."""
    page = await http.get("/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    html = page.text
    assert not re.findall(r"https?://\S*", html), "the page loads something from outside"
    assets = re.findall(r'(?:href|src)="([^"]*)"', html)
    assert sorted(PurePosixPath(asset).suffix for asset in assets) == [".css", ".js", ".png"]
    assert re.findall(r"url: '([^']*)'", html) == ["/openapi.json"]
    for asset in assets:  # public, like the page: no token
        assert asset.startswith("/"), asset
        response = await http.get(asset)
        assert response.status_code == 200, asset
        kind = response.headers["content-type"].split(";")[0]
        assert kind in _ASSET_TYPES[PurePosixPath(asset).suffix], (asset, kind)
        assert len(response.content) > 1000, asset
    (script,) = [asset for asset in assets if asset.endswith(".js")]
    assert "SwaggerUIBundle" in (await http.get(script)).text
