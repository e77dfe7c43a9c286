"""Checkers for the coding exercises of chapter 15 (the whole Transformer)."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

import attnbook.torch as at
from attnbook.exercises._capstone import PartsChecker
from attnbook.exercises._harness import Case, Checker, Mistake, _TimedOut
from attnbook.torch import GPT, GPTConfig
from attnbook.torch.decoding import top_k_filter

# --- top-k, ties included --------------------------------------------------------------------------------


def _top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    return top_k_filter(logits, k)


def _top_k_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1501)
    cases = [Case("logits [[1, 3, 2, 0]], k=2", (torch.tensor([[1.0, 3.0, 2.0, 0.0]]), 2)),
             Case("logits [[2, 1, 1, 0]], k=2 (a tie at the k-th place)", (torch.tensor([[2.0, 1.0, 1.0, 0.0]]), 2)),
             Case("logits [[0, 5, 5, 1, 5]], k=1 (three tied for the largest)",
                  (torch.tensor([[0.0, 5.0, 5.0, 1.0, 5.0]]), 1))]
    for B, V, k in ((2, 6, 1), (3, 10, 4), (1, 5, 5)):
        cases.append(Case(f"random logits ({B}, {V}), k={k}", (torch.randn(B, V, generator=g), k)))
    return cases


def _zero_fill(logits, k):
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, 0.0)


def _bottom_k(logits, k):
    kth = torch.topk(logits, k, dim=-1, largest=False).values[..., -1:]
    return logits.masked_fill(logits > kth, float("-inf"))


def _exactly_k(logits, k):
    keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, torch.topk(logits, k, dim=-1).indices, True)
    return logits.masked_fill(~keep, float("-inf"))


check_top_k_filter = Checker(
    name="top_k_filter",
    doc="Check ``fn(logits, k) -> logits.shape``: all but the ``k`` largest logits of each row set to ``-inf``; "
        "logits tied with the ``k``-th largest are kept.",
    reference=_top_k,
    cases=_top_k_cases(),
    mistakes=(
        Mistake(_zero_fill, "a logit of 0 still has probability; set the others to -inf."),
        Mistake(_bottom_k, "keep the k largest logits (torch.topk's default), not the smallest."),
        Mistake(_exactly_k, "a logit equal to the k-th largest is as likely as it: keeping exactly k positions "
                "drops some of a tie, and which ones depends on the order. Compare values, not positions."),
    ),
    forbidden=(top_k_filter, TopKLogitsWarper.__call__),
)


# --- top-p (nucleus) -----------------------------------------------------------------------------------


def _top_p(logits: torch.Tensor, p: float) -> torch.Tensor:
    """The nucleus, tie-fair: a token stays when the tokens strictly likelier than it hold less than ``p``."""
    probs = torch.softmax(logits.double(), dim=-1)  # (B, V)
    likelier = (logits.unsqueeze(-2) > logits.unsqueeze(-1)).double()  # (B, V, V): [b, i, j] = l_j > l_i
    before = (likelier * probs.unsqueeze(-2)).sum(-1)  # (B, V): mass strictly above each token
    return logits.masked_fill(before >= p, float("-inf"))


def _margin(logits: torch.Tensor, p: float) -> float:
    """How far ``p`` lies from every mass that decides a token (cases are chosen far from the boundary)."""
    probs = torch.softmax(logits.double(), dim=-1)
    likelier = (logits.unsqueeze(-2) > logits.unsqueeze(-1)).double()
    before = (likelier * probs.unsqueeze(-2)).sum(-1)
    return float((before - p).abs().min())


def _top_p_cases() -> list[Case]:
    cases = [
        Case("logits [[2, 1, 1, -1]], p=0.6 (the nucleus ends inside a tie)",
             (torch.tensor([[2.0, 1.0, 1.0, -1.0]]), 0.6)),
        Case("logits [[0, 0, 0, 0]], p=0.3 (all four tied)", (torch.zeros(1, 4), 0.3)),
        Case("logits [[1, 4, 2, 3]], p=1.0 (keeps every token)", (torch.tensor([[1.0, 4.0, 2.0, 3.0]]), 1.0)),
        Case("logits [[1, 4, 2, 3]], p=1e-6 (keeps only the likeliest)", (torch.tensor([[1.0, 4.0, 2.0, 3.0]]), 1e-6)),
        Case("logits [[3, 0, 3, 1]], p=0.1 (two tied for the likeliest)", (torch.tensor([[3.0, 0.0, 3.0, 1.0]]), 0.1)),
        Case("logits [[0.5, -inf, 2, 1]], p=0.9 (a token already filtered out)",
             (torch.tensor([[0.5, float("-inf"), 2.0, 1.0]]), 0.9)),
    ]
    g = torch.Generator().manual_seed(1502)
    for B, V, p in ((2, 8, 0.5), (3, 12, 0.9), (4, 6, 0.75)):
        while True:
            logits = 2 * torch.randn(B, V, generator=g)
            if _margin(logits, p) > 1e-3:
                break
        cases.append(Case(f"random logits ({B}, {V}), p={p}", (logits, p)))
    return cases


def _sorted_cumsum(logits, p, inclusive, descending=True):
    probs = torch.softmax(logits, dim=-1)
    order = torch.argsort(logits, dim=-1, descending=descending, stable=True)
    cum = torch.cumsum(probs.gather(-1, order), dim=-1)
    before = cum if inclusive else cum - probs.gather(-1, order)
    keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, order, before < p)
    return logits.masked_fill(~keep, float("-inf"))


def _crossing_dropped(logits, p):
    return _sorted_cumsum(logits, p, inclusive=True)


def _tie_split(logits, p):
    return _sorted_cumsum(logits, p, inclusive=False)


def _tail_kept(logits, p):
    return _sorted_cumsum(logits, p, inclusive=False, descending=False)


def _top_p_zero_fill(logits, p):
    out = _top_p(logits, p)
    return torch.where(torch.isinf(out) & ~torch.isinf(logits), torch.zeros_like(out), out)


check_top_p_filter = Checker(
    name="top_p_filter",
    doc="Check ``fn(logits, p) -> logits.shape``: the nucleus of each row kept, every other logit set to "
        "``-inf``. A token is kept when the tokens strictly likelier than it hold less than ``p`` of the "
        "probability (so tied tokens share one fate); ``0 < p <= 1``.",
    reference=_top_p,
    cases=_top_p_cases(),
    mistakes=(
        Mistake(_crossing_dropped, "the token whose probability carries the running total past p belongs to the "
                "nucleus: without it the kept tokens hold less than p."),
        Mistake(_tie_split, "tokens with equal logits are equally likely, so they are kept or dropped together; "
                "a running total over a sorted order treats the first of a tie differently from the others."),
        Mistake(_tail_kept, "the nucleus is made of the likeliest tokens: accumulate from the largest logit down."),
        Mistake(_top_p_zero_fill, "a logit of 0 still has probability; set the dropped tokens to -inf."),
    ),
    forbidden=(TopPLogitsWarper.__call__, top_k_filter),
)


# --- counting a GPT of another shape ---------------------------------------------------------------------


def _gpt_params(V: int, block_size: int, d_model: int, n_layers: int, d_ff: int, tied: bool) -> int:
    with torch.device("meta"):  # count without allocating memory
        model = GPT(GPTConfig(vocab_size=V, block_size=block_size, n_layers=n_layers, n_heads=1, d_model=d_model,
                              d_ff=d_ff, tie_embeddings=tied))
    return model.n_params()


def _four_d(V, block_size, d_model, n_layers, d_ff, tied):
    return _gpt_params(V, block_size, d_model, n_layers, 4 * d_model, tied)


def _head_with_bias(V, block_size, d_model, n_layers, d_ff, tied):
    return _gpt_params(V, block_size, d_model, n_layers, d_ff, tied) + (0 if tied else V)


def _always_tied(V, block_size, d_model, n_layers, d_ff, tied):
    return _gpt_params(V, block_size, d_model, n_layers, d_ff, True)


def _no_final_norm(V, block_size, d_model, n_layers, d_ff, tied):
    return _gpt_params(V, block_size, d_model, n_layers, d_ff, tied) - 2 * d_model


check_gpt_parameters = Checker(
    name="gpt_parameters",
    doc="Check ``fn(V, block_size, d_model, n_layers, d_ff, tied) -> int``: the parameters of the package's "
        "GPT with a feed-forward width ``d_ff`` and tied (``True``) or untied (``False``) output layer.",
    reference=_gpt_params,
    cases=[Case(f"V={V}, block_size={T}, d_model={d}, n_layers={L}, d_ff={f}, tied={t}", (V, T, d, L, f, t))
           for V, T, d, L, f, t in ((65, 64, 128, 4, 512, True), (65, 64, 128, 4, 512, False),
                                    (50257, 1024, 768, 12, 3072, True), (10, 8, 4, 1, 6, False),
                                    (1000, 256, 96, 3, 200, False))],
    mistakes=(
        Mistake(_four_d, "the feed-forward width is d_ff, given, not 4 d_model: fc1 has d_model x d_ff weights and "
                "d_ff biases, fc2 d_ff x d_model and d_model."),
        Mistake(_head_with_bias, "the package's untied output layer is a matrix without a bias."),
        Mistake(_always_tied, "untied, the output layer is a d_model x V matrix of its own, besides the token table."),
        Mistake(_no_final_norm, "add the final layer norm before the output layer: 2 d_model."),
    ),
    forbidden=(GPT.__init__, GPT.n_params),  # building the model and counting it is the chapter's check, not a count
)


# --- capstone: a GPT from torch primitives ---------------------------------------------------------------

PARTS_HINTS = {
    "embeddings": "each position's vector is its token's row of tok.E plus its position's row of pos.P, "
                  "positions counted from 0.",
    "attention": "the residual stream after attention is x + attention(norm1(x)) (pre-norm); queries, keys and "
                 "values are h W + b (row convention), split into heads of d_model / n_heads columns, scores "
                 "divided by sqrt(d_head), each position sees itself and the past only, then out_proj.",
    "mlp": "after attention, x + fc2(GELU(fc1(norm3(x)))), GELU in its tanh approximation.",
    "final_norm": "the final layer norm (norm.gamma, norm.beta, eps 1e-5) on the last block's output.",
    "logits": "the output layer is tied to the token table: multiply by tok.E transposed.",
}


def _config_of(state_dict: dict[str, torch.Tensor], n_heads: int) -> GPTConfig:
    V, d = state_dict["tok.E"].shape
    L = sum(key.endswith("norm1.gamma") for key in state_dict)
    return GPTConfig(vocab_size=V, block_size=state_dict["pos.P"].shape[0], n_layers=L, n_heads=n_heads,
                     d_model=d, d_ff=state_dict["blocks.0.ff.fc1.W"].shape[1])


def _model_of(state_dict: dict[str, torch.Tensor], n_heads: int) -> GPT:
    model = GPT(_config_of(state_dict, n_heads)).to(state_dict["tok.E"].dtype)
    model.load_state_dict(state_dict)
    return model.eval()


def trace_names(n_layers: int) -> list[str]:
    """The keys of a GPT's trace, in the order the forward pass computes them."""
    blocks = [f"block{i}.{part}" for i in range(n_layers) for part in ("attention", "mlp")]
    return ["embeddings", *blocks, "final_norm", "logits"]


def _gpt_logits(state_dict: dict[str, torch.Tensor], ids: torch.Tensor, n_heads: int,
                trace: dict | None = None) -> torch.Tensor:
    """The package's GPT with these weights: ``(B, T)`` ids to ``(B, T, V)`` logits, and its trace if asked."""
    model = _model_of(state_dict, n_heads)
    seen: dict[str, torch.Tensor] = {}
    handles = []
    for i, block in enumerate(model.blocks):
        def before(module, args, i=i):
            seen[f"block{i}.input"] = args[0]

        def after_attention(module, args, output, i=i):
            seen[f"block{i}.attention"] = seen[f"block{i}.input"] + output[0]

        def after_block(module, args, output, i=i):
            seen[f"block{i}.mlp"] = output

        handles += [block.register_forward_pre_hook(before), block.self_attn.register_forward_hook(after_attention),
                    block.register_forward_hook(after_block)]
    handles.append(model.norm.register_forward_hook(lambda m, a, out: seen.__setitem__("final_norm", out)))
    try:
        with torch.no_grad():
            logits = model(ids)
    finally:
        for handle in handles:
            handle.remove()
    if trace is not None:
        seen["embeddings"] = seen["block0.input"]
        seen["logits"] = logits
        trace.update({key: seen[key].detach() for key in trace_names(len(model.blocks))})
    return logits


def _random_gpt(seed: int, V: int, T: int, d: int, L: int, h: int, d_ff: int) -> dict[str, torch.Tensor]:
    """A GPT's state dict with random values everywhere (biases and norm parameters too), in float64."""
    torch.manual_seed(seed)
    model = GPT(GPTConfig(vocab_size=V, block_size=T, n_layers=L, n_heads=h, d_model=d, d_ff=d_ff)).double()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g, dtype=p.dtype)
            if "gamma" in name:
                p.copy_(1 + 0.1 * noise)
            elif name.startswith(("tok", "pos")):
                p.copy_(0.5 * noise)
            elif p.dim() == 1:  # biases and the norms' shifts
                p.copy_(0.1 * noise)
            else:  # a matrix: outputs of about the size of its inputs
                p.copy_(noise / math.sqrt(p.shape[0]))
    return {k: v.clone() for k, v in model.state_dict().items()}


def _gpt_cases() -> list[Case]:
    cases = []
    # the third has 12 blocks, as GPT-2 small: in string order "blocks.10" comes before "blocks.2"
    for seed, (V, T, d, L, h, d_ff, B, n) in enumerate(((13, 8, 8, 1, 2, 32, 2, 5), (17, 10, 12, 2, 3, 20, 3, 10),
                                                         (11, 6, 16, 12, 4, 48, 1, 6))):
        sd = _random_gpt(1510 + seed, V, T, d, L, h, d_ff)
        ids = torch.randint(0, V, (B, n), generator=torch.Generator().manual_seed(seed))
        cases.append(Case(f"a GPT with V={V}, block_size={T}, d_model={d}, {L} block(s), {h} heads, d_ff={d_ff}; "
                          f"ids of shape ({B}, {n})", (sd, ids, h)))
    return cases


def _variant(sd, ids, n_heads, *, pre_norm=True, gelu="tanh", scale=True, causal=True):
    """A GPT forward pass from primitives with one thing changed: the typical mistakes."""
    def norm(x, name):
        return F.layer_norm(x, x.shape[-1:], sd[f"{name}.gamma"], sd[f"{name}.beta"], 1e-5)

    def affine(x, name):
        return x @ sd[f"{name}.W"] + sd[f"{name}.b"]

    def attention(x, p):
        B, T, d = x.shape
        q, k, v = (affine(x, f"{p}.{n}_proj").view(B, T, n_heads, -1).transpose(1, 2) for n in "qkv")
        scores = q @ k.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scale else 1.0)
        if causal:
            scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        out = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, T, d)
        return affine(out, f"{p}.out_proj")

    def mlp(x, p):
        return affine(F.gelu(affine(x, f"{p}.fc1"), approximate=gelu), f"{p}.fc2")

    x = sd["tok.E"][ids] + sd["pos.P"][: ids.shape[1]]
    for i in range(sum(key.endswith("norm1.gamma") for key in sd)):
        p = f"blocks.{i}"
        if pre_norm:
            x = x + attention(norm(x, f"{p}.norm1"), f"{p}.self_attn")
            x = x + mlp(norm(x, f"{p}.norm3"), f"{p}.ff")
        else:
            x = norm(x + attention(x, f"{p}.self_attn"), f"{p}.norm1")
            x = norm(x + mlp(x, f"{p}.ff"), f"{p}.norm3")
    return norm(x, "norm") @ sd["tok.E"].T


def _post_norm(sd, ids, n_heads, trace=None):
    return _variant(sd, ids, n_heads, pre_norm=False)


def _exact_gelu(sd, ids, n_heads, trace=None):
    return _variant(sd, ids, n_heads, gelu="none")


def _unscaled(sd, ids, n_heads, trace=None):
    return _variant(sd, ids, n_heads, scale=False)


def _not_causal(sd, ids, n_heads, trace=None):
    return _variant(sd, ids, n_heads, causal=False)


def _first_disagreement(fn, case: Case, call) -> str | None:
    """Run the learner's function with a trace and name the first part whose values differ from the package's."""
    sd, ids, n_heads = case.args
    expected: dict[str, torch.Tensor] = {}
    _gpt_logits(*case.args, trace=expected)
    got: dict = {}
    call({k: v.clone() for k, v in sd.items()}, ids.clone(), n_heads, got)
    if not isinstance(got, dict) or not got:
        return ("To find the part that disagrees, fill the dict passed as `trace` (keys embeddings, "
                "block0.attention, block0.mlp, ..., final_norm, logits).")
    for key, want in expected.items():
        if key not in got:
            continue
        value = got[key]
        try:
            value = torch.as_tensor(np.asarray(value.detach().cpu() if torch.is_tensor(value) else value),
                                    dtype=torch.float64)
            same = value.shape == want.shape and torch.allclose(value, want.double(), atol=1e-6, rtol=1e-5)
        except (TypeError, ValueError, RuntimeError):
            same = False
        if not same:
            part = key.split(".")[-1]
            return f"The first part that disagrees is {key}: {PARTS_HINTS[part]}"
    return "Every traced part agrees with the package's: trace the parts you left out."


def _greedy(fn, case: Case, call) -> str | None:
    """Greedy continuation with the learner's forward pass against ``generate``, past the context length."""
    sd, ids, n_heads = case.args
    block = sd["pos.P"].shape[0]
    prompt = ids[:, :1].clone()  # from one token: every window length from 1 to block_size runs
    want = at.generate(_model_of(sd, n_heads), prompt, block + 2, greedy=True)
    tokens = prompt
    try:
        for _ in range(block + 2):
            logits = call({k: v.clone() for k, v in sd.items()}, tokens[:, -block:].clone(), n_heads)
            next_id = torch.as_tensor(np.asarray(logits.detach().cpu() if torch.is_tensor(logits) else logits))
            tokens = torch.cat([tokens, next_id[:, -1].argmax(-1, keepdim=True).to(tokens.dtype)], dim=1)
    except (Exception, SystemExit, _TimedOut) as exc:
        return (f"the greedy continuation failed on a window of {tokens.shape[1]} token(s) "
                f"({type(exc).__name__}: {str(exc)[:120]}); the forward pass must run for any length "
                f"from 1 to block_size (input: {case.label}).")
    if not torch.equal(tokens, want):
        where = int((tokens != want).any(0).nonzero()[0])
        return (f"logits agree, but the greedy tokens differ from step {where - 1} on (input: {case.label}): "
                f"expected {want[0].tolist()}, got {tokens[0].tolist()}.")
    return None


check_gpt_forward = PartsChecker(
    name="gpt_forward",
    doc="Check ``fn(state_dict, ids, n_heads, trace=None) -> (B, T, V) logits``: the forward pass of the package's "
        "GPT (pre-norm blocks, GELU tanh, tied output layer) from its state dict, by torch operations; also its "
        "greedy continuation. If ``trace`` is a dict, fill it with the intermediate results named by "
        "``trace_names(n_layers)``, so that a disagreement is traced to its part.",
    reference=_gpt_logits,
    cases=_gpt_cases(),
    atol=1e-6,
    rtol=1e-5,
    mistakes=(
        Mistake(_post_norm, "GPT's blocks are pre-norm: x + sublayer(norm(x)), the residual stream itself never "
                "normalised inside a block."),
        Mistake(_exact_gelu, "GPT-2's GELU is the tanh approximation (approximate='tanh')."),
        Mistake(_unscaled, "divide the scores by sqrt(d_head), the width of one head, not of the model."),
        Mistake(_not_causal, "each position may attend only to itself and the positions before it."),
    ),
    forbidden=(GPT.forward, at.DecoderBlock.forward, at.MultiHeadAttention.forward, at.FeedForward.forward,
               at.LayerNorm.forward, at.Linear.forward, at.generate, at.scaled_dot_product_attention,
               at.multi_head_attention, at.masked_softmax, at.layer_norm, F.scaled_dot_product_attention,
               torch.nn.MultiheadAttention.forward, torch.nn.TransformerEncoderLayer.forward,
               torch.nn.TransformerDecoderLayer.forward, F.multi_head_attention_forward),
    diagnose=_first_disagreement,
    extra=_greedy,
)
