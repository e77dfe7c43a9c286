"""The explorers of chapters 5, 7 and 9 draw what the chapters compute: weights and scores are checked
against the formulas evaluated directly (and against the package's attention where it applies)."""

import math

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest

from attnbook.numpy import (
    AdditiveScore,
    BilinearScore,
    DotScore,
    GatedScore,
    ScaledDotScore,
    single_query_attention,
)
from attnbook.plotting import plot_query_map, plot_score_landscape, rotation
from attnbook.widgets import controls, head_explorer, query_map_explorer, score_landscape_explorer


def direct_softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max())
    return e / e.sum()


def bar_heights(ax) -> np.ndarray:
    return np.array([p.get_height() for p in ax.patches])


# Chapter 5's two-dimensional example.
E2 = np.array([1.0, 0.3])
Z2 = np.array([[0.9, 0.5], [-0.4, 1.0], [0.2, -1.0]])
WQ2 = np.array([[0.2, 1.2], [1.0, -0.3]])
WK2 = np.array([[-1.2, -1.3], [1.0, -0.4]])
WV2 = np.array([[1.0, -0.6], [0.4, 0.9]])


def test_rotation_turns_row_vectors_counterclockwise():
    for angle in (0.0, 30.0, 90.0, -135.0, 180.0):
        t = math.radians(angle)
        np.testing.assert_allclose(np.array([1.0, 0.0]) @ rotation(angle), [math.cos(t), math.sin(t)], atol=1e-15)
        np.testing.assert_allclose(rotation(angle) @ rotation(angle).T, np.eye(2), atol=1e-15)


@pytest.mark.parametrize(("angle", "scale"), [(0.0, 1.0), (90.0, 2.0), (-150.0, 0.25), (180.0, 3.0)])
def test_query_map_weights_are_single_query_attention_with_the_turned_map(angle, scale):
    fig, (ax_space, ax_weights) = plt.subplots(1, 2)
    alpha = plot_query_map(ax_space, ax_weights, E2, Z2, WQ2, WK2, angle, scale)
    zeros = np.zeros(2)
    W_q = scale * WQ2 @ rotation(angle)
    _, expected = single_query_attention(E2, Z2, W_q, zeros, WK2, zeros, WV2, zeros)
    np.testing.assert_allclose(alpha, expected, rtol=1e-12)
    np.testing.assert_allclose(bar_heights(ax_weights), expected, rtol=1e-12)
    assert ax_space.get_xlabel() and ax_space.get_ylabel() and ax_weights.get_xlabel() and ax_weights.get_ylabel()


def test_query_map_explorer_controls_and_redraw():
    box = query_map_explorer(E2, Z2, WQ2, WK2)
    assert controls(box) == {"rotate W_q (degrees)": (-180.0, 180.0, 0.0), "scale W_q": (0.25, 3.0, 1.0)}
    angle, scale = box.children[0].children
    assert isinstance(box.children[1], widgets.Output)
    angle.value, scale.value = 180.0, 2.0
    ax_weights = plt.gcf().axes[1]
    q = E2 @ (-2.0 * WQ2)  # a half turn negates the map
    np.testing.assert_allclose(bar_heights(ax_weights), direct_softmax(Z2 @ WK2 @ q / math.sqrt(2)), atol=1e-12)


def landscape_scorers() -> dict:
    rng = np.random.default_rng(5)
    return {
        "dot": DotScore(),
        "scaled dot": ScaledDotScore(),
        "multiplicative": BilinearScore(rng.normal(size=(2, 2))),
        "additive": AdditiveScore(rng.normal(size=(2, 6)), rng.normal(size=(2, 6)), rng.normal(size=6),
                                  rng.normal(size=6)),
        "gated": GatedScore(rng.normal(size=4), 0.3),
    }


def direct_score(name: str, scorer, q: np.ndarray, k: np.ndarray) -> float:
    """One score from its formula in chapter 7's table, for one query and one key."""
    if name == "dot":
        return float(q @ k)
    if name == "scaled dot":
        return float(q @ k / math.sqrt(2))
    if name == "multiplicative":
        return float(q @ scorer.W @ k)
    if name == "additive":
        return float(scorer.v @ np.tanh(q @ scorer.W_q + k @ scorer.W_k + scorer.b))
    gate = 1.0 / (1.0 + math.exp(-(np.concatenate([q, k]) @ scorer.w_g + scorer.b_g)))
    return gate * float(q @ k) / math.sqrt(2)


@pytest.mark.parametrize("name", ["dot", "scaled dot", "multiplicative", "additive", "gated"])
def test_score_landscape_is_the_score_of_every_grid_key(name):
    scorer = landscape_scorers()[name]
    q = np.array([0.7, -1.2])
    fig, ax = plt.subplots()
    S = plot_score_landscape(ax, scorer, q, name, limit=2.0, n=9)
    grid = np.linspace(-2.0, 2.0, 9)
    expected = np.array([[direct_score(name, scorer, q, np.array([x, y])) for x in grid] for y in grid])
    np.testing.assert_allclose(S, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ax.images[0].get_array(), expected, rtol=1e-12, atol=1e-12)
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title() == name


def test_score_landscape_explorer_controls_and_redraw():
    scorers = landscape_scorers()
    box = score_landscape_explorer(scorers, length=1.5)
    assert controls(box) == {"score": (tuple(scorers), "dot"), "query direction (degrees)": (0.0, 345.0, 30.0),
                             "query length": (0.25, 3.0, 1.5)}
    which = box.children[0]
    angle, length = box.children[1].children
    which.value, angle.value, length.value = "additive", 90.0, 2.0
    image = plt.gcf().axes[0].images[0].get_array()
    q = np.array([0.0, 2.0])
    grid = np.linspace(-2.0, 2.0, 81)
    for i, j in [(0, 0), (40, 40), (80, 3), (17, 62)]:
        key = np.array([grid[j], grid[i]])
        assert image[i, j] == pytest.approx(direct_score("additive", scorers["additive"], q, key), abs=1e-12)


# Chapter 9's sentence and heads.
TOKENS = ["the", "bank", "of", "the", "river"]
X9 = np.array([[1.0, 0, 0, 0], [0, 1.0, 0.3, 0.3], [0, 0, 0, 0], [1.0, 0, 0, 0], [0, 1.0, 1.0, 0]])
HEADS = {
    "topic head": (np.array([[0], [1], [0], [0.0]]), np.array([[0], [0], [1], [1.0]])),
    "grammar head": (np.array([[0], [1], [0], [0.0]]), np.array([[1], [0], [0], [0.0]])),
}


def test_head_explorer_controls_and_weights():
    box = head_explorer(X9, TOKENS, HEADS, sharpness=4.0)
    assert controls(box) == {"head": (("topic head", "grammar head"), "topic head"),
                             "query token": (("0: the", "1: bank", "2: of", "3: the", "4: river"), "1: bank"),
                             "sharpening factor s": (0.0, 8.0, 4.0)}
    head, token = box.children[0].children
    factor = box.children[1]
    for name, label, s in [("topic head", "1: bank", 4.0), ("grammar head", "4: river", 2.5),
                           ("grammar head", "1: bank", 0.0), ("topic head", "0: the", 6.0)]:
        head.value, token.value, factor.value = name, label, s
        i = int(label.split(":")[0])
        W_q, W_k = HEADS[name]
        expected = direct_softmax(s * (X9[i] @ W_q) @ (X9 @ W_k).T)
        ax = plt.gcf().axes[0]
        np.testing.assert_allclose(bar_heights(ax), expected, atol=1e-12)
        assert ax.get_xlabel() and ax.get_ylabel()
        plt.close("all")
