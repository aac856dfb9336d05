"""The page as a site: its HTML (page.html, filled by layout.py), its data (each tab's model, description.py; the
Inside tab's position grids) and where its files are: the page's modules and styles, the runtime, the photo examples,
each model's graphs (its weights folder) and the Inside tab's pictures (written once, inside.py). The static Space
copies them into one folder (vit_demo/deploy/static_space.py); the app serves them where they are
(vit_demo/app/demo.py).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

from vit_demo.app.service import model_problem, weights_folder
from vit_demo.page.description import description
from vit_demo.page.inside import write_insides
from vit_demo.page.layout import EXAMPLES, INSIDE, INSIDE_MODELS, page_html, tabs

ASSETS = Path(__file__).resolve().parent / "assets"
STYLES = ("app.css", "canvas.css", "heads_view.css", "page/static.css")  # in ASSETS, in this order
HOST = "page/host.js"  # the page's script: start(root, data, server)


def models_folder(model: str) -> str:
    return f"models/{model}/"


def site_roots(generated: Path) -> dict[str, Path]:
    """The site's folders (a path prefix inside the site; "" the root) -> where their files are."""
    return {"page/": ASSETS / "page", "vendor/": ASSETS / "vendor", "examples/": EXAMPLES,
            f"{INSIDE}/": generated / INSIDE,
            **{models_folder(tab.model): weights_folder(tab.model) for tab in tabs()}, "": ASSETS}


def locate(roots: dict[str, Path], path: str) -> Path:
    """Where the site's file (or folder, ending in "/") ``path`` is."""
    prefix = max((p for p in roots if path.startswith(p)), key=len)
    return roots[prefix] / path[len(prefix):]


@dataclasses.dataclass(frozen=True)
class Site:
    html: str  # the page: <main id="vd-app">...</main>
    data: dict  # the page's data, for host.js: {"models": {tab: description}, "inside": {model: position grid}}
    roots: dict[str, Path]  # site_roots

    def data_json(self) -> str:
        return json.dumps(self.data).replace("</", "<\\/")  # no "</script>" inside the data

    def script(self, host: str, server: str = "null", data: str | None = None) -> str:
        """The JS that starts the page (``host``: where host.js is; ``server``: the expression of the server's
        functions, or null; ``data``: the expression of the page's data, by default the data itself): for a
        ``<script type="module">`` or a ``gr.HTML``'s js_on_load."""
        return (f"import(new URL({json.dumps(host)}, document.baseURI).href).then(({{ start }}) => "
                f"start(document.getElementById('vd-app'), {data or self.data_json()}, {server}));")


def build_site(generated: Path, serve: Callable[[Path], str] | None = None) -> Site:
    """The site, its Inside pictures written under ``generated``; ``serve``: where the browser finds a file or
    folder of the disk (None: the site's own paths, for a copy of the site)."""
    roots = site_roots(generated)

    def address(path: str) -> str:
        if serve is None:
            return path
        return serve(locate(roots, path)) + ("/" if path.endswith("/") else "")

    insides = {model: write_insides(model, generated / INSIDE / model) for model in INSIDE_MODELS.values()
               if not model_problem(model)}
    models = {tab.prefix: description(tab.model, tab.prompt, tab.blank, address(models_folder(tab.model)),
                                      tab.first())
              for tab in tabs() if not model_problem(tab.model)}
    return Site(page_html(insides, address), {"models": models, "inside": {m: d for m, (_, d) in insides.items()}},
                roots)
