"""A checker refuses an answer that only calls the package's own implementation of what it asks for."""

import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnbook.numpy as anp
from attnbook.exercises._harness import Case, Checker, Mistake


def _reference(x):
    return anp.softmax(x, axis=-1)


CASES = [Case("a (2, 3) array", (np.arange(6.0).reshape(2, 3),)),
         Case("a (4,) vector", (np.array([1.0, -2.0, 0.5, 3.0]),))]
check = Checker(name="my_softmax", doc="Check ``fn(x) -> weights``: softmax over the last axis.", reference=_reference,
                cases=CASES, mistakes=(Mistake(lambda x: np.exp(x), "divide by the sum."),), forbidden=(anp.softmax,))


def own(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_an_answer_of_ones_own_passes():
    assert check(own), check(own).message


@pytest.mark.parametrize("answer", [
    lambda x: anp.softmax(x, axis=-1),                       # through the package's namespace
    lambda x: __import__("attnbook.numpy.softmax", fromlist=["softmax"]).softmax(x),  # through its module
    lambda x: (lambda f: f(x))(anp.softmax),                 # through an alias
], ids=["namespace", "module", "alias"])
def test_an_answer_that_calls_the_package_is_refused_and_told_why(answer):
    verdict = check(answer)
    assert not verdict
    assert "attnbook.numpy.softmax.softmax" in verdict.message and "the package's own" in verdict.message


def test_the_package_function_itself_is_refused():
    verdict = check(anp.softmax)
    assert not verdict and "not an answer" in verdict.message


def test_a_call_hidden_behind_a_caught_exception_is_still_seen():
    def sneaky(x):
        try:
            anp.softmax(x, axis="nonsense")
        except Exception:
            pass
        return own(x)
    assert not check(sneaky)


def test_the_reference_itself_and_calls_inside_it_are_refused():
    verdict = check(check.reference)
    assert not verdict and "the checker's own reference" in verdict.message and "not an answer" in verdict.message
    verdict = check(lambda x: check.reference(x))
    assert not verdict and "the checker's own reference" in verdict.message
    assert "test_checker_forbidden._reference" in verdict.message


def test_the_watch_works_off_the_main_thread_and_is_removed_afterwards():
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("v", check(lambda x: anp.softmax(x, axis=-1))))
    t.start()
    t.join()
    assert not out["v"]
    assert threading.current_thread() is threading.main_thread()
    import sys
    assert sys.getprofile() is None


def test_a_forbidden_builtin_is_seen():
    def ref(q, k, v):
        w = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
        return w @ v

    g = torch.Generator().manual_seed(0)
    args = tuple(torch.randn(2, 3, 4, generator=g, dtype=torch.float64) for _ in range(3))
    checker = Checker(name="attend", doc="Check ``fn(q, k, v) -> out``.", reference=ref, cases=[Case("q, k, v", args)],
                      forbidden=(F.scaled_dot_product_attention,))
    def own_attend(q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1) @ v

    assert checker(own_attend)
    verdict = checker(lambda q, k, v: F.scaled_dot_product_attention(q, k, v))
    assert not verdict and "scaled_dot_product_attention" in verdict.message


def test_the_reference_cannot_be_forbidden():
    with pytest.raises(ValueError, match="reference cannot be one of its forbidden"):
        Checker(name="x", doc="Check ``fn(x) -> y``.", reference=anp.softmax, cases=CASES, forbidden=(anp.softmax,))
