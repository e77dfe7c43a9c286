"""Every figure the book shows says what it shows, to a reader who cannot see it.

A code cell that draws a figure carries its alt text in its metadata, ``{"mystnb": {"image": {"alt": ...}}}``
(MyST-NB puts it on the figure's ``<img>``), and so does a cell that shows a widget drawing a figure (the site's
widget script puts it on the widget's image). Without one, the site would fall back on the image's file name,
which a screen reader reads out in place of the figure. CONTRIBUTING.md, "Alt texts", says how to write them.
"""

import re

import nbformat
import pytest

from tools import student
from tools.kernel import notebook_client
from tools.notebooks import NOTEBOOKS, chapter_notebooks, read

CHAPTERS = chapter_notebooks()
IDS = [p.stem for p in CHAPTERS]
IMAGE_TYPES = ("image/png", "image/jpeg", "image/svg+xml", "image/gif")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
# What an alt text is not: a file name or path, a hash, or a word that says only that there is a figure.
FILE_NAME = re.compile(r"\.(png|jpe?g|svg|gif)\b|_images/|[0-9a-f]{16,}", re.IGNORECASE)
PLACEHOLDER = re.compile(r"^\W*(a |the )?(plot|figure|graph|chart|image|picture|output)s?\W*$", re.IGNORECASE)
MIN_WORDS = 8  # a sentence that names the axes and what the figure shows is longer than this


def alt_text(cell) -> str | None:
    return ((cell.get("metadata", {}).get("mystnb") or {}).get("image") or {}).get("alt")


def widget_draws_figures(nb) -> bool:
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    return any(any(t in out.get("data", {}) for t in IMAGE_TYPES)
               for model in state.values() for out in (model.get("state", {}).get("outputs") or []))


def figure_cells(nb):
    """(cell id, what it shows) for every code cell that shows a figure."""
    widgets = widget_draws_figures(nb)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        data = [out.get("data", {}) for out in cell.get("outputs", [])]
        if any(t in d for d in data for t in IMAGE_TYPES):
            yield cell, "a figure"
        elif widgets and any(WIDGET_VIEW in d for d in data):
            yield cell, "a widget that draws a figure"


def alt_problem(alt: str | None) -> str | None:
    if not alt or not alt.strip():
        return "no alt text"
    if FILE_NAME.search(alt):
        return f"an alt text that is a file name: {alt!r}"
    if PLACEHOLDER.match(alt) or len(alt.split()) < MIN_WORDS:
        return f"an alt text that does not say what the figure shows: {alt!r}"
    return None


@pytest.mark.parametrize("path", CHAPTERS, ids=IDS)
def test_every_figure_has_an_alt_text(path):
    nb = read(path)
    problems = [f"cell {cell.get('id')} shows {what} with {problem}"
                for cell, what in figure_cells(nb) if (problem := alt_problem(alt_text(cell)))]
    assert not problems, (f"{path.name}: " + "; ".join(problems) + '. Give the cell metadata {"mystnb": {"image": '
                          '{"alt": "..."}}}: one sentence saying what the figure shows (CONTRIBUTING.md, "Alt texts")')


@pytest.mark.parametrize("path", CHAPTERS, ids=IDS)
def test_student_version_keeps_the_alt_texts(path):
    alts = {c.get("id"): alt_text(c) for c in read(path).cells if alt_text(c)}
    kept = {c.get("id"): alt_text(c) for c in student.make_student(path).cells if c.get("id") in alts}
    assert kept == alts


@pytest.mark.parametrize("alt, ok", [
    ("../_images/6148a0b1c2d3e4f5a6b7c8d9e0f1db44.png", False),
    ("figure.png", False),
    ("A plot", False),
    ("figure", False),
    ("Bar chart of the softmax weights of five scores: the score 3 takes 0.62.", True),
])
def test_alt_problem_tells_a_description_from_a_file_name(alt, ok):
    assert (alt_problem(alt) is None) == ok


def test_execution_keeps_the_alt_text():
    """``make execute`` (nbclient through tools.kernel) rewrites outputs, never a cell's metadata."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print(1)")
    cell.metadata["mystnb"] = {"image": {"alt": "Line plot of the loss falling from 2.7 to 0.7 over 200 steps."}}
    nb.cells.append(cell)
    notebook_client(nb, 60, str(NOTEBOOKS), store_widget_state=True, record_timing=False).execute()
    assert nb.cells[0].outputs and nb.cells[0].metadata["mystnb"] == cell.metadata["mystnb"]
