"""attnbook.numpy.similarity against loops, its PyTorch twin and torch's built-ins."""

import numpy as np
import pytest
import torch

import attnbook.numpy as anp
import attnbook.torch as tb
from attnbook.data import toy_word_embeddings

rng = np.random.default_rng(0)


def loop_dot(u, v):
    return sum(float(a) * float(b) for a, b in zip(u, v, strict=True))


def loop_cosine(u, v):
    return loop_dot(u, v) / (loop_dot(u, u) ** 0.5 * loop_dot(v, v) ** 0.5)


@pytest.mark.parametrize("d", [1, 3, 64])
def test_dot_and_cosine_match_loops(d):
    u, v = rng.normal(size=d), rng.normal(size=d)
    assert anp.dot(u, v) == pytest.approx(loop_dot(u, v), rel=1e-12)
    assert anp.cosine_similarity(u, v) == pytest.approx(loop_cosine(u, v), rel=1e-12)


def test_batched_shapes_and_values():
    u, v = rng.normal(size=(2, 5, 7)), rng.normal(size=(2, 5, 7))
    cos = anp.cosine_similarity(u, v)
    assert cos.shape == (2, 5)
    assert cos[1, 3] == pytest.approx(loop_cosine(u[1, 3], v[1, 3]), rel=1e-12)
    assert anp.dot(u, v).shape == (2, 5)


def test_numpy_and_torch_twins_agree_with_torch_builtin():
    u, v = rng.normal(size=(6, 9)), rng.normal(size=(6, 9))
    ut, vt = torch.tensor(u), torch.tensor(v)
    builtin = torch.nn.functional.cosine_similarity(ut, vt, dim=-1)
    torch.testing.assert_close(tb.cosine_similarity(ut, vt), builtin, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(anp.cosine_similarity(u, v), builtin.numpy(), rtol=1e-12)
    np.testing.assert_allclose(anp.dot(u, v), tb.dot(ut, vt).numpy(), rtol=1e-12)


def test_pairwise_against_loop_and_twin_and_builtin():
    X, Y = rng.normal(size=(4, 3)), rng.normal(size=(6, 3))
    S = anp.pairwise_cosine_similarity(X, Y)
    assert S.shape == (4, 6)
    loop = np.array([[loop_cosine(x, y) for y in Y] for x in X])
    np.testing.assert_allclose(S, loop, rtol=1e-12)
    Xt, Yt = torch.tensor(X), torch.tensor(Y)
    builtin = torch.nn.functional.cosine_similarity(Xt[:, None], Yt[None, :], dim=-1)
    np.testing.assert_allclose(tb.pairwise_cosine_similarity(Xt, Yt).numpy(), builtin.numpy(), rtol=1e-12)
    np.testing.assert_allclose(S, builtin.numpy(), rtol=1e-12)


def test_cosine_ignores_length_and_stays_in_range():
    u = rng.normal(size=10)
    assert anp.cosine_similarity(u, 7.5 * u) == pytest.approx(1.0)
    assert anp.cosine_similarity(u, -0.1 * u) == pytest.approx(-1.0)
    # Clipping: nearly parallel vectors whose rounded cosine would exceed 1.
    big = np.full(1000, 0.1)
    assert abs(anp.cosine_similarity(big, big)) <= 1.0
    assert np.all(np.abs(anp.pairwise_cosine_similarity(rng.normal(size=(50, 3)), rng.normal(size=(40, 3)))) <= 1)


def test_integer_and_list_inputs_are_accepted():
    assert anp.dot([1, 2, 3], [4, 5, 6]) == 32.0
    assert anp.cosine_similarity([1, 0], [0, 3]) == 0.0
    assert float(tb.cosine_similarity(torch.tensor([1, 0]), torch.tensor([0, 3]))) == 0.0


@pytest.mark.parametrize("module", [anp, tb])
def test_shape_errors_name_the_shapes(module):
    as_array = np.asarray if module is anp else torch.as_tensor
    with pytest.raises(ValueError, match=r"same shape; got \(3,\) and \(4,\)"):
        module.cosine_similarity(as_array(np.ones(3)), as_array(np.ones(4)))
    with pytest.raises(ValueError, match=r"same shape; got \(2, 3\) and \(3,\)"):
        module.dot(as_array(np.ones((2, 3))), as_array(np.ones(3)))
    with pytest.raises(ValueError, match=r"same last dimension d; got shapes \(2, 3\) and \(4, 5\)"):
        module.pairwise_cosine_similarity(as_array(np.ones((2, 3))), as_array(np.ones((4, 5))))
    with pytest.raises(ValueError, match=r"X must have 2 dimensions.*got shape \(3,\)"):
        module.pairwise_cosine_similarity(as_array(np.ones(3)), as_array(np.ones((4, 3))))
    with pytest.raises(ValueError, match="zero vector"):
        module.cosine_similarity(as_array(np.zeros(3)), as_array(np.ones(3)))
    with pytest.raises(ValueError, match="zero vector"):
        module.pairwise_cosine_similarity(as_array(np.ones((2, 3))), as_array(np.zeros((1, 3))))
    with pytest.raises(ValueError, match=r"length d >= 1"):
        module.dot(as_array(np.ones((2, 0))), as_array(np.ones((2, 0))))


def test_non_numeric_input_is_rejected():
    with pytest.raises(ValueError, match="must hold numbers; got dtype bool"):
        anp.dot(np.array([True, False]), np.array([True, True]))
    with pytest.raises(ValueError, match="must hold real numbers; got dtype torch.bool"):
        tb.dot(torch.tensor([True, False]), torch.tensor([True, True]))


def test_nearest_orders_excludes_and_breaks_ties_by_index():
    E = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0]])
    assert list(anp.nearest(np.array([1.0, 0.1]), E, k=4)) == [0, 3, 2, 1]  # rows 0 and 3 tie
    assert list(anp.nearest(np.array([1.0, 0.1]), E, k=2, exclude=[0])) == [3, 2]
    with pytest.raises(ValueError, match="k must be between 1 and 3"):
        anp.nearest(np.array([1.0, 0.0]), E, k=4, exclude=[1])


def test_analogy_on_toy_embeddings():
    words, E = toy_word_embeddings()
    assert anp.analogy("man", "king", "woman", E, words) == "queen"
    assert anp.analogy("man", "boy", "woman", E, words) == "girl"
    assert anp.analogy("king", "prince", "queen", E, words) == "princess"


def test_analogy_leaves_out_question_words():
    # The target b - a + c equals b exactly here, so only the exclusion keeps b from winning.
    words = ["a", "b", "c", "d"]
    E = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.2, 1.0]])
    assert anp.analogy("a", "b", "c", E, words) == "d"


def test_analogy_errors():
    words, E = toy_word_embeddings()
    with pytest.raises(ValueError, match="'duke' is not in the vocabulary"):
        anp.analogy("man", "duke", "woman", E, words)
    with pytest.raises(ValueError, match=r"E has shape \(13, 4\) but 12 words were given"):
        anp.analogy("man", "king", "woman", E, words[:-1])


def test_toy_embeddings_are_deterministic_and_rounded():
    words, E = toy_word_embeddings()
    words2, E2 = toy_word_embeddings()
    assert words == words2 and np.array_equal(E, E2)
    assert E.shape == (len(words), 4)
    np.testing.assert_array_equal(E, np.round(E, 2))
