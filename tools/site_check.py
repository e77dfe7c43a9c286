"""Check the built site the way a reader sees it: every page loaded in headless Chromium, offline.

Fails when a page shows raw LaTeX, an image does not load, an internal link points nowhere, a page
holding widgets renders none, a chapter lacks its Colab launch link (or it points at the wrong file) or
shows the Colab setup cell, the browser console shows an error outside the allow-list below, or the
site's search cannot find a chapter by a word in its text. Saves screenshots of the welcome page and two chapters.

Usage: ``python -m tools.site_check [--html _build/html] [--out _build/site-check]``.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

from bs4 import BeautifulSoup

from tools.notebooks import ROOT, chapter_notebooks, colab_url

# Console messages that are not errors of the site. Each entry says why it is allowed.
CONSOLE_ALLOW = [
    # Jupyter Book 1 writes sphinx-thebe's inline settings script into every page twice; the second copy
    # fails to redeclare a constant the first one already set. Harmless: the value is the same.
    re.compile(r"Identifier 'THEBE_JS_URL' has already been declared"),
    # Raised inside the vendored widget manager (html-manager 1.0.6) after the widgets have rendered;
    # the widget check below verifies that every page with widget state shows its widgets.
    re.compile(r"Cannot read properties of undefined \(reading 'Queue'\)"),
]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]
SEARCH_WORD, SEARCH_PAGE = "underflow", "notebooks/02_softmax.html"
SKIP = ("genindex.html", "search.html", "_static/", "_sources/", "_images/", "_sphinx_design_static/")


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    sys.exit("site check: no Chromium found. On Debian: apt-get install chromium")


def serve(root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:  # one line per request would drown the report
            pass

    handler = functools.partial(Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def load(browser: str, url: str, profile: Path, extra: list[str] | None = None) -> tuple[str, str]:
    """Run a page's scripts for up to 20 s of virtual time; return the final DOM and the console log."""
    args = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
            "--virtual-time-budget=20000", *(extra or ["--dump-dom"]), url]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    return done.stdout, done.stderr


def console_errors(log: str) -> list[str]:
    errors = []
    for line in log.splitlines():
        if "CONSOLE" in line and re.search(r"Uncaught|Error|Failed to load|net::ERR", line):
            if not any(p.search(line) for p in CONSOLE_ALLOW):
                errors.append(line.strip()[:300])
    return errors


def raw_latex(soup: BeautifulSoup) -> list[str]:
    found = []
    for text in soup.find_all(string=True):
        if text.find_parent(["script", "style", "pre", "code", "textarea", "mjx-container", "mjx-assistive-mml"]):
            continue
        if re.search(r"\\\(|\\\[|\$\$|\\frac|\\sum|\\mathbb", text):
            found.append(text.strip()[:80])
    return found


@functools.cache
def ids_of(path: Path) -> frozenset[str]:
    soup = BeautifulSoup(path.read_text(errors="replace"), "html.parser")
    return frozenset(t["id"] for t in soup.find_all(id=True))


def broken_links(soup: BeautifulSoup, page: Path, html: Path) -> list[str]:
    bad = []
    for a in soup.find_all("a", href=True):
        href = a["href"]
        if urlparse(href).scheme or href.startswith(("mailto:", "javascript:")):
            continue
        target, fragment = urldefrag(href)
        path = page if not target else (page.parent / unquote(target)).resolve()
        if path.is_dir():
            path = path / "index.html"
        if not path.exists() or html not in path.parents and path != html:
            bad.append(href)
        elif fragment and path.suffix == ".html" and fragment not in ids_of(path):
            bad.append(href)
    return bad


def broken_images(soup: BeautifulSoup, page: Path) -> list[str]:
    bad = []
    for img in soup.find_all("img"):
        src = img.get("src", "")
        if src.startswith("data:"):
            continue
        if urlparse(src).scheme:
            bad.append(f"{src} (from another server: it does not load offline)")
            continue
        path = (page.parent / unquote(src)).resolve()
        if not path.exists() or path.stat().st_size == 0:
            bad.append(src)
    return bad


def check_page(browser: str, base: str, html: Path, page: Path, profile: Path) -> list[str]:
    rel = page.relative_to(html).as_posix()
    source = BeautifulSoup(page.read_text(errors="replace"), "html.parser")
    refresh = source.find("meta", attrs={"http-equiv": "Refresh"})
    if refresh is not None:  # a redirect page: its target must exist, and is checked on its own
        target = refresh["content"].split("url=", 1)[-1]
        return [] if (page.parent / target).exists() else [f"redirect points nowhere: {target}"]
    dom, log = load(browser, base + rel, profile)
    soup = BeautifulSoup(dom, "html.parser")
    problems = [f"raw LaTeX: {t!r}" for t in raw_latex(soup)]
    problems += [f"image does not load: {s}" for s in broken_images(soup, page)]
    problems += [f"link points nowhere: {h}" for h in broken_links(soup, page, html)]
    problems += [f"console: {e}" for e in console_errors(log)]
    source_html = page.read_text(errors="replace")
    if "application/vnd.jupyter.widget-state+json" in source_html and not soup.select("[class*=widget-]"):
        problems.append("the page holds widget state but renders no widget")
    chapter = re.fullmatch(r"notebooks/(\d\d_[a-z0-9_]+)\.html", rel)
    if chapter:
        expected = colab_url(ROOT / "notebooks" / f"{chapter.group(1)}.ipynb")
        if not any(a["href"] == expected for a in soup.find_all("a", href=True)):
            problems.append(f"no Colab launch link to {expected}")
        if "google.colab" in soup.get_text():  # the setup cell is tagged remove-cell: only Colab needs it
            problems.append("the Colab setup cell shows on the page")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--html", default=str(ROOT / "_build" / "html"))
    parser.add_argument("--out", default=str(ROOT / "_build" / "site-check"))
    args = parser.parse_args()
    html, out = Path(args.html).resolve(), Path(args.out)
    if not (html / "index.html").exists():
        sys.exit(f"site check: no built site in {html}; run `make book` first")
    out.mkdir(parents=True, exist_ok=True)
    browser = chromium()
    profile = out / "profile"
    server, base = serve(html)
    pages = sorted(p for p in html.rglob("*.html") if not any(s in p.relative_to(html).as_posix() for s in SKIP))
    failures = 0
    try:
        expected_chapters = {f"notebooks/{p.stem}.html" for p in chapter_notebooks()}
        missing = expected_chapters - {p.relative_to(html).as_posix() for p in pages}
        for m in sorted(missing):
            print(f"FAIL {m}: chapter page missing from the site")
            failures += 1
        for page in pages:
            problems = check_page(browser, base, html, page, profile)
            failures += bool(problems)
            print(("FAIL " if problems else "ok   ") + page.relative_to(html).as_posix())
            for p in problems:
                print("     - " + p)
        dom, _ = load(browser, f"{base}search.html?q={SEARCH_WORD}", profile)
        found = [a["href"] for a in BeautifulSoup(dom, "html.parser").select("ul.search a[href]")]
        if any(SEARCH_PAGE in h for h in found):
            print(f"ok   search for {SEARCH_WORD!r} finds {SEARCH_PAGE}")
        else:
            print(f"FAIL search for {SEARCH_WORD!r} did not find {SEARCH_PAGE} (found {found[:5]})")
            failures += 1
        chapters = sorted(expected_chapters)
        shots = [("book/intro.html", "welcome"), (chapters[0], "chapter-first"), (chapters[-1], "chapter-last")]
        for rel, name in shots:
            shot = out / f"{name}.png"
            # A fresh profile: the search above leaves highlighting state that would show in the picture.
            load(browser, base + rel, out / f"profile-{name}", ["--window-size=1280,2000", f"--screenshot={shot}"])
            print(f"screenshot {shot.relative_to(ROOT) if shot.is_relative_to(ROOT) else shot} ({rel})")
    finally:
        server.shutdown()
    print(f"site check: {len(pages) - failures if failures <= len(pages) else 0} pages passed, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
