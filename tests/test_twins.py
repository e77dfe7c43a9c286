"""``attnbook.numpy`` and ``attnbook.torch`` mirror each other: every name they share has the same
parameters (names, order, kinds, defaults) and the same first line of its docstring."""

import inspect

import pytest

import attnbook.numpy as anp
import attnbook.torch as at

SHARED = sorted(set(anp.__all__) & set(at.__all__))


def test_the_twins_share_the_core_names():
    for name in ("softmax", "masked_softmax", "scaled_dot_product_attention", "causal_mask", "padding_mask",
                 "combine_masks", "multi_head_attention", "split_heads", "merge_heads", "grouped_query_attention",
                 "repeat_kv", "online_softmax", "tiled_attention", "cosine_similarity", "dot"):
        assert name in SHARED, f"{name} is missing from one of the twins"


def _parameters(fn) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("name", SHARED)
def test_twins_have_the_same_parameters(name):
    assert _parameters(getattr(anp, name)) == _parameters(getattr(at, name))


@pytest.mark.parametrize("name", SHARED)
def test_twins_have_the_same_first_docstring_line(name):
    first = [inspect.getdoc(getattr(m, name)).splitlines()[0] for m in (anp, at)]
    assert first[0] == first[1]


def test_mask_twins_agree_and_token_padding_matches_lengths():
    import numpy as np
    import torch

    for T_q, T_k in ((4, 4), (2, 5)):
        np.testing.assert_array_equal(at.causal_mask(T_q, T_k).numpy(), anp.causal_mask(T_q, T_k))
    lengths = np.array([5, 3, 0])
    np.testing.assert_array_equal(at.padding_mask(torch.tensor(lengths), 5).numpy(), anp.padding_mask(lengths, 5))
    ids = np.array([[4, 2, 7, 1, 3], [4, 2, 7, 0, 0], [0, 0, 0, 0, 0]])  # 0 pads the end of each row
    np.testing.assert_array_equal(anp.token_padding_mask(ids, 0), anp.padding_mask(lengths, 5))
    np.testing.assert_array_equal(at.token_padding_mask(torch.tensor(ids), 0).numpy(), anp.padding_mask(lengths, 5))
    both = at.combine_masks(at.causal_mask(5), at.padding_mask(torch.tensor(lengths), 5))
    np.testing.assert_array_equal(both.numpy(), anp.combine_masks(anp.causal_mask(5), anp.padding_mask(lengths, 5)))
