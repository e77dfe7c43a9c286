"""Chapter 15's checkers: answers computed another way pass; delegating answers and plausible wrong ones fail,
with the part or the package function named."""

import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers.generation.logits_process import TopPLogitsWarper

import attnbook.torch as at
from attnbook.exercises import check_gpt_forward, check_gpt_parameters, check_top_k_filter, check_top_p_filter
from attnbook.exercises._harness import Outcome


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


# --- the capstone: a GPT of one's own modules, loaded with GPT-2's weights ---------------------------------
# An answer written another way than the chapter's: separate query, key and value projections, heads by
# einsum, the MLP as named modules. Options make the typical mistakes.


class Attention(nn.Module):
    def __init__(self, d, n_heads, causal=True):
        super().__init__()
        self.n_heads, self.causal = n_heads, causal
        self.q, self.k, self.v, self.out = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        B, T, d = x.shape
        q, k, v = (f(x).reshape(B, T, self.n_heads, d // self.n_heads) for f in (self.q, self.k, self.v))
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d // self.n_heads)
        if self.causal:
            scores = scores + torch.full((T, T), float("-inf")).triu(1)
        return self.out(torch.einsum("bhqk,bkhd->bqhd", F.softmax(scores, dim=-1), v).reshape(B, T, d))


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        return self.down(F.gelu(self.up(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, d, n_heads, causal=True):
        super().__init__()
        self.norm_a, self.norm_m = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn, self.mlp = Attention(d, n_heads, causal), MLP(d)

    def forward(self, x):
        x = x + self.attn(self.norm_a(x))
        return x + self.mlp(self.norm_m(x))


class Mine(nn.Module):
    causal, final_norm = True, True

    def __init__(self, vocab_size, block_size, n_layers, n_heads, d_model):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab_size, d_model), nn.Embedding(block_size, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, self.causal) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)

    def forward(self, ids):
        x = self.tokens(ids) + self.positions(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        return (self.ln_f(x) if self.final_norm else x) @ self.tokens.weight.T


class NotCausal(Mine):
    causal = False


class WithoutFinalNorm(Mine):
    final_norm = False


def load(model, hf, transpose=True, order="qkv"):
    sd = {k.removeprefix("transformer."): v for k, v in hf.items()}
    with torch.no_grad():
        model.tokens.weight.copy_(sd["wte.weight"])
        model.positions.weight.copy_(sd["wpe.weight"])
        model.ln_f.weight.copy_(sd["ln_f.weight"])
        model.ln_f.bias.copy_(sd["ln_f.bias"])
        for i, block in enumerate(model.blocks):
            h = f"h.{i}."
            for norm, name in ((block.norm_a, "ln_1"), (block.norm_m, "ln_2")):
                norm.weight.copy_(sd[h + name + ".weight"])
                norm.bias.copy_(sd[h + name + ".bias"])
            weights = dict(zip(order, sd[h + "attn.c_attn.weight"].chunk(3, dim=1), strict=True))
            biases = dict(zip(order, sd[h + "attn.c_attn.bias"].chunk(3), strict=True))
            for name in "qkv":
                getattr(block.attn, name).weight.copy_(weights[name].T if transpose else weights[name])
                getattr(block.attn, name).bias.copy_(biases[name])
            block.attn.out.weight.copy_(sd[h + "attn.c_proj.weight"].T)
            block.attn.out.bias.copy_(sd[h + "attn.c_proj.bias"])
            block.mlp.up.weight.copy_(sd[h + "mlp.c_fc.weight"].T)
            block.mlp.up.bias.copy_(sd[h + "mlp.c_fc.bias"])
            block.mlp.down.weight.copy_(sd[h + "mlp.c_proj.weight"].T)
            block.mlp.down.bias.copy_(sd[h + "mlp.c_proj.bias"])


ANSWER = {"GPT": Mine, "load_gpt2": load}


def test_a_gpt_of_ones_own_modules_written_another_way_passes():
    verdict = check_gpt_forward(ANSWER)
    assert verdict, verdict.message


def test_a_mapping_that_forgets_to_transpose_conv1d_is_named():
    verdict = check_gpt_forward({**ANSWER, "load_gpt2": lambda m, hf: load(m, hf, transpose=False)})
    assert not verdict and "block 0's attention" in verdict.message, verdict.message
    assert "suspect load_gpt2: its query, key and value weights are not transposed" in verdict.message


def test_a_mapping_that_swaps_keys_and_values_is_named():
    verdict = check_gpt_forward({**ANSWER, "load_gpt2": lambda m, hf: load(m, hf, order="qvk")})
    assert not verdict and "suspect load_gpt2: it swaps the keys and the values" in verdict.message, verdict.message


def test_a_gpt_without_the_final_norm_is_named():
    verdict = check_gpt_forward({**ANSWER, "GPT": WithoutFinalNorm})
    assert not verdict and "Your `ln_f` did not run" in verdict.message, verdict.message


def test_an_attention_without_the_causal_mask_is_named():
    verdict = check_gpt_forward({**ANSWER, "GPT": NotCausal})
    assert not verdict and "block 0" in verdict.message and "(the causal mask)" in verdict.message, verdict.message


def test_a_model_without_the_names_the_checker_hooks_is_told_which():
    class Renamed(Mine):
        def __init__(self, **sizes):
            super().__init__(**sizes)
            self.final = self.ln_f
            del self.ln_f

        def forward(self, ids):
            x = self.tokens(ids) + self.positions(torch.arange(ids.shape[1]))
            for block in self.blocks:
                x = block(x)
            return self.final(x) @ self.tokens.weight.T * 1.01

    def loader(model, hf):  # copies ln_f's weights into model.final
        model.ln_f = model.final
        load(model, hf)
        del model.ln_f

    verdict = check_gpt_forward({"GPT": Renamed, "load_gpt2": loader})
    assert not verdict and "`ln_f`" in verdict.message and "did not find it" in verdict.message, verdict.message


def test_the_package_gpt_inside_the_answer_is_refused():
    class Wrapper(nn.Module):
        def __init__(self, vocab_size, block_size, n_layers, n_heads, d_model):
            super().__init__()
            self.inner = at.GPT(at.GPTConfig(vocab_size=vocab_size, block_size=block_size, n_layers=n_layers,
                                             n_heads=n_heads, d_model=d_model))

        def forward(self, ids):
            return self.inner(ids)

    verdict = check_gpt_forward({"GPT": Wrapper, "load_gpt2": lambda m, hf: None})
    assert not verdict and verdict.outcome is Outcome.REFUSED, verdict.message
    assert "attnbook.torch.transformer.GPT" in verdict.message and "the book's own package" in verdict.message


def test_gpt_from_gpt2_as_the_loader_is_refused():
    from attnbook.interop import gpt_from_gpt2

    def through_interop(model, hf):
        gpt_from_gpt2(hf)

    verdict = check_gpt_forward({**ANSWER, "load_gpt2": through_interop})
    assert not verdict and verdict.outcome is Outcome.REFUSED, verdict.message
    assert "gpt_from_gpt2" in verdict.message


def test_transformers_blocks_built_in_the_answer_are_refused_even_unused():
    from transformers import GPT2Config
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    block = GPT2Block(GPT2Config(n_embd=8, n_head=2))

    class Holding(Mine):
        def __init__(self, **sizes):
            super().__init__(**sizes)
            self.spare = block  # built outside the watch, never called: only the module tree shows it

    verdict = check_gpt_forward({**ANSWER, "GPT": Holding})
    assert not verdict and verdict.outcome is Outcome.REFUSED, verdict.message
    assert "GPT2Block" in verdict.message and "Hugging Face transformers" in verdict.message


def test_pytorch_multihead_attention_in_the_answer_is_refused():
    class Ready(Mine):
        def __init__(self, **sizes):
            super().__init__(**sizes)
            self.helper = nn.MultiheadAttention(8, 2)

    verdict = check_gpt_forward({**ANSWER, "GPT": Ready})
    assert not verdict and "MultiheadAttention" in verdict.message and "ready-made" in verdict.message


def test_the_dict_must_hold_both_parts():
    verdict = check_gpt_forward({"GPT": Mine})
    assert not verdict and verdict.outcome is Outcome.WRONG_FORM and "'load_gpt2'" in verdict.message


def test_a_stub_reads_as_not_attempted():
    class Stub(nn.Module):
        def __init__(self, *args, **kwargs):
            super().__init__()
            raise NotImplementedError

    verdict = check_gpt_forward({**ANSWER, "GPT": Stub})
    assert not verdict and not verdict.attempted, verdict.message


def test_a_forward_that_only_runs_full_windows_fails_the_greedy_continuation():
    class FullWindows(Mine):
        def forward(self, ids):
            if ids.shape[1] == 1:  # as if a length-1 input lost its time axis on the way
                ids = ids.squeeze(1)
            return super().forward(ids)

    verdict = check_gpt_forward({**ANSWER, "GPT": FullWindows})
    assert not verdict and "greedy continuation" in verdict.message, verdict.message


def test_the_check_leaves_the_global_seed_alone():
    torch.manual_seed(5)
    want = torch.rand(3)
    torch.manual_seed(5)
    check_gpt_forward(ANSWER)
    assert torch.equal(torch.rand(3), want)
