"""The Colab setup cell installs the release that pyproject.toml names, and the site leaves it out."""

import re
from pathlib import Path

import nbformat
import pytest

from tools import badges
from tools.colab_check import colab_versions
from tools.notebooks import ROOT, chapter_notebooks, read, repository, student_path, tags

NOTEBOOKS = [p for c in chapter_notebooks() for p in (c, student_path(c))]
IDS = [p.relative_to(ROOT / "notebooks").with_suffix("").as_posix() for p in NOTEBOOKS]
INSTALL = re.compile(r'%pip install --quiet "attnbook @ git\+(\S+)@(\S+)"')


def pyproject_version() -> str:
    """The package version, read from pyproject.toml's [project] table without the tools' help."""
    text = (ROOT / "pyproject.toml").read_text()
    project = text.split("[project]", 1)[1].split("\n[", 1)[0]
    return re.search(r'^version\s*=\s*"([^"]+)"', project, re.MULTILINE).group(1)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_setup_cell_installs_the_release_that_pyproject_names(path: Path):
    setup = [c for c in read(path).cells if "colab-setup" in tags(c)]
    assert len(setup) == 1, "expected one cell tagged colab-setup"
    installs = INSTALL.findall(setup[0].source)
    assert installs == [(repository()[0], f"v{pyproject_version()}")], (
        f"the setup cell installs {installs}; run `make badges` after changing the version")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_site_leaves_the_setup_cell_out(path: Path):
    (setup,) = [c for c in read(path).cells if "colab-setup" in tags(c)]
    assert "remove-cell" in tags(setup)


def test_release_tag_follows_pyproject():
    assert badges.release_tag() == f"v{pyproject_version()}"


def test_badges_tool_tags_a_new_setup_cell_once():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title"), nbformat.v4.new_code_cell("x = 1")]
    path = ROOT / "notebooks" / "99_example.ipynb"  # only used to compute links; nothing is written there
    once = badges.apply(nb, path, student=False)
    twice = badges.apply(once, path, student=False)
    assert [tags(c) for c in twice.cells] == [[], ["colab-badge"], ["colab-setup", "remove-cell"], []]


def test_colab_versions_file_names_python_and_pins():
    python, pins = colab_versions()
    assert re.fullmatch(r"3\.\d+", python)
    assert {"torch", "numpy", "ipywidgets", "ipython", "ipykernel", "transformers"} <= set(pins)
    assert pins["ipywidgets"].startswith("7."), "Colab ships ipywidgets 7; the widgets must work there"
    assert colab_versions("# Python 3.12\nnumpy==2.0.2\n") == ("3.12", {"numpy": "2.0.2"})
    with pytest.raises(ValueError, match="Python"):
        colab_versions("numpy==2.0.2\n")


def test_colab_check_names_a_timed_out_cell():
    from nbclient.exceptions import CellTimeoutError

    from tools.colab_check import TIMEOUT, _problem

    cell = nbformat.v4.new_code_cell("run = train_seq2seq('reverse', config)\nprint(run)")
    timeout = CellTimeoutError.error_from_timeout_and_cell("Cell execution timed out", TIMEOUT, cell)
    assert _problem(timeout) == f"a cell ran past {TIMEOUT} s: run = train_seq2seq('reverse', config)"
    assert _problem(ValueError("traceback\nValueError: bad shape")) == "ValueError: ValueError: bad shape"
