"""``GET /ui``: the live node map, one self-contained page (``nodemap.html``).

The page draws one tile per node from ``GET /debug/nodes``, and below them the
utilisation patrol's heatmap from ``GET /debug/patrol`` (a row per node, a cell per
bucket of the chosen window, candidates in bold) with each queue's CPU- and GPU-hours
over that window from ``GET /debug/patrol/queues``, and the autoscaling hints from ``GET
/debug/hints`` (per queue the node group and nodes to add, and the deadlocked pods), all
polled; it asks for them by
relative URLs, so the map works wherever the debug listener's root is reached,
under a path prefix too. It is served like ``/debug/*``, on the debug listener only
(``server.debug_listen``, 127.0.0.1:8081 by default: reach it with ``kubectl
port-forward``, the caller's own Kubernetes credentials in front of it), and carries no
data itself. What the
page shows is kept in the URL's fragment, so a link opens the same view:
``/ui#q=a100&stale=1&throttled=1&gpu=1&by=psi_cpu&every=5&pw=1d`` (name or GPU model
substring, the three toggles, the signal tiles are coloured by — ``fullness``,
``gpu_frag_milli``, ``contiguity``, ``psi_cpu``, ``psi_memory`` — seconds between
polls, 1 to 3600, and the patrol's window, ``5m``, ``1h`` or ``1d``; what the fragment
cannot mean is the default view).

Nothing is fetched from anywhere else: CSS and JavaScript are inline, and the
Content-Security-Policy sent with the page says so to the browser — only that one
script (by its SHA-256) may run, and it may connect to this origin alone — so a node
name or a GPU model that somehow held markup could never load or run anything.
"""

from __future__ import annotations

import base64
import hashlib
import re
from importlib import resources
from typing import Final

from aiohttp import web

PATH: Final = "/ui"
PAGE: Final = "nodemap.html"


def security_policy(page: str) -> str:
    """The page's Content-Security-Policy: its inline script by hash, its own origin."""
    scripts = re.findall(r"<script>(.*?)</script>", page, flags=re.DOTALL)
    hashes = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'"
        for s in scripts
    )
    return (
        "default-src 'none'; "
        f"script-src {hashes}; "
        "style-src 'unsafe-inline'; "
        "connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


def add_routes(app: web.Application) -> None:
    """Serve the page, read once from the package: it never changes while running."""
    page = resources.files(__package__).joinpath(PAGE).read_text(encoding="utf-8")
    headers = {
        "Content-Security-Policy": security_policy(page),
        "Cache-Control": "no-cache",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }

    async def ui(request: web.Request) -> web.Response:
        return web.Response(text=page, content_type="text/html", headers=headers)

    app.router.add_get(PATH, ui)
