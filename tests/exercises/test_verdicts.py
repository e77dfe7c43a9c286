"""What a verdict says and carries: its outcome, a check that cannot be carried out, and near misses
printed with enough digits to differ."""

from __future__ import annotations

import numpy as np
import pytest

import attnbook.exercises.ch17 as ch17
from attnbook.data.shakespeare import DataUnavailableError
from attnbook.exercises._harness import COMPARED, Case, Checker, Mistake, Outcome, Verdict


def _reference(x):
    return np.sqrt(x)


CHECK = Checker(name="root", doc="Check ``fn(x) -> sqrt(x)``.", reference=_reference,
                cases=[Case("x = 175.3", (np.float64(175.3),)), Case("x = [2, 3]", (np.array([2.0, 3.0]),))],
                mistakes=(Mistake(lambda x: x / 2, "a square root, not a half."),))


def _raises(x):
    raise ValueError("no")


def _stub(x):
    raise NotImplementedError


def _changes(x):
    if isinstance(x, np.ndarray):
        x += 1
    return np.sqrt(x)


@pytest.mark.parametrize(("answer", "outcome"), [
    (lambda x: np.sqrt(x), Outcome.PASSED),
    (lambda x: x / 2, Outcome.WRONG_VALUE),
    (lambda x: np.array([1.0, 2.0, 3.0]), Outcome.WRONG_SHAPE),
    (lambda x: None, Outcome.WRONG_FORM),
    (lambda x: "13.24", Outcome.WRONG_FORM),
    (_raises, Outcome.ERROR),
    (_stub, Outcome.NOT_ATTEMPTED),
    (_changes, Outcome.CHANGED_INPUT),
    (42, Outcome.WRONG_FORM),
], ids=["right", "value", "shape", "none", "text", "raises", "stub", "changes", "not-a-function"])
def test_each_kind_of_answer_has_its_outcome(answer, outcome):
    verdict = CHECK(answer)
    assert verdict.outcome is outcome, verdict.message
    assert bool(verdict) is (outcome is Outcome.PASSED)


def test_a_verdict_cannot_pass_with_a_failing_outcome():
    with pytest.raises(ValueError):
        Verdict(True, "f: ...", outcome=Outcome.CANNOT_CHECK)
    assert Verdict(False, "f: ...").outcome is Outcome.WRONG_VALUE
    assert Outcome.WRONG_VALUE in COMPARED and Outcome.ERROR not in COMPARED


def test_a_near_miss_prints_digits_that_differ_and_the_tolerance():
    exact = float(np.sqrt(175.3))
    in_float32 = float(np.float32(exact * (1 + 3e-6)))  # 13.24 to 4 digits, as the exact 13.24
    verdict = CHECK(lambda x: in_float32 if np.ndim(x) == 0 else np.sqrt(x))
    assert not verdict
    text = verdict.message
    shown = text.split("expected ")[1].split(" (input")[0]
    expected, got = shown.split(", got ")[0], shown.split(", got ")[1].split(";")[0]
    assert expected != got, text
    assert "the difference" in text and "float32" in text, text


def test_a_near_miss_in_an_array_prints_digits_that_differ():
    verdict = CHECK(lambda x: np.sqrt(x) * (1 + 5e-6) if np.ndim(x) else np.sqrt(x))
    assert not verdict
    shown = verdict.message.split("expected ")[1].split(" (input")[0]
    assert shown.split(", got ")[0] != shown.split(", got ")[1].split(";")[0], verdict.message


def test_the_capstone_cannot_pass_when_its_training_target_cannot_be_checked(monkeypatch):
    from test_exercises_ch17 import PARTS, OwnGPT, loop

    def unavailable():
        raise DataUnavailableError("Tiny Shakespeare is not here")

    monkeypatch.setattr(ch17, "_shakespeare_slices", unavailable)
    verdict = ch17.check_train_loop_by_hand({**PARTS, "GPT": OwnGPT})
    assert not verdict and verdict.outcome is Outcome.CANNOT_CHECK, verdict.message
    assert "all 3 checks passed" not in verdict.message
    assert "could not be checked" in verdict.message and "not a pass" in verdict.message
    verdict = ch17.check_train_loop_by_hand(loop)  # a bare loop is refused before the target is reached
    assert not verdict and "all 3 checks passed" not in verdict.message and "the dict of your parts" in verdict.message


def test_the_schedule_case_at_the_last_step_ends_at_the_floor():
    # the statement: the cosine ends at min_lr at step steps - 1; every case agrees with it
    for case in ch17._SCHEDULE_CASES:
        step, peak, warmup, total, final = case.args
        if step == total - 1 and warmup < total - 1:
            assert ch17._lr(*case.args) == pytest.approx(final)
    assert all(not (w == t - 1 and s == t - 1) for s, _, w, t, _ in (c.args for c in ch17._SCHEDULE_CASES))
