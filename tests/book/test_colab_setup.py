"""A chapter in Colab is one version: its badge opens the notebook at the ref `_config.yml` names, and its setup
cell installs the package from the same ref; the site leaves the setup cell out."""

import re
from pathlib import Path

import nbformat
import pytest
import yaml

from tools import badges
from tools.colab_check import colab_versions
from tools.notebooks import ROOT, chapter_notebooks, read, repository, student_path, tags

NOTEBOOKS = [p for c in chapter_notebooks() for p in (c, student_path(c))]
IDS = [p.relative_to(ROOT / "notebooks").with_suffix("").as_posix() for p in NOTEBOOKS]
INSTALL = re.compile(r'%pip install --quiet "attnbook @ git\+(\S+)@(\S+)"')
BADGE = re.compile(r"\(https://colab\.research\.google\.com/github/([^/]+/[^/]+)/blob/([^/]+)/(\S+?\.ipynb)\)")


def configured() -> tuple[str, str]:
    """``repository.url`` and ``repository.branch`` read from _config.yml without the tools' help."""
    repo = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
    return repo["url"], repo["branch"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_badge_and_setup_cell_come_from_the_one_ref_in_config(path: Path):
    url, ref = configured()
    nb = read(path)
    (setup,) = [c for c in nb.cells if "colab-setup" in tags(c)]
    (badge,) = [c for c in nb.cells if "colab-badge" in tags(c)]
    assert INSTALL.findall(setup.source) == [(url, ref)], (
        "the setup cell installs another version than the badge opens; run `make badges`")
    links = BADGE.findall(badge.source)
    assert links and all((repo, at) == (url.removeprefix("https://github.com/"), ref) for repo, at, _ in links), links
    assert links[0][2] == path.relative_to(ROOT).as_posix()


def test_one_setting_moves_badge_and_setup_cell_together(monkeypatch):
    """Point _config.yml at another ref (a release tag, say): the badge and the setup cell both follow it."""
    import tools.notebooks

    real = tools.notebooks.config()
    monkeypatch.setattr(tools.notebooks, "config",
                        lambda: {**real, "repository": {**real["repository"], "branch": "v9.9.9"}})
    chapter = chapter_notebooks()[0]
    assert "/blob/v9.9.9/notebooks/" in badges.badge_source(chapter, student=False)
    assert f'"attnbook @ git+{configured()[0]}@v9.9.9"' in badges.setup_source()
    assert repository()[1] == "v9.9.9"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_site_leaves_the_setup_cell_out(path: Path):
    (setup,) = [c for c in read(path).cells if "colab-setup" in tags(c)]
    assert "remove-cell" in tags(setup)


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
    assert {"torch", "numpy", "ipywidgets", "ipython", "ipykernel", "transformers", "scikit-learn"} <= set(pins)
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


def test_a_missed_wake_up_costs_one_poll_slice_not_the_cell_timeout():
    # A channel whose poll misses the wake-up of a message that has arrived: like pyzmq's asyncio poll
    # then, it finds the message only when its timeout runs out, and never if it has none.
    import asyncio
    import time
    from queue import Empty

    from tools.kernel import in_slices

    async def missed_wake_up(timeout=None):
        if timeout is None:
            await asyncio.Event().wait()
        await asyncio.sleep(timeout)
        return {"msg_type": "execute_reply"}

    async def nothing_arrives(timeout=None):
        await asyncio.sleep(timeout)
        raise Empty

    for timeout in (600.0, None):
        start = time.monotonic()
        assert asyncio.run(in_slices(missed_wake_up, step=0.05)(timeout=timeout)) == {"msg_type": "execute_reply"}
        assert time.monotonic() - start < 5, "the wait is bounded by the slice, not by the cell's timeout"
    start = time.monotonic()
    with pytest.raises(Empty):
        asyncio.run(in_slices(nothing_arrives, step=0.05)(timeout=0.3))
    assert 0.3 <= time.monotonic() - start < 5, "an empty channel still waits the whole timeout, then says so"
    with pytest.raises(Empty):
        asyncio.run(in_slices(nothing_arrives, step=0.05)(timeout=0))


def test_colab_check_client_runs_a_notebook_with_its_channels_polled_in_slices():
    from tools.colab_check import _client  # the client make execute and the student test use too

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time; time.sleep(1.5); print(6 * 7)")])
    client = _client(nb)
    seen = []
    client.on_cell_executed = lambda **_: seen.append(
        [c.get_msg.__name__ for c in (client.kc.shell_channel, client.kc.iopub_channel)])
    client.execute()
    assert nb.cells[0].outputs[0]["text"] == "42\n"
    assert seen == [["get_msg_in_slices", "get_msg_in_slices"]]


# --- the Colab check runs a chapter and its student version in one kernel -------------------------------

def _nb(*cells):
    import nbformat

    made = []
    for kind, source, *tag in cells:
        cell = nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source)
        if tag:
            cell.metadata["tags"] = list(tag)
        made.append(cell)
    return nbformat.v4.new_notebook(cells=made)


STUB = "def double(x):\n    raise NotImplementedError"
SOLUTION = "def double(x):\n    return 2 * x"
CHECK = ("def check_double(fn):\n    try:\n        return 'all passed' if fn(2) == 4 else 'wrong'\n"
         "    except NotImplementedError:\n        return 'double: not attempted yet'\n")


def test_chapter_tail_starts_at_the_first_cell_the_student_version_changed():
    from tools.colab_check import chapter_tail

    chapter = _nb(("code", "x = 1\n"), ("markdown", "## Exercises"), ("code", SOLUTION),
                  ("code", "check_double(double)"))
    student = _nb(("code", "x = 1"), ("markdown", "## Exercises"), ("code", STUB), ("code", "check_double(double)"))
    assert [c.source for c in chapter_tail(chapter, student)] == [SOLUTION, "check_double(double)"]


def test_colab_check_runs_the_student_version_then_the_chapters_solutions_and_tells_which_failed():
    from tools.colab_check import run_pair

    student = _nb(("code", CHECK), ("code", STUB), ("code", "check_double(double)"))
    chapter = _nb(("code", CHECK), ("code", SOLUTION), ("code", "assert check_double(double) == 'all passed'"))
    assert run_pair(chapter, student) == (None, None)
    # a solution that fails is the chapter's failure, after a student version that passed
    wrong = _nb(("code", CHECK), ("code", "def double(x):\n    return x"),
                ("code", "assert check_double(double) == 'all passed'"))
    student_problem, chapter_problem = run_pair(wrong, student)
    assert student_problem is None and "AssertionError" in chapter_problem
    # a student version that fails stops the run before the chapter's cells
    broken = _nb(("code", CHECK), ("code", STUB), ("code", "1 / 0"))
    student_problem, chapter_problem = run_pair(chapter, broken)
    assert "ZeroDivisionError" in student_problem and "not reached" in chapter_problem
    # a student stub that answers is caught: its checker must say "not attempted yet"
    answered = _nb(("code", CHECK), ("code", SOLUTION), ("code", "check_double(double)"))
    student_problem, _ = run_pair(chapter, answered)
    assert "not attempted yet" in student_problem
