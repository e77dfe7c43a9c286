"""Check the built site the way a reader sees it: every page loaded in headless Chromium, offline.

Playwright drives the system's Chromium. Fails when a page shows raw LaTeX, an image does not load or has no
alt text (or a file name for one), an internal link points nowhere, a page holding widgets renders none, a
chapter lacks its Colab launch link (or it points at the wrong file) or shows the Colab setup cell, a chapter's
code cell imports a name from attnbook that has an entry in the API reference without linking to it, a page's
code shows a solution marker line (``### BEGIN SOLUTION``, ``### HINT:``, ``### END SOLUTION``), an API
reference page is missing, documents nothing or has an entry without its source link, the page
raises an error (a console error, an uncaught exception or a failed request) outside the allow-list below,
axe-core finds a critical or serious accessibility violation in the light or the dark theme, the keyboard
alone (Tab) cannot reach the page's search, navigation or widget controls, the search opened and typed into
with the keyboard cannot find a chapter by a word in its text, or a slider does not move with the arrow keys.
Saves screenshots of the welcome page and two chapters in both themes, and one figure as a screen reader
reads it (``figure.png`` beside ``figure-screen-reader.txt``).

Usage: ``python -m tools.site_check [--html _build/html] [--out _build/site-check] [--pages PAGE ...]``.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import posixpath
import re
import shutil
import sys
import threading
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

from bs4 import BeautifulSoup

from tools.notebooks import ROOT, chapter_notebooks, colab_url
from tools.sphinx_solutions import MARKER_LINE

# Console messages that are not errors of the site. Each entry says why it is allowed.
CONSOLE_ALLOW = [
    # Jupyter Book 1 writes sphinx-thebe's inline settings script into every page twice; the second copy
    # fails to redeclare a constant the first one already set. Harmless: the value is the same.
    re.compile(r"Identifier 'THEBE_JS_URL' has already been declared"),
    # Raised inside the vendored widget manager (html-manager 1.0.6) after the widgets have rendered;
    # the widget check below verifies that every page with widget state shows its widgets.
    re.compile(r"Cannot read properties of undefined \(reading 'Queue'\)"),
    # Chromium asks every site for /favicon.ico, and the book has no icon: a request the page never made.
    re.compile(r"status of 404 .*/favicon\.ico\)$"),
]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]
SEARCH_WORD, SEARCH_PAGE = "underflow", "notebooks/02_softmax.html"
SKIP = ("genindex.html", "search.html", "_static/", "_sources/", "_images/", "_sphinx_design_static/", "_modules/")
# The highlighted source pages (_modules/, one a module of the package, over a hundred) share one template: each
# is checked for its links without a browser, and this one as a reader sees it, like every other page.
SOURCE_PAGE = "_modules/attnbook/torch/blocks.html"


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


def console_errors(messages: list[str]) -> list[str]:
    """The page's own errors (console errors, uncaught exceptions, failed requests) less the allow-list."""
    return [m.strip()[:300] for m in messages if not any(p.search(m) for p in CONSOLE_ALLOW)]


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


# How long a page may take to settle: MathJax typeset, the widgets drawn.
SETTLE_MS = 20_000
# The most Tab presses spent walking a page's focus order before it counts as stuck.
MAX_TABS = 1500
# axe-core's impacts that fail the check; moderate and minor ones are reported, not failed.
FAILING_IMPACTS = ("critical", "serious")
# axe-core's rules that depend on the colours alone: the dark theme changes nothing else, so the dark pass runs these.
DARK_RULES = ["color-contrast", "link-in-text-block"]
# What the keyboard must reach on every page: the search, the site's navigation and every widget control.
KEYBOARD_TARGETS = {
    "search": ".search-button-field, .search-button",
    "navigation": ".bd-sidebar-primary nav.bd-docs-nav a, .prev-next-area a",
    "widget control": '.jupyter-widgets [role="slider"], .jupyter-widgets select, .jupyter-widgets button, '
                      '.jupyter-widgets input',
}

SETTLE_JS = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
}"""
WIDGETS_DRAWN_JS = """() => {
  const views = document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]');
  return views.length === 0 || document.querySelectorAll('.widget-subarea > *').length >= views.length;
}"""
AXE_JS = """async (rules) => {
  const options = rules ? {resultTypes: ['violations'], runOnly: {type: 'rule', values: rules}}
                        : {resultTypes: ['violations']};
  const result = await axe.run(document, options);
  const colour = n => [...n.any, ...n.all, ...n.none].map(c => c.data && c.data.fgColor).find(Boolean) || null;
  return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                      nodes: v.nodes.map(n => n.target.join(' ')),
                                      colours: v.nodes.map(colour)}));
}"""
# Marks every element that takes the focus, so that Tab presses can be counted against what must be reached.
TRACK_FOCUS_JS = """() => {
  window.__wrapped = false;
  document.addEventListener('focusin', e => {
    if (e.target.hasAttribute('data-kb-reached')) window.__wrapped = true;
    e.target.setAttribute('data-kb-reached', '');
  });
}"""
UNREACHED_JS = """(targets) => {
  const visible = el => !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length)
                        && getComputedStyle(el).visibility !== 'hidden';
  const out = {};
  for (const [name, selector] of Object.entries(targets)) {
    const missed = [...document.querySelectorAll(selector)].filter(el => visible(el) && !el.disabled
        && !el.closest('[data-kb-reached]') && !el.hasAttribute('data-kb-reached')
        && !el.querySelector('[data-kb-reached]'));
    if (missed.length) out[name] = missed.slice(0, 3).map(el => el.outerHTML.slice(0, 120));
  }
  return out;
}"""


def audit(page, axe: str, mode: str) -> tuple[list[str], list[str]]:
    """axe-core on the page as it stands; return (failures, moderate or minor findings), one line each."""
    if not page.evaluate("() => !!window.axe"):
        page.add_script_tag(content=axe)
    failures, notes = [], []
    for v in page.evaluate(AXE_JS, None if mode == "light" else DARK_RULES):
        nodes, colours = v["nodes"], v["colours"]
        line = (f"axe {mode} {v['impact']} {v['id']} ({v['help']}): {len(nodes)} nodes, e.g. {nodes[0]}"
                + (f" in {colours[0]}" if colours[0] else ""))
        (failures if v["impact"] in FAILING_IMPACTS else notes).append(line)
    return failures, notes


def keyboard(page) -> list[str]:
    """Walk the page's whole focus order with Tab alone, round to the start; return what it never reached.
    The key presses go through the DevTools protocol: a real Tab, at a fraction of Playwright's cost per key."""
    page.evaluate(TRACK_FOCUS_JS)
    page.locator("body").focus()
    cdp = page.context.new_cdp_session(page)
    tab = {"key": "Tab", "code": "Tab", "windowsVirtualKeyCode": 9}
    for _ in range(0, MAX_TABS, 20):
        for _key in range(20):
            cdp.send("Input.dispatchKeyEvent", {"type": "rawKeyDown", **tab})
            cdp.send("Input.dispatchKeyEvent", {"type": "keyUp", **tab})
        if page.evaluate("() => window.__wrapped"):
            break
    else:
        return [f"keyboard: {MAX_TABS} Tab presses never came back round to the page's start (a keyboard trap?)"]
    cdp.detach()
    return [f"keyboard: Tab never reaches {name} {els}" for name, els in page.evaluate(UNREACHED_JS,
                                                                                      KEYBOARD_TARGETS).items()]


def open_page(context, url: str, messages: list[str]):
    page = context.new_page()
    page.on("console", lambda m: m.type == "error"
            and messages.append(f"console error: {m.text} ({m.location.get('url')})"))
    page.on("pageerror", lambda e: messages.append(f"uncaught: {e}"))
    page.on("requestfailed", lambda r: messages.append(f"failed to load {r.url}: {r.failure}"))
    page.on("response", lambda r: r.status >= 400 and messages.append(f"HTTP {r.status} for {r.url}"))
    page.goto(url, wait_until="load")
    page.evaluate(SETTLE_JS)
    try:
        page.wait_for_function(WIDGETS_DRAWN_JS, timeout=SETTLE_MS)
    except Exception:
        pass  # checked below: a page with widget state that draws none fails
    page.wait_for_timeout(100)  # the widget script's last pass (one animation frame)
    return page


# The rendered page's own checks, run in the page: text that still reads as LaTeX (MathJax left it), images and
# their alt texts (the widgets' images get theirs only in the browser), and whether any widget was drawn.
RENDERED_JS = r"""() => {
  const skip = 'script, style, pre, code, textarea, mjx-container, mjx-assistive-mml';
  const latex = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (n.parentElement.closest(skip)) continue;
    if (/\\\(|\\\[|\$\$|\\frac|\\sum|\\mathbb/.test(n.textContent)) latex.push(n.textContent.trim().slice(0, 80));
  }
  const images = [...document.images].map(img => [img.getAttribute('src') || '', img.getAttribute('alt')]);
  return {latex, images, widgets: document.querySelectorAll('[class*=widget-]').length};
}"""
NO_TRANSITIONS = "*, *::before, *::after { transition: none !important; }"


def set_theme(page, mode: str) -> None:
    """The theme's light/dark switch, as its own button leaves it (no transitions, so colours settle at once)."""
    page.add_style_tag(content=NO_TRANSITIONS)
    page.evaluate("""mode => { localStorage.setItem('mode', mode); localStorage.setItem('theme', mode);
        document.documentElement.dataset.mode = mode; document.documentElement.dataset.theme = mode; }""", mode)


def check_page(context, base: str, html: Path, page_path: Path, axe: str, summary: dict) -> list[str]:
    rel = page_path.relative_to(html).as_posix()
    source = BeautifulSoup(page_path.read_text(errors="replace"), "html.parser")
    refresh = source.find("meta", attrs={"http-equiv": "Refresh"})
    if refresh is not None:  # a redirect page: its target must exist, and is checked on its own
        target = refresh["content"].split("url=", 1)[-1]
        return [] if (page_path.parent / target).exists() else [f"redirect points nowhere: {target}"]
    messages = []
    page = open_page(context, base + rel, messages)
    problems = check_content(page, source, page_path, html, rel)
    for mode in ("light", "dark"):  # the page opens light; then the theme's switch turns it dark
        if mode == "dark":
            set_theme(page, mode)
        background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
        if page.evaluate("() => document.documentElement.dataset.theme") != mode or \
                (sum(map(int, re.findall(r"\d+", background)[:3])) < 384) != (mode == "dark"):
            problems.append(f"the page is not in the {mode} theme (background {background})")
        failures, notes = audit(page, axe, mode)
        problems += failures
        summary.setdefault("notes", []).extend(f"{rel}: {n}" for n in notes)
    set_theme(page, "light")
    problems += keyboard(page)
    page.close()
    problems += [f"console: {e}" for e in console_errors(messages)]
    return problems


def solution_markers(source: BeautifulSoup) -> list[str]:
    """The lines of the page's code that are tools/student.py's markers (### BEGIN SOLUTION and the like)."""
    return [line.strip() for pre in source.find_all("pre") for line in pre.get_text().split("\n")
            if MARKER_LINE.match(line)]


# An import of attnbook's names in a code cell: from attnbook.torch import EncoderBlock, GPT, on one line or
# over several in parentheses (whose lines may end in comments).
IMPORT_LINE = re.compile(r"^from (attnbook(?:\.\w+)*) import (?:\(([^)]*)\)|([\w, ]+)$)", re.MULTILINE)


def unlinked_names(source: BeautifulSoup, entries: frozenset[str]) -> list[str]:
    """The names that the page's code cells import from attnbook and that have an entry in the API reference
    (``entries``, by full name), but are not linked to it where they are imported."""
    missing = []
    for cell in source.select("div.cell_input pre"):
        linked = {a.get_text() for a in cell.select("a.sphinx-codeautolink-a")}
        for module, in_parentheses, on_one_line in IMPORT_LINE.findall(cell.get_text()):
            names = re.sub(r"#.*", "", in_parentheses or on_one_line).replace("\n", " ").split(",")
            missing += [f"{module}.{n}" for n in map(str.strip, names)
                        if n and f"{module}.{n}" in entries and n not in linked]
    return missing


@functools.cache
def api_entries(html: Path) -> frozenset[str]:
    """The full names of the API reference's entries (book/api/), from the site's inventory: each by the name
    its package exports it under and by its module's name for it."""
    from sphinx.util.inventory import InventoryFile

    with open(html / "objects.inv", "rb") as f:
        inventory = InventoryFile.load(f, "", posixpath.join)
    return frozenset(name for kind, objects in inventory.items() if kind.startswith("py:")
                     for name, (*_, uri, _display) in objects.items() if uri.startswith("book/api/"))


def check_api_page(source: BeautifulSoup, rel: str) -> list[str]:
    """An API page documents something, and each of its classes and functions links to its source."""
    if rel.endswith("/index.html"):
        return []
    entries = source.select("dl.py.class > dt[id], dl.py.function > dt[id]")
    problems = [] if entries else ["the API page documents no class or function"]
    # An exercise's checker is an object (its source is its exercise's module); every other entry has [source].
    return problems + [f"no link to the source of {dt['id']}" for dt in entries
                       if not dt.select_one("a .viewcode-link") and ".check_" not in dt["id"]]


def check_content(page, source: BeautifulSoup, page_path: Path, html: Path, rel: str) -> list[str]:
    rendered = page.evaluate(RENDERED_JS)
    problems = [f"raw LaTeX: {t!r}" for t in rendered["latex"]]
    problems += [f"a solution marker shows in the code: {m!r}" for m in solution_markers(source)]
    problems += [f"image does not load: {s}" for s in broken_images(source, page_path)]
    problems += [f"link points nowhere: {h}" for h in broken_links(source, page_path, html)]
    for src, alt in rendered["images"]:
        if alt is None:
            problems.append(f"image without alt text: {src[:60]}")
        elif re.search(r"\.(png|jpe?g|svg|gif)$|^\.\./_images/|^[0-9a-f]{16,}", alt.strip()):
            problems.append(f"image whose alt text is a file name: {alt!r}")
    if "application/vnd.jupyter.widget-state+json" in str(source) and not rendered["widgets"]:
        problems.append("the page holds widget state but renders no widget")
    chapter = re.fullmatch(r"notebooks/(\d\d_[a-z0-9_]+)\.html", rel)
    if chapter:
        expected = colab_url(ROOT / "notebooks" / f"{chapter.group(1)}.ipynb")
        if not any(a["href"] == expected for a in source.find_all("a", href=True)):
            problems.append(f"no Colab launch link to {expected}")
        if "google.colab" in source.get_text():  # the setup cell is tagged remove-cell: only Colab needs it
            problems.append("the Colab setup cell shows on the page")
        problems += [f"imported in a code cell but not linked to its API entry: {n}"
                     for n in unlinked_names(source, api_entries(html))]
    if rel.startswith("book/api/"):
        problems += check_api_page(source, rel)
    return problems


def search_by_keyboard(context, base: str) -> list[str]:
    """From the welcome page, with the keyboard alone: open the search, type a word, read the results."""
    page = open_page(context, base + "book/intro.html", [])
    page.evaluate(TRACK_FOCUS_JS)
    page.locator("body").focus()
    for _ in range(60):
        page.keyboard.press("Tab")
        if page.evaluate("() => !!document.activeElement.closest('.search-button-field, .search-button')"):
            break
    else:
        return ["keyboard: Tab never reaches the search button on the welcome page"]
    page.keyboard.press("Enter")
    try:
        page.wait_for_function("() => document.activeElement && document.activeElement.matches('input[name=q]')",
                               timeout=5000)
    except Exception:
        return ["keyboard: Enter on the search button does not put the focus in a search field"]
    page.keyboard.type(SEARCH_WORD)
    page.keyboard.press("Enter")
    page.wait_for_url("**/search.html*", timeout=10_000)
    try:
        page.wait_for_selector(f"ul.search a[href*='{SEARCH_PAGE}']", timeout=SETTLE_MS)
    except Exception:
        found = page.eval_on_selector_all("ul.search a[href]", "as => as.map(a => a.getAttribute('href'))")
        return [f"search for {SEARCH_WORD!r} did not find {SEARCH_PAGE} (found {found[:5]})"]
    finally:
        page.close()
    return []


def slider_by_keyboard(context, base: str, rel: str) -> list[str]:
    """A widget's slider moved with the arrow keys, and announced by its description."""
    page = open_page(context, base + rel, [])
    handle = page.locator('.jupyter-widgets [role="slider"]').first
    if not handle.count():
        page.close()
        return [f"{rel}: no slider to move"]
    name = page.evaluate("""() => { const h = document.querySelector('.jupyter-widgets [role="slider"]');
        const ids = (h.getAttribute('aria-labelledby') || '').split(' ').filter(Boolean);
        return h.getAttribute('aria-label') || ids.map(i => document.getElementById(i).textContent).join(' '); }""")
    before = handle.get_attribute("aria-valuenow")
    handle.focus()
    page.keyboard.press("ArrowRight")
    after = handle.get_attribute("aria-valuenow")
    page.close()
    problems = [] if name.strip() else [f"{rel}: the first slider has no accessible name"]
    if after == before:
        problems.append(f"{rel}: ArrowRight on the slider '{name}' left its value at {before}")
    return problems


def screen_reader_view(context, base: str, rel: str, out: Path) -> Path:
    """A figure of ``rel`` as a sighted reader sees it (a screenshot) and as a screen reader reads it (the
    accessibility tree of the same output: the image is read out by its alt text), and the same for its first
    widget (its sliders by their descriptions, its figure by the cell's alt text)."""
    page = open_page(context, base + rel, [])
    text = out / "figure-screen-reader.txt"
    lines = []
    for what, locator, shot in [
            ("the first figure", page.locator(".cell_output img").first.locator(
                "xpath=ancestor::div[contains(@class, 'cell_output')][1]"), "figure.png"),
            ("the first widget", page.locator(".widget-subarea").first, "widget.png")]:
        locator.scroll_into_view_if_needed()
        locator.screenshot(path=str(out / shot))
        lines += [f"{rel}, {what} ({shot}), as a screen reader reads it (Chromium's accessibility tree):",
                  locator.aria_snapshot(), ""]
    text.write_text("\n".join(lines))
    page.close()
    return text


def main() -> None:
    from playwright.sync_api import sync_playwright

    from tools.vendor_js import tool_script

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--html", default=str(ROOT / "_build" / "html"))
    parser.add_argument("--out", default=str(ROOT / "_build" / "site-check"))
    parser.add_argument("--pages", nargs="*", help="check only these pages (paths under --html)")
    args = parser.parse_args()
    html, out = Path(args.html).resolve(), Path(args.out)
    if not (html / "index.html").exists():
        sys.exit(f"site check: no built site in {html}; run `make book` first")
    out.mkdir(parents=True, exist_ok=True)
    axe = tool_script("axe-core")
    server, base = serve(html)
    pages = sorted(p for p in html.rglob("*.html") if not any(s in p.relative_to(html).as_posix() for s in SKIP))
    failures, summary = 0, {}
    if (html / SOURCE_PAGE).exists():
        pages.append(html / SOURCE_PAGE)
    else:
        print(f"FAIL {SOURCE_PAGE}: highlighted source page missing from the site")
        failures += 1
    if args.pages:
        pages, failures = [html / p for p in args.pages], 0
    else:
        sources = sorted((html / "_modules").rglob("*.html"))
        for source in sources:
            bad = broken_links(BeautifulSoup(source.read_text(errors="replace"), "html.parser"), source, html)
            failures += bool(bad)
            for href in bad:
                print(f"FAIL {source.relative_to(html).as_posix()}: link points nowhere: {href}")
        print(f"{'ok  ' if failures == 0 else 'FAIL'} links of {len(sources)} highlighted source pages")
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
            context = browser.new_context(viewport={"width": 1280, "height": 1000}, color_scheme="light",
                                          service_workers="block")
            expected_chapters = {f"notebooks/{p.stem}.html" for p in chapter_notebooks()}
            expected_api = {f"book/api/{p.stem}.html" for p in (ROOT / "book" / "api").glob("*.md")}
            if not args.pages:
                built = {p.relative_to(html).as_posix() for p in pages}
                for m in sorted(expected_chapters - built):
                    print(f"FAIL {m}: chapter page missing from the site")
                    failures += 1
                for m in sorted(expected_api - built):
                    print(f"FAIL {m}: API reference page missing from the site")
                    failures += 1
            for page in pages:
                problems = check_page(context, base, html, page, axe, summary)
                failures += bool(problems)
                print(("FAIL " if problems else "ok   ") + page.relative_to(html).as_posix(), flush=True)
                for p in problems:
                    print("     - " + p)
            chapters = sorted(expected_chapters)
            for name, problems in [
                    (f"search for {SEARCH_WORD!r} with the keyboard", search_by_keyboard(context, base)),
                    ("a slider moved with the keyboard", slider_by_keyboard(context, base, chapters[0]))]:
                failures += bool(problems)
                print(("FAIL " if problems else "ok   ") + name)
                for p in problems:
                    print("     - " + p)
            shots = [("book/intro.html", "welcome"), (chapters[0], "chapter-first"), (chapters[-1], "chapter-last")]
            for rel, name in shots:
                page = open_page(context, base + rel, [])
                page.set_viewport_size({"width": 1280, "height": 2000})
                for mode in ("light", "dark"):
                    shot = out / f"{name}{'-dark' if mode == 'dark' else ''}.png"
                    set_theme(page, mode)
                    page.screenshot(path=str(shot))
                    print(f"screenshot {shot.relative_to(ROOT) if shot.is_relative_to(ROOT) else shot} ({rel})")
                set_theme(page, "light")  # the theme is remembered: the pages opened next open light again
                page.close()
            text = screen_reader_view(context, base, chapters[0], out)
            print(f"a figure and a widget as a screen reader reads them: {text} (beside figure.png, widget.png)")
            browser.close()
    finally:
        server.shutdown()
    notes = summary.get("notes", [])
    if notes:
        print(f"axe-core, moderate and minor findings (reported, not failed): {len(notes)}")
        for n in notes[:10]:
            print("     - " + n)
    print(f"site check: {len(pages) - failures if failures <= len(pages) else 0} pages passed, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
