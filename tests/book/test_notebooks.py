"""The chapters follow the template; badges, setup cells and student versions are what the tools make."""

import re
import sys
import types
from collections import Counter

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager

from tools import badges, student
from tools.kernel import notebook_client
from tools.notebooks import (
    NOTEBOOKS,
    asserts,
    chapter_notebooks,
    colab_url,
    comparison,
    read,
    repository,
    skipped,
    student_path,
    tags,
)

CHAPTERS = chapter_notebooks()
IDS = [p.stem for p in CHAPTERS]
CHECK_CALL = re.compile(r"^check_\w+\(", re.MULTILINE)


def test_there_are_chapters():
    assert CHAPTERS, "no notebooks/NN_name.ipynb found"


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def badge_and_setup(nb):
    badge = [c for c in nb.cells[:3] if "colab-badge" in tags(c)]
    setup = [c for c in nb.cells if "colab-setup" in tags(c)]
    assert len(badge) == 1, "expected one cell tagged colab-badge among the first three"
    assert len(setup) == 1, "expected one cell tagged colab-setup"
    return badge[0], setup[0]


@pytest.mark.parametrize("path", CHAPTERS, ids=IDS)
def test_chapter_follows_the_template(path):
    nb = read(path)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    assert "learning goals" in "".join(c.source for c in nb.cells[:4]).lower()
    md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert len(re.findall(r"^:::\{exercise\}", md, re.MULTILINE)) >= 3
    assert CHECK_CALL.search("\n".join(c.source for c in code_cells(nb))), "no exercise checker"
    assert "## Summary" in md and "## References" in md
    images = [o for c in code_cells(nb) for o in c.outputs if "image/png" in o.get("data", {})]
    assert images, "no figure"


@pytest.mark.parametrize("path", CHAPTERS, ids=IDS)
def test_chapter_is_executed_top_to_bottom_without_errors(path):
    cells = code_cells(read(path))
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1))
    # A cell may end in an error only where the error is the lesson, marked with raises-exception.
    errors = [o for c in cells if "raises-exception" not in tags(c) for o in c.outputs if o.output_type == "error"]
    assert not errors, f"stored error output: {errors[0].ename}"
    expected = [c for c in cells if "raises-exception" in tags(c)]
    raised = [any(o.output_type == "error" for o in c.outputs) for c in expected]
    assert all(raised), "a cell tagged raises-exception did not raise"


@pytest.mark.parametrize("path", CHAPTERS, ids=IDS)
def test_no_cell_is_left_unchecked(path):
    # A stored output that another CPU would change (anything downstream of training or sampling) is
    # left out of nbval's comparison, and the cell asserts the claim the prose makes instead. A cell
    # whose output is left out and that asserts nothing would be a silent hole; skipping is never allowed.
    for cell in code_cells(read(path)):
        assert not skipped(cell), f"nbval would skip this cell:\n{cell.source}"
        assert comparison(cell) != "unchecked", (
            f"output left out of the comparison, but the cell asserts nothing:\n{cell.source}")


def test_most_cells_are_compared_exactly():
    kinds = Counter(comparison(c) for path in CHAPTERS for c in code_cells(read(path)) if c.outputs)
    assert kinds["exact"] >= 0.85 * sum(kinds.values()), kinds


@pytest.mark.parametrize(
    "source, expected",
    [
        ("assert loss < 2.1", True),
        ("x = 1\nfor i in range(3):\n    assert i < 3", True),
        ("np.testing.assert_allclose(a, b)", True),
        ("torch.testing.assert_close(a, b)\nprint(a)", True),
        ("%matplotlib inline\nassert x", True),
        ("print(loss)", False),
        ("def f(x):\n    assert x\nprint(1)", False),  # defined, never run here
        ("check_softmax(softmax)", False),  # an exercise verdict is printed output, not an assertion
        ("# assert loss < 2.1\nprint(loss)", False),
    ],
)
def test_assertions_are_recognised(source, expected):
    assert asserts(nbformat.v4.new_code_cell(source)) is expected


def test_a_left_out_cell_without_assertion_is_unchecked():
    tagged = nbformat.v4.new_code_cell("print(run.val_loss)", metadata={"tags": ["nbval-ignore-output"]})
    commented = nbformat.v4.new_code_cell("# NBVAL_IGNORE_OUTPUT\nprint(run.val_loss)")
    asserted = nbformat.v4.new_code_cell("print(run.val_loss)\nassert run.val_loss < 2.1",
                                         metadata={"tags": ["nbval-ignore-output"]})
    skipped_cell = nbformat.v4.new_code_cell("assert x", metadata={"tags": ["nbval-skip"]})
    assert [comparison(c) for c in (tagged, commented, asserted, skipped_cell)] == [
        "unchecked", "unchecked", "assertion", "unchecked"]
    assert comparison(nbformat.v4.new_code_cell("print(1)")) == "exact"


@pytest.mark.parametrize("path", CHAPTERS, ids=IDS)
def test_chapter_widgets_have_stored_state_and_a_static_figure_after(path):
    nb = read(path)
    cells = code_cells(nb)
    for i, cell in enumerate(cells):
        if any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in cell.outputs):
            assert "widgets" in nb.metadata, "widget state not stored: run make execute"
            following = cells[i + 1 : i + 3]
            assert any("image/png" in o.get("data", {}) for c in following for o in c.outputs), \
                "a widget needs a static figure right after it for readers of the site"


@pytest.mark.parametrize("path", CHAPTERS, ids=IDS)
def test_badges_point_at_the_right_files(path):
    url, branch = repository()
    for file, is_student in ((path, False), (student_path(path), True)):
        badge, setup = badge_and_setup(read(file))
        assert f"({colab_url(file)})" in badge.source
        assert colab_url(file).endswith(f"/blob/{branch}/notebooks/{'student/' if is_student else ''}{path.name}")
        if not is_student:
            assert f"({colab_url(student_path(path))})" in badge.source
        assert f"git+{url}@{branch}" in setup.source


def run_setup_cell(source, in_colab):
    """Run the setup cell's code with a stand-in IPython; return the magics it ran."""
    calls = []
    shell = types.SimpleNamespace(run_line_magic=lambda name, line: calls.append((name, line)))
    code = TransformerManager().transform_cell(source)
    saved = sys.modules.get("google.colab")
    if in_colab:
        sys.modules["google.colab"] = types.ModuleType("google.colab")
    else:
        sys.modules.pop("google.colab", None)
    try:
        exec(code, {"get_ipython": lambda: shell})
    finally:
        if saved is not None:
            sys.modules["google.colab"] = saved
        else:
            sys.modules.pop("google.colab", None)
    return calls


def test_setup_cell_installs_in_colab_and_only_there():
    url, _ = repository()
    assert run_setup_cell(badges.setup_source(), in_colab=False) == []
    calls = run_setup_cell(badges.setup_source(), in_colab=True)
    assert calls == [("pip", f'install --quiet "attnbook @ git+{url}@{repository()[1]}"')]


def test_badges_tool_inserts_missing_cells_and_is_idempotent(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title"), nbformat.v4.new_markdown_cell("goals"),
                nbformat.v4.new_code_cell("x = 1")]
    path = NOTEBOOKS / "99_example.ipynb"  # only used to compute links; nothing is written there
    once = badges.apply(nb, path, student=False)
    assert [tags(c) for c in once.cells] == [[], ["colab-badge"], [], ["colab-setup", "remove-cell"], []]
    twice = badges.apply(once, path, student=False)
    assert nbformat.writes(twice) == nbformat.writes(once)


@pytest.mark.parametrize("path", CHAPTERS, ids=IDS)
def test_student_version_is_current(path):
    committed = student_path(path)
    assert committed.exists(), f"missing {committed}: run make student"
    assert nbformat.writes(student.make_student(path)) + "\n" == committed.read_text(), \
        f"{committed} is out of date: run make student"


@pytest.mark.parametrize("path", CHAPTERS, ids=IDS)
def test_student_version_has_no_solutions_and_no_outputs(path):
    nb = read(student_path(path))
    text = "\n".join(c.source for c in nb.cells)
    assert "BEGIN SOLUTION" not in text and "{solution" not in text
    assert all(not c.outputs and c.execution_count is None for c in code_cells(nb))
    assert text.count("raise NotImplementedError") >= 1
    assert "widgets" not in nb.metadata


@pytest.mark.slow  # every chapter's teaching cells, training included: make test-slow; CI runs them in colab-check
@pytest.mark.parametrize("path", CHAPTERS, ids=IDS)
def test_student_version_runs_and_reports_not_attempted(path):
    nb = read(student_path(path))
    notebook_client(nb, 900, str(NOTEBOOKS)).execute()
    verdicts = [
        o.data["text/plain"]
        for c in code_cells(nb) if CHECK_CALL.search(c.source)
        for o in c.outputs if o.output_type == "execute_result"
    ]
    n_checks = sum(bool(CHECK_CALL.search(c.source)) for c in code_cells(nb))
    assert len(verdicts) == n_checks >= 1
    assert all("not attempted yet" in v for v in verdicts), verdicts


def test_strip_solutions_keeps_the_signature_and_moves_the_hints_out():
    source = "def f(x):\n    ### BEGIN SOLUTION\n    ### HINT: square it.\n    return x * x\n    ### END SOLUTION\n"
    assert student.strip_solutions(source, "t") == (
        "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError"
    )
    assert student.solution_hints(source) == ["Square it."]


@pytest.mark.parametrize(
    "source, message",
    [
        ("### BEGIN SOLUTION\nx = 1\n### END SOLUTION", "must sit inside a function body"),
        ("def f():\n    ### BEGIN SOLUTION\n    return 1", "without ### END SOLUTION"),
        ("def f():\n    return 1\n    ### END SOLUTION", "without ### BEGIN SOLUTION"),
    ],
)
def test_strip_solutions_rejects_broken_markers(source, message):
    with pytest.raises(student.SolutionMarkerError, match=message):
        student.strip_solutions(source, "t")


def test_solution_cells_are_recognised():
    gated = nbformat.v4.new_markdown_cell(":::{solution-start} ex-1\n:class: dropdown\n:::")
    prose = nbformat.v4.new_markdown_cell("::::{solution} ex-2\ntext\n::::")
    tagged = nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["solution"]})
    exercise = nbformat.v4.new_markdown_cell(":::{exercise} Title\n:label: ex-1\n:::")
    assert all(student.is_solution_cell(c) for c in (gated, prose, tagged))
    assert not student.is_solution_cell(exercise)
