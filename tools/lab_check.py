"""Open chapter 1 in a real JupyterLab from the book's environment, as a reader does, and use its widget.

Starts ``jupyter lab`` from ``.venv`` on the loopback address (a copy of the chapter in a scratch folder, so
nothing committed is touched), opens the chapter in headless Chromium driven by Playwright, runs every cell
from JupyterLab's Run menu, then checks what the reader should see: the widget's two sliders with their
labels and the figure beneath them, and a new figure after a slider is moved with the keyboard. Fails
(exit 1) saying which of these did not happen; saves a screenshot in ``_build/lab-check/``.

Usage: ``python -m tools.lab_check [--out _build/lab-check]``.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tools.notebooks import NOTEBOOKS, ROOT
from tools.site_check import CHROMIUM_FLAGS, chromium

CHAPTER = "01_vectors.ipynb"
SLIDERS = ("angle between u and v (degrees)", "length of v")
MIN_TRACK = 150  # pixels of track a slider needs to be usable with a mouse
START_SECONDS, RUN_SECONDS = 90, 180  # JupyterLab's start, and running the chapter (about 10 s here)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_lab(folder: Path, port: int, token: str) -> subprocess.Popen:
    """``jupyter lab`` serving ``folder`` on 127.0.0.1:``port``, with settings of its own (not the user's)."""
    lab = Path(sys.executable).parent / "jupyter-lab"
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(folder / ".config"), "JUPYTER_RUNTIME_DIR": str(folder / ".run"),
           "JUPYTERLAB_SETTINGS_DIR": str(folder / ".settings"), "JUPYTERLAB_WORKSPACES_DIR": str(folder / ".ws")}
    args = [str(lab), "--no-browser", "--ip=127.0.0.1", f"--port={port}", f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={folder}", "--LabApp.news_url=", "--ServerApp.port_retries=0",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--allow-root"]  # CI runs as root; the server listens on the loopback address only
    log = open(folder / "lab.log", "w")  # a file, not a pipe: an unread pipe fills and stalls the server
    return subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)


def wait_until_up(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with code {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"jupyter lab did not answer at {url} within {START_SECONDS} s")


def check_widget(page, out: Path) -> list[str]:
    """Run the chapter from the Run menu and check its widget; return what went wrong."""
    # A first opening asks which kernel to start, as it does a reader: take the one proposed (the venv's).
    select = page.get_by_role("button", name="Select", exact=True)
    try:
        select.wait_for(timeout=30_000)
        select.click()
    except Exception:
        pass  # no dialog: the kernel started by itself
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    sliders = page.locator(".jp-OutputArea .widget-slider")
    try:
        sliders.nth(len(SLIDERS) - 1).wait_for(timeout=RUN_SECONDS * 1000)
    except Exception:
        page.screenshot(path=str(out / "chapter1-no-widget.png"))
        return [f"no widget sliders appeared within {RUN_SECONDS} s of Run All Cells"]
    problems = []
    widget = sliders.first.locator("xpath=ancestor::div[contains(@class, 'widget-vbox')][1]")
    widget.scroll_into_view_if_needed()
    labels = [(widget.locator(".widget-slider").nth(i).locator("label").first.text_content() or "").strip()
              for i in range(len(SLIDERS))]
    if tuple(labels) != SLIDERS:
        problems.append(f"slider labels {labels}, expected {list(SLIDERS)}")
    for i, name in enumerate(SLIDERS):  # a long label can squeeze the track out of its row
        box = widget.locator(".widget-slider").nth(i).locator(".slider-container").bounding_box()
        if box is None or box["width"] < MIN_TRACK:
            problems.append(f"the '{name}' slider's track is {0 if box is None else box['width']:.0f} px wide, "
                            f"under {MIN_TRACK} px: too narrow to drag")
    figure = widget.locator(".widget-output img")
    try:
        figure.first.wait_for(timeout=30_000)
    except Exception:
        problems.append("the widget shows no figure under its sliders")
        return problems
    before = figure.first.get_attribute("src")
    handle = widget.locator(".widget-slider").nth(1).locator("[role=slider]")
    handle.focus()
    page.keyboard.press("ArrowRight")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and figure.first.get_attribute("src") == before:
        time.sleep(0.2)
    if figure.first.get_attribute("src") == before:
        problems.append("moving the 'length of v' slider with the keyboard did not redraw the figure")
    value = widget.locator(".widget-readout").nth(1).inner_text()
    if value.strip() != "1.75":
        problems.append(f"the 'length of v' readout shows {value!r} after one step right from 1.50, expected '1.75'")
    widget.screenshot(path=str(out / "chapter1-widget.png"))
    page.screenshot(path=str(out / "chapter1.png"))
    return problems


def main(argv: list[str] | None = None) -> int:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "lab-check")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    browser_path = chromium()
    token, port = secrets.token_hex(16), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        shutil.copy(NOTEBOOKS / CHAPTER, folder / CHAPTER)
        lab = start_lab(folder, port, token)
        try:
            wait_until_up(f"http://127.0.0.1:{port}/api/status?token={token}", lab, folder / "lab.log")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=browser_path, args=CHROMIUM_FLAGS)
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(f"http://127.0.0.1:{port}/lab/tree/{CHAPTER}?token={token}")
                page.locator(".jp-Notebook").first.wait_for(timeout=START_SECONDS * 1000)
                problems = check_widget(page, args.out)
                browser.close()
        finally:
            lab.terminate()
            try:
                lab.wait(timeout=20)
            except subprocess.TimeoutExpired:
                lab.kill()
    for line in problems:
        print(f"lab check: {line}")
    print(f"lab check: chapter 1 in JupyterLab {'failed' if problems else 'passed'} (screenshots in {args.out})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
