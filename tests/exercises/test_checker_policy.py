"""Delegation is refused by policy: while the learner's function runs, a call into the book's package (the
checker's own reference and the chapters' functions), SciPy, scikit-learn, Hugging Face transformers,
torch.func or forward-mode automatic differentiation is refused with a sentence that names the call, says
why, and states what the exercise allows. Every checker is tried with its own reference, the package's
function of the same name (where there is one) and forward-mode AD; then the delegations found in the
audits of the exercises, one by one."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np
import pytest
import torch

import attnbook
from attnbook.exercises import (
    check_cross_attention_grads,
    check_gpt_forward,
    check_log_softmax_rows,
    check_lora_grad_a,
    check_mha_input_grad,
    check_my_mha,
    check_neighbours,
    check_polar_from_gram,
    check_softmax_rows,
    check_tied_head_grad,
)
from attnbook.exercises._harness import Case, Checker, Outcome, chapter_checkers

CHECKERS = [(name, c) for name, c, _ in chapter_checkers()]
IDS = [name for name, _ in CHECKERS]


def _package_functions() -> dict[str, object]:
    """Every public function of the package, by name (the first module to define it wins)."""
    found: dict[str, object] = {}
    for info in pkgutil.walk_packages(attnbook.__path__, "attnbook."):
        if ".exercises" in info.name or info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception:  # a module needing something not installed here: nobody can call it
            continue
        for key, value in vars(module).items():
            if inspect.isfunction(value) and not key.startswith("_") and value.__module__.startswith("attnbook"):
                found.setdefault(key, value)
    return found


PACKAGE = _package_functions()


def _same_name(checker: Checker):
    for name in (checker.name, checker.name.removesuffix("_by_hand")):
        if name in PACKAGE:
            return PACKAGE[name]
    return None


def _entering(f):
    """An answer that calls ``f``, with the case's arguments where they fit, else with placeholders: the call
    is entered either way, so the watch sees it."""
    def answer(*args):
        try:
            inspect.signature(f).bind(*args)
            f(*args)
        except TypeError:
            required = [p for p in inspect.signature(f).parameters.values()
                        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            try:
                f(*[None] * len(required))
            except Exception:
                pass
        except Exception:
            pass
        return None
    return answer


def _forward_mode(*args):
    import torch.autograd.forward_ad as fwAD

    with fwAD.dual_level():
        fwAD.make_dual(torch.zeros(1, dtype=torch.float64), torch.ones(1, dtype=torch.float64))
    return None


def _refused(verdict, *words):
    assert not verdict, verdict.message
    assert verdict.outcome is Outcome.REFUSED, verdict.message
    assert verdict.message.rstrip().endswith(".") and "Allowed here:" in verdict.message, verdict.message
    for word in words:
        assert word in verdict.message, verdict.message


@pytest.mark.parametrize(("name", "checker"), CHECKERS, ids=IDS)
def test_every_checker_refuses_its_reference_the_package_function_and_forward_mode(name, checker):
    verdict = checker(checker.reference)
    assert not verdict and verdict.outcome is Outcome.REFUSED and "not an answer" in verdict.message, verdict.message
    ref = checker.reference
    _refused(checker(lambda *args: ref(*args)), "calls `attnbook.", "the checker's own reference")
    same = _same_name(checker)
    if same is not None:
        _refused(checker(_entering(same)), f".{same.__name__}`")
    _refused(checker(_forward_mode), "forward-mode automatic differentiation", "derivatives")


def test_the_package_has_a_function_of_the_same_name_for_many_checkers():
    assert sum(_same_name(c) is not None for _, c in CHECKERS) >= 4


def test_the_refusal_states_the_exercises_allowances():
    verdict = check_cross_attention_grads(_forward_mode)
    assert "`attnbook.numpy.attention.masked_softmax`" in verdict.message
    assert "the functions and objects the check passes to your function" in verdict.message


def test_the_checks_own_calls_of_its_reference_stay_allowed():
    # the checker computes the expected answers with its reference, outside the watch: a correct answer
    # written from the operations passes, and the reference's own package calls are not held against it
    def softmax_rows(S):
        e = np.exp(S - S.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    assert check_softmax_rows(softmax_rows)


# --- the delegations the audits found, each refused -------------------------------------------------------

def test_chapter_19s_finite_differences_answer_no_backward_pass():
    from attnbook.numpy.backprop import numerical_gradient

    for checker in (check_mha_input_grad, check_tied_head_grad):
        _refused(checker(_entering(numerical_gradient)), "numerical_gradient", "the book's own package")


def test_chapter_19s_numpy_gpt_does_not_answer_the_part_ii_capstone():
    from attnbook.numpy.backprop import gpt_forward

    _refused(check_gpt_forward(_entering(gpt_forward)), "attnbook.numpy.backprop.gpt.gpt_forward")


def test_hugging_faces_gpt2_does_not_answer_the_part_ii_capstone():
    import transformers

    class ThroughGPT2(torch.nn.Module):
        def __init__(self, vocab_size, block_size, n_layers, n_heads, d_model):
            super().__init__()
            self.hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(
                vocab_size=vocab_size, n_positions=block_size, n_layer=n_layers, n_head=n_heads, n_embd=d_model))

        def forward(self, ids):
            return self.hf(ids).logits

    def load(model, hf_state_dict):
        model.hf.load_state_dict(hf_state_dict)

    _refused(check_gpt_forward({"GPT": ThroughGPT2, "load_gpt2": load}), "Hugging Face transformers")


@pytest.mark.parametrize("checker", [check_lora_grad_a, check_mha_input_grad], ids=["27-grad-a", "19-debug"])
def test_forward_mode_through_torch_func_is_refused(checker):
    def jacfwd(*args):
        torch.func.jacfwd(torch.sin)(torch.zeros(2, dtype=torch.float64))
        return None

    _refused(checker(jacfwd), "from torch.func")
    _refused(checker(_forward_mode), "torch.autograd.forward_ad")


def test_scipy_and_scikit_learn_answer_nothing():
    import scipy.linalg as linalg
    import scipy.special as special
    import sklearn.neighbors as neighbors

    def by_sklearn(E, k):
        found = neighbors.NearestNeighbors(n_neighbors=k + 1, metric="cosine").fit(E)
        return found.kneighbors(E, return_distance=False)[:, 1:]

    _refused(check_neighbours(by_sklearn), "from scikit-learn")
    _refused(check_softmax_rows(lambda S: special.softmax(S, axis=1)), "from SciPy")
    _refused(check_log_softmax_rows(lambda S: special.log_softmax(S, axis=1)), "from SciPy")
    _refused(check_log_softmax_rows(lambda S: S - special.logsumexp(S, axis=1, keepdims=True)), "from SciPy")
    verdict = check_my_mha({"my_softmax": lambda s: special.softmax(s, axis=-1)})
    assert not verdict and "`my_softmax`" in verdict.message and "from SciPy" in verdict.message, verdict.message
    assert verdict.outcome is Outcome.REFUSED

    def polar_by_sqrtm(G):
        return G @ np.linalg.inv(linalg.sqrtm(G.T @ G)).real

    _refused(check_polar_from_gram(polar_by_sqrtm), "from SciPy")


def test_an_allowance_is_honoured_and_only_for_its_exercise():
    from attnbook.numpy import softmax

    def attend(x):  # chapter 3's exercise allows the package's softmax; chapter 2's softmax exercise does not
        return softmax(x, axis=1)

    verdict = check_softmax_rows(attend)
    _refused(verdict, "attnbook.numpy.softmax.softmax")
    own = Checker(name="f", doc="Check ``fn(x) -> y``.", reference=lambda x: softmax(x, axis=1),
                  cases=[Case("x", (np.arange(6.0).reshape(2, 3),))], allowed=(softmax,))
    assert own(attend), own(attend).message
    assert "`attnbook.numpy.softmax.softmax`" in own.allowances()


def test_a_refused_call_counts_even_when_the_answer_raises_afterwards():
    from attnbook.numpy import softmax

    def raises_after(S):
        softmax(S)
        raise ValueError("later")

    _refused(check_softmax_rows(raises_after), "attnbook.numpy.softmax.softmax")
