"""Chapter 15's checkers: answers computed another way pass; delegating answers and plausible wrong ones fail,
with the part or the package function named."""

import math

import torch
import torch.nn.functional as F
from transformers.generation.logits_process import TopPLogitsWarper

import attnbook.torch as at
from attnbook.exercises import check_gpt_forward, check_gpt_parameters, check_top_k_filter, check_top_p_filter
from attnbook.exercises.ch15 import _model_of


def top_p_by_loop(logits, p):
    # token by token: keep it when the tokens strictly likelier than it hold less than p
    probs = torch.softmax(logits.double(), dim=-1)
    out = logits.clone()
    for b in range(logits.shape[0]):
        for i in range(logits.shape[1]):
            if probs[b][logits[b] > logits[b, i]].sum() >= p:
                out[b, i] = float("-inf")
    return out


def test_top_p_computed_another_way_passes():
    assert check_top_p_filter(top_p_by_loop)


def test_top_p_delegating_to_transformers_is_refused_by_name():
    def delegating(logits, p):
        return TopPLogitsWarper(top_p=p)(None, logits)

    verdict = check_top_p_filter(delegating)
    assert not verdict and "TopPLogitsWarper" in verdict.message


def test_top_p_that_forgets_the_first_token_when_p_is_tiny_is_refused():
    # a sorted running total, inclusive, that keeps "at least one" token only when p is tiny: still drops the
    # token that crosses p everywhere else
    def inclusive(logits, p):
        probs = torch.softmax(logits, dim=-1)
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        cum = torch.cumsum(probs.gather(-1, order), dim=-1)
        n = (cum < p).sum(-1, keepdim=True).clamp(min=1)
        return logits.masked_fill(logits < sorted_logits.gather(-1, n - 1), float("-inf"))

    assert not check_top_p_filter(inclusive)


def test_top_k_delegating_is_refused_and_a_positional_filter_fails_on_ties():
    verdict = check_top_k_filter(lambda logits, k: at.top_k_filter(logits, k))
    assert not verdict and "top_k_filter" in verdict.message

    def by_sort_position(logits, k):  # keeps the first k positions of a sort: splits a tie
        order = torch.argsort(logits, dim=-1, descending=True)
        keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, order[:, :k], True)
        return torch.where(keep, logits, torch.full_like(logits, float("-inf")))

    verdict = check_top_k_filter(by_sort_position)
    assert not verdict and "tie" in verdict.message


def test_gpt_parameters_counted_from_the_shapes_passes_and_building_the_model_is_refused():
    def by_shapes(V, block_size, d_model, n_layers, d_ff, tied):
        d = d_model
        shapes = [(d, d), (d,)] * 4 + [(d, d_ff), (d_ff,), (d_ff, d), (d,)] + [(d,)] * 4  # one block's tensors
        block = sum(math.prod(s) for s in shapes)
        return n_layers * block + V * d + block_size * d + 2 * d + (0 if tied else d * V)

    assert check_gpt_parameters(by_shapes)

    def by_model(V, block_size, d_model, n_layers, d_ff, tied):
        model = at.GPT(at.GPTConfig(vocab_size=V, block_size=block_size, n_layers=n_layers, n_heads=1,
                                    d_model=d_model, d_ff=d_ff, tie_embeddings=tied))
        return sum(p.numel() for p in model.parameters())

    verdict = check_gpt_parameters(by_model)
    assert not verdict and "GPTConfig.__init__" in verdict.message and "the book's own package" in verdict.message

    def forgets_positions(V, block_size, d_model, n_layers, d_ff, tied):
        d = d_model
        return n_layers * (4 * d * d + 4 * d + 2 * d * d_ff + d_ff + d + 4 * d) + V * d + 2 * d + (0 if tied else V * d)

    assert not check_gpt_parameters(forgets_positions)


# --- the capstone ---------------------------------------------------------------------------------------


def gpt_forward(state_dict, ids, n_heads, trace=None, mlp_bias=True):
    sd = state_dict

    def norm(x, name):
        return F.layer_norm(x, x.shape[-1:], sd[f"{name}.gamma"], sd[f"{name}.beta"], eps=1e-5)

    def note(key, value):
        if trace is not None:
            trace[key] = value
        return value

    B, T = ids.shape
    d = sd["tok.E"].shape[1]
    x = note("embeddings", F.embedding(ids, sd["tok.E"]) + sd["pos.P"][:T])
    for i in range(sum(k.endswith("norm1.gamma") for k in sd)):
        p = f"blocks.{i}"
        h = norm(x, f"{p}.norm1")
        # one fused projection, heads by einsum: another way to the same numbers
        W = torch.cat([sd[f"{p}.self_attn.{n}_proj.W"] for n in "qkv"], dim=1)
        b = torch.cat([sd[f"{p}.self_attn.{n}_proj.b"] for n in "qkv"])
        q, k, v = (h @ W + b).split(d, dim=-1)
        q, k, v = (t.reshape(B, T, n_heads, d // n_heads) for t in (q, k, v))
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d // n_heads)
        scores = scores + torch.full((T, T), float("-inf"), dtype=scores.dtype).triu(1)
        out = torch.einsum("bhqk,bkhd->bqhd", F.softmax(scores, dim=-1), v).reshape(B, T, d)
        x = note(f"block{i}.attention", x + out @ sd[f"{p}.self_attn.out_proj.W"] + sd[f"{p}.self_attn.out_proj.b"])
        u = F.gelu(norm(x, f"{p}.norm3") @ sd[f"{p}.ff.fc1.W"] + sd[f"{p}.ff.fc1.b"], approximate="tanh")
        x = note(f"block{i}.mlp", x + u @ sd[f"{p}.ff.fc2.W"] + (sd[f"{p}.ff.fc2.b"] if mlp_bias else 0))
    x = note("final_norm", norm(x, "norm"))
    return note("logits", x @ sd["tok.E"].T)


def test_gpt_forward_written_another_way_passes():
    assert check_gpt_forward(gpt_forward), check_gpt_forward(gpt_forward).message


def test_gpt_forward_delegating_to_the_package_model_is_refused_by_name():
    verdict = check_gpt_forward(lambda sd, ids, n_heads, trace=None: _model_of(sd, n_heads)(ids))
    assert not verdict and "the book's own package" in verdict.message

    def torch_attention(sd, ids, n_heads, trace=None):  # F.scaled_dot_product_attention for the attention
        F.scaled_dot_product_attention(torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 2, 2))
        return gpt_forward(sd, ids, n_heads)

    verdict = check_gpt_forward(torch_attention)
    assert not verdict and "scaled_dot_product_attention" in verdict.message


def test_a_wrong_mlp_is_traced_to_its_block_and_part():
    verdict = check_gpt_forward(lambda sd, ids, n_heads, trace=None: gpt_forward(sd, ids, n_heads, trace, False))
    assert not verdict and "The first part that disagrees is block0.mlp" in verdict.message


def test_a_forward_that_only_runs_full_windows_fails_the_greedy_continuation():
    def fixed_length(sd, ids, n_heads, trace=None):
        if ids.shape[1] == 1:  # as if a length-1 input lost its time axis on the way
            ids = ids.squeeze(1)
        return gpt_forward(sd, ids, n_heads, trace)

    verdict = check_gpt_forward(fixed_length)
    assert not verdict and "greedy continuation" in verdict.message


def test_a_wrong_answer_without_a_trace_is_told_to_fill_one():
    verdict = check_gpt_forward(lambda sd, ids, n_heads, trace=None: gpt_forward(sd, ids, n_heads) * 1.01)
    assert not verdict and "fill the dict passed as `trace`" in verdict.message
