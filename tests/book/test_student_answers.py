"""The exercise versions of chapters 16, 22 and 25 do not show the answers of their written exercises.

A derive-then-check exercise gives the learner a function to write and a check cell that compares it with a
measurement or with a count kept in the package; the expressions and numbers that answer it live only in the
solution, which the exercise version leaves out. For each exercise below, every fragment of its answer is in
the chapter (so the fragment is the answer as written there, and the test fails if it is reworded) and in no
cell of the exercise version (sources and outputs alike), so that a regression names the exercise; a few
patterns also catch the answer in another spelling, such as the one a visible cell used to print.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from attnbook.exercises.ch25 import check_muon_cost
from tools.notebooks import NOTEBOOKS, read, student_path

CH16 = NOTEBOOKS / "16_training_seq2seq.ipynb"
CH22 = NOTEBOOKS / "22_modern_block.ipynb"
CH25 = NOTEBOOKS / "25_training_faster.ipynb"

# exercise -> (its chapter, the fragments of its answer: expressions of the solution's code and prose, printed values)
ANSWERS = {
    "16-why (b), the floor of the smoothed loss": (CH16, [
        "1 - eps + eps / V",  # the right token's share of the smoothed target
        "(V - 1) * r * math.log(r)",  # the closed form's second term
        "eps * math.log(V)",  # the large-V form
        r"H = -q \ln q - (V - 1)\, r \ln r",  # the closed form in the prose
        r"it grows like $\epsilon_\text{ls} \ln V$",  # how it grows with V
        "1.3624",  # the floor at V = 32,000, printed
        "0.5890",  # the large-V form at V = 14, printed
    ]),
    "22-shift, the first-order approach to the limit": (CH22, [
        "(x - x.mean()) / abs(b)",  # the solution's code
        r"\operatorname{sign}(b) + (x_i - \mu) / |b|",  # the prose
        r"the mean $\mu$ itself is gone",  # the statistic it no longer depends on
    ]),
    "25-rms, AdamW's step on noise": (CH25, [
        "math.sqrt((1 - beta1) / (1 + beta1))",  # the solution's code
        r"\sqrt{(1 - \beta_1)/(1 + \beta_1)}",  # the prose
        "0.2294",  # its value at beta1 = 0.9, printed
        r"\approx 0.229",
    ]),
    "25-cost, where Muon's time goes": (CH25, [
        "math.ceil(ns / (0.1 * per_window))",  # (a), the solution's code
        "def ratio_at_width",  # (b), the solution's model of the ratio
        "10% needs 76 windows",  # (a) in the prose
        "at most 10% from 76 windows per step",  # (a), printed
        "from a width of about 200",  # (b) in the prose
        "matches the passes from width 200",  # (b), printed
    ]),
}


# exercise -> patterns of its answer in any spelling (the solution's, or the one a visible cell once printed)
PATTERNS = {
    "25-rms, AdamW's step on noise": [r"sqrt\(\s*\(1 - [\w.]*beta1\)\s*/\s*\(1 \+ [\w.]*beta1\)"],
    "25-cost, where Muon's time goes": [r"ceil\(\s*ns\s*/"],
}


def _text(nb: nbformat.NotebookNode) -> str:
    """Every cell's source and every output's text, one string."""
    parts = []
    for cell in nb.cells:
        parts.append(cell.source)
        for out in cell.get("outputs", []):
            parts.append(out.get("text", ""))
            parts.append(out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


@pytest.mark.parametrize("exercise", ANSWERS, ids=list(ANSWERS))
def test_the_exercise_version_shows_none_of_the_answer(exercise):
    chapter, fragments = ANSWERS[exercise]
    full, student = _text(read(chapter)), _text(read(student_path(chapter)))
    missing = [f for f in fragments if f not in full]
    assert not missing, f"{exercise}: the chapter no longer holds {missing}; update the answer's fragments"
    shown = [f for f in fragments if f in student]
    shown += [pattern for pattern in PATTERNS.get(exercise, []) if re.search(pattern, student)]
    assert not shown, f"{exercise}: the exercise version shows the answer: {shown}"


@pytest.mark.parametrize("chapter, function, check", [
    (CH16, "smoothing_floor", "write smoothing_floor above first"),
    (CH22, "shift_first_order", "write shift_first_order above first"),
    (CH25, "adamw_rms_cases", "write adamw_rms_cases above first"),
    (CH25, "muon_cost_answers", "check_muon_cost(muon_cost_answers"),
])
def test_the_exercise_version_keeps_a_stub_and_a_check_that_needs_it(chapter, function, check):
    student = read(student_path(chapter))
    sources = [c.source for c in student.cells if c.cell_type == "code"]
    stub = next(i for i, s in enumerate(sources) if s.startswith(f"def {function}("))
    assert "raise NotImplementedError" in sources[stub]
    after = sources[stub + 1]  # the check: the next code cell, calling the learner's function
    assert check in after and function in after.replace(f"def {function}(", ""), after


# --- the check of the cost exercise: its numbers are the chapter's, and a wrong one is told its direction ---

def _printed(chapter, pattern: str) -> str:
    text = "\n".join("".join(o.get("text", "")) for c in read(chapter).cells if c.cell_type == "code"
                     for o in c.outputs)
    found = re.search(pattern, text)
    assert found, pattern
    return found.group(1)


NS = float(_printed(CH25, r"Newton-Schulz, 5 steps on 24 matrices: ([\d.]+) GFLOP")) * 1e9
TRAINING = float(_printed(CH25, r"forward and backward on 768 tokens: ([\d.]+) GFLOP")) * 1e9
WINDOWS = int(_printed(CH25, r"at most 10% from (\d+) windows per step"))  # the solution's own search
WIDTH = int(_printed(CH25, r"matches the passes from width (\d+)"))


def test_the_cost_check_passes_the_numbers_the_chapter_solution_prints():
    verdict = check_muon_cost(lambda: (WINDOWS, WIDTH), NS, TRAINING, 12)
    assert verdict and verdict.message == "muon_cost: both numbers are right."
    assert check_muon_cost(lambda: [float(WINDOWS), float(WIDTH)], NS, TRAINING, 12)


@pytest.mark.parametrize("answer, words", [
    ((WINDOWS - 1, WIDTH), "more than 10%"),
    ((WINDOWS + 1, WIDTH), "so does a smaller batch"),
    ((WINDOWS, WIDTH - 8), "still costs less than the passes"),
    ((WINDOWS, WIDTH + 8), "so it does at a smaller width"),
    ((WINDOWS, WIDTH + 1), "not a positive multiple of 8"),
    ((0, WIDTH), "not a positive number of windows"),
])
def test_the_cost_check_says_which_way_a_wrong_number_is_off(answer, words):
    verdict = check_muon_cost(lambda: answer, NS, TRAINING, 12)
    assert not verdict and verdict.attempted and words in verdict.message, verdict.message
    assert f"{WINDOWS} windows" not in verdict.message and f"width {WIDTH}" not in verdict.message  # not the answer


def test_the_cost_check_reports_a_stub_and_a_wrong_form():
    def stub():
        raise NotImplementedError

    verdict = check_muon_cost(stub, NS, TRAINING, 12)
    assert not verdict and not verdict.attempted and "not attempted yet" in repr(verdict)
    for answer in (76, (76,), ("76", 200), (76.5, 200), None):
        verdict = check_muon_cost(lambda answer=answer: answer, NS, TRAINING, 12)
        assert not verdict and "expected two" in verdict.message, verdict.message
