"""The page at `/`: index.html, page.css, page.js and tokens.js from the package, and colours.js
made from the colour scale of `tfm attention` (matplotlib's table of 256 colours on the same
square-root scale), so that the page and the pictures agree. Loaded once, when the application
is built. The page loads nothing from elsewhere, and its headers say so: a Content-Security-Policy
that allows only this server's scripts, styles and requests, and no other site may frame it
(X-Frame-Options, `frame-ancestors`), so that it cannot be overlaid to trick a click."""

from __future__ import annotations

import json
from importlib import resources

from fastapi.responses import Response

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
}
ASSETS = {
    "index.html": "text/html",
    "page.css": "text/css",
    "page.js": "text/javascript",
    "tokens.js": "text/javascript",
}


def load_page() -> dict[str, Response]:
    """Each asset's name and its response (UTF-8, cached by the browser for a minute)."""
    folder = resources.files("tfm.serve") / "page"
    texts = {name: (folder / name).read_text(encoding="utf-8") for name in ASSETS}
    texts["colours.js"] = colour_script()
    headers = {"Cache-Control": "max-age=60", **SECURITY_HEADERS}
    return {
        name: Response(
            text.encode("utf-8"),
            media_type=ASSETS.get(name, "text/javascript") + "; charset=utf-8",
            headers=headers,
        )
        for name, text in texts.items()
    }


def colour_script() -> str:
    """`TFM_COLOURS`: the colour map's 256 colours, the scale's gamma and the masked colour."""
    import matplotlib
    from matplotlib.colors import to_hex

    from tfm.visual.attention_map import COLORMAP, GAMMA, MASKED_COLOUR

    cmap = matplotlib.colormaps[COLORMAP].resampled(256)
    table = [to_hex(cmap(i)) for i in range(256)]
    scale = {"table": table, "gamma": GAMMA, "masked": MASKED_COLOUR, "name": COLORMAP}
    return f"const TFM_COLOURS = {json.dumps(scale)};\n"
