"""Every checker against a fixed battery of adversarial submissions.

Each checker (found automatically, as in ``test_checkers.py``) is given the same submissions, built
from its own reference answers: nothing, an exception, a wrong shape, NaN, a tensor that requires
grad, bfloat16, a meta tensor, huge integers, complex numbers, strings, changed inputs, ``sys.exit()``,
a loop that never ends, the first answer hard-coded, a 0.1% error, and more. The oracle is the
reference itself: a submission that returns the reference's values in an accepted form must pass;
every other one must fail, with the sentence that names what went wrong. No checker may raise, and
the reference must pass before and after the battery. The submissions call the reference, which a
checker refuses from a learner, so the battery runs with the watch off (``unwatched``).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import sys
import threading

import numpy as np
import pytest
import torch
from _answers import accepts_reference, reference_answer, unwatched

from attnbook.exercises._harness import Checker, Verdict, chapter_checkers

CHECKERS: list[tuple[str, Checker]] = [(name, c) for name, c, _ in chapter_checkers()]

LONGEST_MESSAGE = 600  # characters: a verdict must stay readable whatever came back


# --- turning a reference answer into the submissions' answers --------------------------------------

def _array(answer) -> np.ndarray:
    """The reference's answer as a NumPy array with its own kind of values (bool, int or float)."""
    if isinstance(answer, torch.Tensor):
        return answer.detach().cpu().numpy()
    return np.asarray(answer)


def _exact(answer) -> bool:
    return _array(answer).dtype.kind in "biu"


def _tiny_error(answer):
    """An answer off by 0.1% (integers by one, booleans with one entry flipped, words by a letter)."""
    if isinstance(answer, str):
        return answer + "s"
    a = _array(answer)
    if a.dtype.kind == "b":
        flipped = a.copy().reshape(-1)
        flipped[0] = ~flipped[0]
        return flipped.reshape(a.shape)
    if a.dtype.kind in "iu":
        return a + 1
    return np.where(np.isfinite(a), a * 1.001 + 1e-3, a)


def _first_mutable(args) -> int | None:
    for i, a in enumerate(args):
        if isinstance(a, (np.ndarray, torch.Tensor)) or (isinstance(a, list) and len(a) > 0):
            return i
    return None


def _mutate(a) -> None:
    """Change ``a`` in place, as a careless solution might (``x -= x.max()``, ``words.remove(w)``)."""
    if isinstance(a, list):
        a.pop(0)
    elif isinstance(a, torch.Tensor):
        a.logical_not_() if a.dtype == torch.bool else a.add_(1)
    elif a.dtype == bool:
        np.logical_not(a, out=a)
    else:
        a += 1


def _never_returns(*args):
    while True:
        try:
            pass
        except Exception:  # a learner's guard must not stop the time limit either
            pass


def _library_not_implemented(*args):
    return torch.zeros(2, 2).to_sparse().view(4)  # PyTorch raises NotImplementedError for this op


def _stub(*args):
    raise NotImplementedError


# --- the battery --------------------------------------------------------------------------------------

# How each submission must be judged: "fail" (a wrong answer or a form no checker accepts), "pass" (the
# reference's values in an accepted form), "tolerance" (passes exactly when its rounded values are
# within the checker's tolerance), "not attempted" (the exercise's untouched stub).
WRONG, RIGHT, TOLERANCE, STUB = "fail", "pass", "tolerance", "not attempted"


def submissions(checker: Checker) -> dict[str, tuple[str, object]]:
    """The battery for one checker: name -> (expected judgement, the submitted function or object)."""
    ref = checker.reference
    first: list = []

    def answer(*args):
        return ref(*copy.deepcopy(args))

    def as_tensor(values, **kw):
        return torch.tensor(_array(values).astype(np.float64), dtype=torch.float64, **kw)

    def hard_coded_first(*args):
        if not first:
            first.append(answer(*args))
        return first[0]

    def mutates(*args):
        result = answer(*args)
        i = _first_mutable(args)
        if i is not None:
            _mutate(args[i])
        return result

    def word_or(fn):
        """``fn`` of the answer for numeric answers; for a word, a value of the wrong kind."""
        def submit(*args):
            result = answer(*args)
            return 0.5 if isinstance(result, str) else fn(result)
        return submit

    battery: dict[str, tuple[str, object]] = {
        "returns None": (WRONG, lambda *a: None),
        "raises ValueError": (WRONG, lambda *a: (_ for _ in ()).throw(ValueError("a bug in the attempt"))),
        "NotImplementedError from PyTorch": (WRONG, _library_not_implemented),
        "the untouched stub": (STUB, _stub),
        "not a function": (WRONG, 42),
        "wrong shape": (WRONG, lambda *a: (np.append(_array(answer(*a)).astype(float), 0.0)
                                           if not isinstance(answer(*a), str) else [answer(*a)])),
        "NaN": (WRONG, lambda *a: (np.where(np.arange(_array(answer(*a)).size).reshape(_array(answer(*a)).shape) == 0,
                                            np.nan, _array(answer(*a)).astype(float))
                                   if not isinstance(answer(*a), str) else float("nan"))),
        "tensor that requires grad": (RIGHT, word_or(lambda r: as_tensor(r, requires_grad=True))),
        "bfloat16 tensor": (TOLERANCE, word_or(lambda r: as_tensor(r).bfloat16())),
        "meta tensor": (WRONG, lambda *a: torch.empty(_array(answer(*a)).shape, device="meta")),
        "integer 10**400": (WRONG, lambda *a: 10**400),
        "integer 2**64 + 5": (WRONG, lambda *a: 2**64 + 5),
        "complex with zero imaginary part": (WRONG, word_or(lambda r: _array(r).astype(complex))),
        "complex with imaginary part": (WRONG, word_or(lambda r: _array(r) + 1e-3j)),
        "the numbers as one string": (WRONG, lambda *a: (str(_array(answer(*a)).tolist())
                                                         if not isinstance(answer(*a), str) else repr(answer(*a)))),
        "the numbers as strings": (WRONG, word_or(lambda r: _array(r).astype(str))),
        "a list of the right numbers": (RIGHT, word_or(lambda r: _array(r).tolist())),
        "a tuple of the answer and a long text": (WRONG, lambda *a: (answer(*a), "x" * 5000)),
        "changes its inputs in place": (WRONG, mutates),
        "calls sys.exit()": (WRONG, lambda *a: sys.exit(0)),
        "never returns": (WRONG, _never_returns),
        "the first answer, hard-coded": (WRONG, hard_coded_first),
        "a 0.1% error": (WRONG, lambda *a: _tiny_error(answer(*a))),
        "the reference itself": (RIGHT, answer),
    }
    if all(_first_mutable(c.args) is None for c in checker.cases):
        del battery["changes its inputs in place"]  # numbers only: nothing can be changed in place
    return battery


def _within_tolerance_in_bfloat16(checker: Checker) -> bool:
    """Whether the reference's answers survive rounding to bfloat16 within the checker's tolerance."""
    for case in checker.cases:
        ref = checker.reference(*copy.deepcopy(case.args))
        if isinstance(ref, str):
            return False
        a = _array(ref)
        rounded = torch.tensor(a.astype(np.float64)).bfloat16().double().numpy()
        if a.dtype.kind in "biu":
            if not np.array_equal(rounded, a):
                return False
        elif not np.allclose(rounded, a, atol=checker.atol, rtol=checker.rtol):
            return False
    return True


@dataclasses.dataclass
class Outcome:
    checker: str
    submission: str
    expected: str
    verdict: Verdict | None
    crash: str | None = None

    @property
    def false_pass(self) -> bool:
        return self.verdict is not None and bool(self.verdict) and self.expected in (WRONG, STUB)


# Checkers whose answers are indices and must come with an integer dtype: a float tensor (one that requires grad,
# bfloat16) holding the right whole numbers is refused, saying what arrived.
INTEGER_DTYPE = {"ch28.induction_targets_by_hand"}
FLOAT_TENSORS = ("tensor that requires grad", "bfloat16 tensor")


@functools.cache
def run_battery(name: str) -> tuple[Outcome, ...]:
    checker = dict(CHECKERS)[name]
    quick = dataclasses.replace(checker, time_limit=0.3)  # the loop that never ends costs 0.3 s, not 10
    bf16_ok = _within_tolerance_in_bfloat16(checker)
    words = isinstance(checker.reference(*copy.deepcopy(checker.cases[0].args)), str)
    outcomes = []
    for label, (expected, fn) in submissions(checker).items():
        if expected == TOLERANCE:
            expected = RIGHT if bf16_ok else WRONG
        if words and expected == RIGHT and label != "the reference itself":
            expected = WRONG  # the answer is a word: these submissions return numbers instead
        if name in INTEGER_DTYPE and label in FLOAT_TENSORS:
            expected = WRONG
        try:
            with unwatched():
                verdict = (quick if label == "never returns" else checker)(fn)
        except BaseException as exc:  # a crash is what this battery exists to find
            outcomes.append(Outcome(name, label, expected, None, f"{type(exc).__name__}: {exc}"))
            continue
        outcomes.append(Outcome(name, label, expected, verdict))
    return tuple(outcomes)


NAMES = [n for n, _ in CHECKERS]


@pytest.mark.parametrize("name", NAMES)
def test_battery(name):
    checker = dict(CHECKERS)[name]
    assert accepts_reference(checker), f"the reference fails before the battery: {accepts_reference(checker)}"
    for out in run_battery(name):
        what = f"{name}, {out.submission!r}"
        assert out.crash is None, f"{what}: the checker raised {out.crash}"
        assert isinstance(out.verdict, Verdict)
        message = out.verdict.message
        assert message.startswith(checker.name + ": ") and len(message) <= LONGEST_MESSAGE, f"{what}: {message}"
        if out.expected == RIGHT:
            assert out.verdict, f"{what} should pass: {message}"
            continue
        assert not out.verdict, f"{what} passed although it is wrong: {message}"
        if out.expected == STUB:
            assert not out.verdict.attempted and "not attempted yet" in message
            continue
        assert out.verdict.attempted, f"{what} reads as not attempted: {message}"
        words = {
            "returns None": "returned None",
            "NotImplementedError from PyTorch": "raised NotImplementedError",
            "changes its inputs in place": "in place",
            "calls sys.exit()": "sys.exit()",
            "never returns": "did not return within",
        }
        if not isinstance(checker.reference(*copy.deepcopy(checker.cases[0].args)), str):
            words["meta tensor"] = "meta device"
        if out.submission in words:
            assert words[out.submission] in message, f"{what}: {message}"
        if name in INTEGER_DTYPE and out.submission in FLOAT_TENSORS:
            assert "expected integer positions" in message, f"{what}: {message}"
        if "integer" in out.submission and "2**64" in out.submission:
            assert str(2**64 + 5) in message, f"{what} must show the integer as it is: {message}"
    assert accepts_reference(checker), f"the reference fails after the battery: {accepts_reference(checker)}"


def test_every_reference_still_passes_after_every_battery():
    for name in NAMES:
        run_battery(name)  # already run above; run here if this test runs alone
    for name, checker in CHECKERS:
        assert accepts_reference(checker), f"{name}: {accepts_reference(checker)}"


def test_battery_size_and_counts():
    outcomes = [o for name in NAMES for o in run_battery(name)]
    crashes = [o for o in outcomes if o.crash is not None]
    false_passes = [o for o in outcomes if o.false_pass]
    print(f"\nbattery: {len(NAMES)} checkers, {len(outcomes)} submissions in all "
          f"({min(len(run_battery(n)) for n in NAMES)} to {max(len(run_battery(n)) for n in NAMES)} per checker); "
          f"crashes {len(crashes)}, false passes {len(false_passes)}")
    assert len(NAMES) >= 30 and len(outcomes) >= 30 * 20
    assert not crashes and not false_passes


# --- the time limit off the main thread, as on a platform without SIGALRM ---------------------------

def _in_thread(fn):
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("verdict", fn()))
    worker.start()
    worker.join(30)
    return result["verdict"]


def test_time_limit_and_sys_exit_work_off_the_main_thread():
    name, checker = CHECKERS[0]
    quick = dataclasses.replace(checker, time_limit=0.3)
    # Off the main thread the harness abandons an overrunning call, and Python cannot stop a thread: a
    # loop that truly never ended would spin, holding the GIL, for the rest of the test session and slow
    # every later test. This one stands in for it until the assertion is made, then ends.
    done = threading.Event()

    def loops_until_the_test_ends(*args):
        while not done.is_set():
            pass

    try:
        assert "did not return within 0.3 s" in _in_thread(lambda: quick(loops_until_the_test_ends)).message
    finally:
        done.set()
    assert "sys.exit()" in _in_thread(lambda: quick(lambda *a: sys.exit(1))).message
    with unwatched():
        assert _in_thread(lambda: quick(reference_answer(checker))), name
    assert not _in_thread(lambda: quick(_stub)).attempted
