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
