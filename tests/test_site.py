"""The documentation site, opened in headless Chromium (issue 15, part 3).

The site is the one ``make docs`` builds (``mkdocs build --strict``); ``make test`` builds it first
and passes its folder as ``RESFLOW_SITE_DIR``.  Run alone, this module builds one (once for all
xdist workers).  It is served from a local HTTP server; every request that leaves that server is
blocked and recorded, so "no CDN" is checked, not assumed.  For each page: HTTP 200, no console
error or uncaught exception, no failed or outside request, every image decoded (non-zero natural
size), the expected number of figures and of MathML formulas (each laid out with a non-zero box),
a landmark text, no horizontal overflow of the window, and a full-page screenshot kept under ``build/site-screenshots/``.

The browser is Debian's ``chromium`` (``make test`` installs it when missing), driven by
playwright.  Without it the tests skip, unless ``RESFLOW_REQUIRE_BROWSER=1`` (as in ``.ci/run``),
where a missing browser is a failure.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "build" / "site-screenshots"


@dataclass(frozen=True)
class PageCheck:
    path: str
    landmark: str  # text the rendered page must contain
    min_images: int = 0  # figures (img elements), each must decode
    min_math: int = 0  # MathML formulas, each must be laid out


PAGES = {
    "home": PageCheck("index.html", "How residual networks use depth", min_images=1, min_math=3),
    "start": PageCheck("start.html", "The quick answer"),
    "api": PageCheck("reference/dynamics.html", "ButcherTableau", min_math=10),
    # seven demos; the seventh (the Chinchilla fit) draws only when the data is at hand
    "notebook": PageCheck("notebooks/classroom.html", "a lesson in seven pictures", min_images=6),
    "theory": PageCheck("theory.html", "Runge-Kutta order conditions", min_math=100),
    # the first screen: the headline figure; the smooth-vs-rough page: its runs drawn from their records
    "results": PageCheck("results.html", "Results of the experiments", min_images=1),
    "smooth-vs-rough": PageCheck("results/smooth-vs-rough.html", "the main job's figure", min_images=3),
}


def _missing(reason: str):
    if os.environ.get("RESFLOW_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason} (RESFLOW_REQUIRE_BROWSER=1)")
    pytest.skip(reason)


def _browser_path() -> str:
    for name in (os.environ.get("RESFLOW_CHROMIUM"), "chromium", "chromium-browser"):
        if name and (path := shutil.which(name)):
            return path
    _missing("no chromium on PATH: `make test` installs Debian's package, or set RESFLOW_CHROMIUM")


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    if given := os.environ.get("RESFLOW_SITE_DIR"):
        path = Path(given).resolve()
        assert (path / "index.html").is_file(), f"RESFLOW_SITE_DIR={given} holds no built site (run `make docs`)"
        return path
    pytest.importorskip("mkdocs", reason="the docs extras are not installed (pip install -e '.[docs]')")
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent  # one build for all xdist workers
    path = shared / "site"
    with FileLock(str(shared / "site.lock")):
        if not (path / "index.html").is_file():
            env = {**os.environ, "RESFLOW_NOTEBOOK_FAST": "1", "NO_MKDOCS_2_WARNING": "1"}
            subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(path)],
                           cwd=ROOT, env=env, check=True, capture_output=True)
    return path


@pytest.fixture(scope="module")
def server(site):
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}/"
    httpd.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def browser():
    executable = _browser_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed (pip install -e '.[docs]')")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable,
                                     args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        yield chromium
        chromium.close()


@pytest.mark.parametrize("name", list(PAGES))
def test_page_renders_with_its_figures_and_no_errors(name, browser, server):
    check = PAGES[name]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text}"))
    page.on("pageerror", lambda e: problems.append(f"uncaught: {e}"))
    page.on("requestfailed", lambda r: r.url not in outside and problems.append(f"failed: {r.url}"))

    def only_local(route):
        url = route.request.url
        if url.startswith((server, "data:", "blob:")):
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    page.route("**/*", only_local)
    response = page.goto(server + check.path, wait_until="networkidle")
    assert response is not None and response.status == 200

    images = page.eval_on_selector_all("article img", "els => els.map(e => [e.complete, e.naturalWidth, e.src.slice(0, 80)])")
    undecoded = [src for complete, width, src in images if not (complete and width > 0)]
    boxes = page.eval_on_selector_all(
        "article math", "els => els.map(e => { const r = e.getBoundingClientRect(); return r.width * r.height; })"
    )
    text = page.inner_text("article")
    page_width = page.evaluate("document.documentElement.scrollWidth")

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    page.close()

    assert outside == [], f"requests left the local server: {outside}"
    assert problems == [], problems
    assert undecoded == [], f"images that did not decode: {undecoded}"
    assert len(images) >= check.min_images, f"{len(images)} figures, expected at least {check.min_images}"
    assert len(boxes) >= check.min_math, f"{len(boxes)} formulas, expected at least {check.min_math}"
    assert all(area > 0 for area in boxes), "a formula was not laid out (zero-sized box)"
    assert check.landmark in text
    assert page_width <= 1280, f"the page is {page_width} px wide in a 1280 px window (a formula or table overflows)"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_no_rest_markup_is_left_in_the_api_reference(site):
    """Docstrings are reST; every page of the reference must show them converted (maths, roles)."""
    pages = sorted((site / "reference").glob("*.html"))
    assert len(pages) >= 10
    for page in pages:
        text = page.read_text()
        for raw in (":math:", ":class:", ":func:", ":mod:", ".. math::", "``"):
            assert raw not in text, f"{page.name}: {raw} left as written"
