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


@pytest.mark.parametrize("side", ["numpy", "torch"])
def test_multi_head_attention_is_grouped_query_attention_with_a_key_value_head_per_head(side, monkeypatch):
    # One attention function per twin: multi-head attention hands its arguments to grouped-query attention
    # with n_kv_heads = n_heads, and the two twins of that one function agree.
    import importlib

    import numpy as np
    import torch

    module = importlib.import_module(f"attnbook.{side}.multihead")
    calls, real = [], module.grouped_query_attention
    monkeypatch.setattr(module, "grouped_query_attention", lambda *a: calls.append(a[3:5]) or real(*a))
    params = anp.grouped_query_params(12, 3, 3, seed=2)
    X = np.random.default_rng(3).normal(size=(2, 4, 12))
    if side == "torch":
        params = type("P", (), {k: torch.from_numpy(v) for k, v in vars(params).items()})()
        X = torch.from_numpy(X)
    out, weights = module.multi_head_attention(X, X, params, 3)
    assert calls == [(3, 3)]
    assert weights.shape == (2, 3, 4, 4)


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_grouped_query_twins_agree(n_kv_heads):
    import numpy as np
    import torch

    p = anp.grouped_query_params(16, 4, n_kv_heads, seed=5)
    rng = np.random.default_rng(6)
    X_q, X_kv = rng.normal(size=(3, 5, 16)), rng.normal(size=(3, 7, 16))
    mask = rng.random((3, 5, 7)) > 0.4
    mask[..., 0] = True
    want = anp.grouped_query_attention(X_q, X_kv, p, 4, n_kv_heads, mask)
    tp = type("P", (), {k: torch.from_numpy(v) for k, v in vars(p).items()})()
    got = at.grouped_query_attention(torch.from_numpy(X_q), torch.from_numpy(X_kv), tp, 4, n_kv_heads,
                                     torch.from_numpy(mask))
    for a, b in zip(want, got, strict=True):
        np.testing.assert_allclose(b.numpy(), a, rtol=1e-12, atol=1e-12)
