"""Checkers for the coding exercises of chapter 15 (the whole Transformer)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

import attnbook.torch as at
from attnbook.exercises._capstone import PartsChecker
from attnbook.exercises._harness import (
    Case,
    Checker,
    Mistake,
    Outcome,
    Problem,
    Verdict,
    _resolve,
    _TimedOut,
    _Watch,
)
from attnbook.exercises._modules import ready_made_submodule
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


def _one_norm_per_block(V, block_size, d_model, n_layers, d_ff, tied):
    return _gpt_params(V, block_size, d_model, n_layers, d_ff, tied) - 2 * d_model * n_layers


class _CountChecker(Checker):
    """The count's checker: a refused module construction says why it is refused."""

    def _run(self, fn, args, label, forbidden):
        got, problem = super()._run(fn, args, label, forbidden)
        if problem is not None and problem.outcome is Outcome.REFUSED and "Module.__init__`" in problem.text:
            problem = problem.extended("It builds a torch module: the exercise asks for the count without building "
                                       "a model, from the shapes of its weights, so that no layer is counted "
                                       "because it exists rather than because you derived it.")
        return got, problem


check_gpt_parameters = _CountChecker(
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
        Mistake(_one_norm_per_block, "each block has two layer norms, one before attention and one before the "
                "feed-forward network, with a scale and a shift of d_model each: 4 d_model per block."),
    ),
    # Building the model and counting it is the chapter's check, not a count: the package's GPT and any torch
    # module (an nn.Linear whose numel() is summed) are refused.
    forbidden=(GPT.__init__, GPT.n_params, "torch.nn.Module.__init__"),
)


# --- capstone: your GPT as modules, loaded with GPT-2's weights ------------------------------------------
#
# The answer is a dict {"GPT": a class, "load_gpt2": a function}. The checker builds the class with each
# case's sizes, loads a small random GPT-2 of `transformers` into it with the learner's `load_gpt2`, and
# compares the logits with `GPT2LMHeadModel`'s. Where they disagree, hooks on the learner's modules (its
# `blocks`, each block's `attn` and `mlp`, its `ln_f`) and on GPT-2's name the first sublayer that differs.

#: The learner's model is built as ``GPT(**sizes)`` with these keys (the feed-forward width is 4 d_model).
SIZES = ("vocab_size", "block_size", "n_layers", "n_heads", "d_model")

# Modules an answer's model may not contain: whole attention layers or blocks written by someone else.
def _gpt2_config(sizes: dict) -> Any:
    from transformers import GPT2Config

    return GPT2Config(vocab_size=sizes["vocab_size"], n_positions=sizes["block_size"], n_embd=sizes["d_model"],
                      n_layer=sizes["n_layers"], n_head=sizes["n_heads"], resid_pdrop=0.0, embd_pdrop=0.0,
                      attn_pdrop=0.0, attn_implementation="eager")


def _gpt2(sizes: dict, hf_state_dict: dict[str, torch.Tensor]) -> Any:
    """A ``GPT2LMHeadModel`` of these sizes holding these weights, in eval mode (the global seed untouched)."""
    from transformers import GPT2LMHeadModel

    with torch.random.fork_rng():
        model = GPT2LMHeadModel(_gpt2_config(sizes))
    model.load_state_dict(hf_state_dict)
    return model.eval()


def _trace_keys(n_layers: int) -> list[str]:
    """What the diagnosis compares, in the order the forward pass computes it."""
    blocks = [f"block{i}.{part}" for i in range(n_layers) for part in ("ln_1", "attn", "ln_2", "mlp", "out")]
    return ["embeddings", *blocks, "ln_f", "logits"]


def _first(output: Any) -> Any:
    return output[0] if isinstance(output, tuple) else output


def _gpt2_logits(sizes: dict, hf_state_dict: dict[str, torch.Tensor], ids: torch.Tensor,
                 trace: dict | None = None) -> torch.Tensor:
    """GPT-2's ``(B, T, V)`` logits for ``(B, T)`` ids, and (if asked) what each sublayer computes."""
    model = _gpt2(sizes, hf_state_dict)
    seen: dict[str, torch.Tensor] = {}

    def keep(key: str) -> Callable[..., None]:
        return lambda module, args, output: seen.__setitem__(key, _first(output).detach().clone())

    handles = [model.transformer.drop.register_forward_hook(keep("embeddings")),
               model.transformer.ln_f.register_forward_hook(keep("ln_f"))]
    for i, block in enumerate(model.transformer.h):
        for part in ("ln_1", "attn", "ln_2", "mlp"):
            handles.append(getattr(block, part).register_forward_hook(keep(f"block{i}.{part}")))
        handles.append(block.register_forward_hook(keep(f"block{i}.out")))
    try:
        with torch.no_grad():
            logits = model(ids).logits
    finally:
        for handle in handles:
            handle.remove()
    if trace is not None:
        trace.update(seen, logits=logits)
    return logits


class _Trace:
    """Records what the learner's modules compute, through forward hooks: their inputs and outputs under the
    keys of ``_trace_keys``. Passed to the assembled answer as an argument, so its methods run inside the
    learner's forward pass without being refused."""

    def __init__(self) -> None:
        self.seen: dict[str, torch.Tensor] = {}
        self.missing: list[str] = []

    def before(self, key: str) -> Callable[..., None]:
        return lambda module, args: self.seen.__setitem__(key, args[0].detach().clone())

    def after(self, key: str) -> Callable[..., None]:
        return lambda module, args, output: self.seen.__setitem__(key, _first(output).detach().clone())

    def attach(self, model: torch.nn.Module) -> list[Any]:
        """Hooks on ``model.blocks[i].attn``, ``.mlp``, ``model.blocks[i]`` and ``model.ln_f``, where they exist."""
        handles: list[Any] = []
        blocks = getattr(model, "blocks", None)
        if not isinstance(blocks, (torch.nn.ModuleList, torch.nn.Sequential)) or len(blocks) == 0:
            self.missing.append("`blocks` (an nn.ModuleList of the blocks)")
            blocks = []
        for i, block in enumerate(blocks):
            if i == 0:
                handles.append(block.register_forward_pre_hook(self.before("embeddings")))
            for part, norm in (("attn", "ln_1"), ("mlp", "ln_2")):
                module = getattr(block, part, None)
                if not isinstance(module, torch.nn.Module):
                    self.missing.append(f"`blocks[{i}].{part}`")
                    continue
                handles += [module.register_forward_pre_hook(self.before(f"block{i}.{norm}")),
                            module.register_forward_hook(self.after(f"block{i}.{part}"))]
            handles.append(block.register_forward_hook(self.after(f"block{i}.out")))
        ln_f = getattr(model, "ln_f", None)
        if isinstance(ln_f, torch.nn.Module):
            handles.append(ln_f.register_forward_hook(self.after("ln_f")))
        else:
            self.missing.append("`ln_f`")
        return handles


class _Assembled:
    """The learner's answer as one function of a case: ``GPT(**sizes)``, ``load_gpt2(model, hf_state_dict)``,
    then the logits of ``ids`` in eval mode without gradients. Each model built is kept, so that the checker
    can look at its modules."""

    def __init__(self, gpt: type, load_gpt2: Callable[..., Any]) -> None:
        self.gpt, self.load_gpt2 = gpt, load_gpt2
        self.built: list[torch.nn.Module] = []
        self.loaded_from: dict | None = None  # the state dict the last model was loaded from

    def __call__(self, sizes: dict, hf_state_dict: dict[str, torch.Tensor], ids: torch.Tensor,
                 trace: _Trace | None = None) -> Any:
        if self.built and self.loaded_from is hf_state_dict:  # the greedy continuation: one model, many calls
            model = self.built[-1]
        else:
            model = self.gpt(**sizes)
            self.built.append(model)
            if not isinstance(model, torch.nn.Module):
                return model  # the comparison says what came back
            self.load_gpt2(model, hf_state_dict)
            self.loaded_from = hf_state_dict
        model.eval()
        handles = trace.attach(model) if trace is not None else []
        try:
            with torch.no_grad():
                return model(ids)
        finally:
            for handle in handles:
                handle.remove()


class _AssemblyWatch(_Watch):
    """The harness's watch, which lets the checker's own plumbing run (building, loading, the trace's hooks)
    while it keeps watching every call the learner's code makes from inside it."""

    plumbing = frozenset({_Assembled.__call__.__code__, _Trace.before.__code__, _Trace.after.__code__,
                          _Trace.attach.__code__, _first.__code__})

    def _hook(self, frame: Any, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call" and (code in self.plumbing or code.co_name == "<lambda>" and
                                frame.f_globals.get("__name__") == __name__):
            return
        super()._hook(frame, event, arg)


def _ready_made(model: Any) -> str | None:
    """The first module of the learner's model that is someone else's implementation, or ``None``."""
    if not isinstance(model, torch.nn.Module):
        return None
    found = ready_made_submodule(model)
    if found is None:
        return None
    where = f"`{found.name}`" if found.name else "the model itself"
    whose = {"attnbook": "the book's own package", "transformers": "Hugging Face transformers"}.get(
        found.owner, "PyTorch's ready-made attention")
    return (f"your model contains {where}, which {found.verb} {found.what}, from {whose}: build the GPT from your "
            "own modules (nn.Linear, nn.Embedding, nn.LayerNorm, nn.Dropout and tensor operations), attention "
            "written out.")


# Mapping mistakes to try when an attention disagrees: a change of GPT-2's weights before the learner's
# load_gpt2 that undoes the mistake. If the learner's logits then agree, that step of the mapping is wrong.
def _transposed_qkv(sd: dict, i: int) -> None:
    w = sd[f"transformer.h.{i}.attn.c_attn.weight"]
    sd[f"transformer.h.{i}.attn.c_attn.weight"] = torch.cat([b.T for b in w.chunk(3, dim=1)], dim=1)


def _transposed_proj(sd: dict, i: int) -> None:
    sd[f"transformer.h.{i}.attn.c_proj.weight"] = sd[f"transformer.h.{i}.attn.c_proj.weight"].T.contiguous()


def _reordered(order: tuple[int, int, int]) -> Callable[[dict, int], None]:
    def reorder(sd: dict, i: int) -> None:
        for kind in ("weight", "bias"):
            key = f"transformer.h.{i}.attn.c_attn.{kind}"
            parts = sd[key].chunk(3, dim=-1)
            sd[key] = torch.cat([parts[j] for j in order], dim=-1)
    return reorder


_MAPPING_STEPS = (
    (_transposed_qkv, "its query, key and value weights are not transposed: GPT-2's Conv1D stores c_attn.weight "
                      "as (in, out) = (d_model, 3 d_model), nn.Linear's weight is (out, in), so copy the transpose"),
    (_transposed_proj, "attn.c_proj.weight is not transposed: GPT-2's Conv1D stores it as (in, out), "
                       "nn.Linear's weight is (out, in), so copy the transpose"),
    (_reordered((0, 2, 1)), "it swaps the keys and the values: c_attn's outputs are q, then k, then v, "
                            "d_model columns each (weight and bias)"),
    (_reordered((1, 0, 2)), "it swaps the queries and the keys: c_attn's outputs are q, then k, then v"),
    (_reordered((2, 1, 0)), "it swaps the queries and the values: c_attn's outputs are q, then k, then v"),
)

_WHERE = {
    "embeddings": "the embeddings (the input of block 0) already differ, so the mapping is suspect before any "
                  "block: copy transformer.wte.weight (V, d_model) into the token table and transformer.wpe.weight "
                  "(block_size, d_model) into the position table, and add the rows of positions 0, 1, ..., T-1.",
    "ln_1": "the input of its attention (the output of ln_1) differs: the norm before attention, with "
            "h.{i}.ln_1's weight and bias and eps 1e-5, on the residual stream.",
    "attn": "its attention's output differs while its input agrees: the causal mask, the split into n_heads "
            "heads of d_model / n_heads columns, the scale 1 / sqrt(d_head), or the copy of attn.c_attn and "
            "attn.c_proj (Conv1D weights are (in, out): transpose them; the biases too).",
    "ln_2": "the input of its MLP (the output of ln_2) differs: the stream is x + attn(ln_1(x)) before ln_2, "
            "with h.{i}.ln_2's weight and bias.",
    "mlp": "its MLP's output differs while its input agrees: mlp.c_fc, GELU in its tanh approximation, then "
           "mlp.c_proj (Conv1D weights are (in, out): transpose them).",
    "out": "its sublayers agree, but its output differs: a pre-norm block returns x + attn(ln_1(x)) and then "
           "adds mlp(ln_2(...)) of that sum.",
    "ln_f": "every block agrees, but the final norm differs: ln_f (transformer.ln_f's weight and bias) on the "
            "last block's output.",
    "logits": "everything up to the final norm agrees, but the logits differ: the output layer is tied to the "
              "token table, logits = ln_f(x) @ wte.weight.T (GPT-2's lm_head.weight is the same tensor).",
}


def _describe_key(key: str) -> str:
    if key.startswith("block"):
        block, part = key.split(".")
        i = block.removeprefix("block")
        return f"The first part that disagrees is block {i}: " + _WHERE[part].replace("{i}", i)
    return f"The first part that disagrees: {_WHERE[key]}"


def _agree(a: Any, b: torch.Tensor) -> bool:
    try:
        a = torch.as_tensor(a.detach().cpu() if torch.is_tensor(a) else np.asarray(a), dtype=torch.float64)
        return a.shape == b.shape and torch.allclose(a, b.double(), atol=1e-5, rtol=1e-4)
    except (TypeError, ValueError, RuntimeError):
        return False


def _first_disagreement(fn, case: Case, call) -> str | None:
    """Name the first sublayer whose output differs from GPT-2's, and a mapping step that explains it."""
    if not isinstance(fn, _Assembled):
        return None
    sizes, sd, ids = case.args
    expected: dict[str, torch.Tensor] = {}
    _gpt2_logits(sizes, sd, ids, expected)
    trace = _Trace()
    logits = call(sizes, copy.deepcopy(sd), ids.clone(), trace)
    got = {**trace.seen, "logits": logits}
    if trace.missing:
        return ("To name the part that disagrees, the checker looks for " + ", ".join(trace.missing) +
                " in your model, and did not find it.")
    key = next((k for k in _trace_keys(sizes["n_layers"]) if k not in got or not _agree(got[k], expected[k])), None)
    if key is None:
        return None
    if key not in got:
        module = "ln_f" if key == "ln_f" else key.replace(".out", "").replace("block", "blocks[") + "]"
        return (f"Your `{module}` did not run in the forward pass: the final norm ln_f comes after the last "
                "block, before the output layer." if key == "ln_f" else
                f"Your `{module}` did not run in the forward pass (where GPT-2's {key} does).")
    sentence = _describe_key(key)
    if key.endswith(".ln_1"):
        swapped = _block_loaded_from(key, got[key], expected, sd, sizes["n_layers"])
        if swapped is not None:
            return swapped
    if key.endswith(".attn"):
        for undo, mistake in _MAPPING_STEPS:
            repaired = copy.deepcopy(sd)
            for i in range(sizes["n_layers"]):  # a loader makes the same mistake in every block
                undo(repaired, i)
            if _agree(call(sizes, repaired, ids.clone()), expected["logits"]):
                return (f"{sentence.split(':')[0]}'s attention, whose input agrees. With that step of the mapping "
                        f"undone your logits agree, so suspect load_gpt2: {mistake}.")
        later = ids.clone()
        later[:, -1] = (later[:, -1] + 1) % sizes["vocab_size"]  # another last token: earlier rows must not move
        if ids.shape[1] > 1 and not _agree(call(sizes, copy.deepcopy(sd), later)[:, :-1], logits[:, :-1].double()):
            return (f"{sentence} Changing only the last token changes your logits at earlier positions: each "
                    "position may attend only to itself and the positions before it (the causal mask).")
    return sentence


def _block_loaded_from(key: str, got: Any, expected: dict, sd: dict, n_layers: int) -> str | None:
    """When block i's first norm computes what GPT-2's block j's (j != i) would on block i's input: the sentence
    saying that the blocks were loaded in the wrong order."""
    i = int(key.split(".")[0].removeprefix("block"))
    x = (expected["embeddings"] if i == 0 else expected[f"block{i - 1}.out"]).double()
    for j in range(n_layers):
        weight, bias = (sd[f"transformer.h.{j}.ln_1.{w}"].double() for w in ("weight", "bias"))
        if j != i and _agree(got, F.layer_norm(x, x.shape[-1:], weight, bias, 1e-5)):
            return (f"The first part that disagrees is block {i}, and it holds the weights of GPT-2's h.{j}: the "
                    f"blocks are loaded in the wrong order. Keys sorted as text put h.10 before h.2; copy h.{i} "
                    f"into block {i}, taking the block number from the key as an integer.")
    return None


def _greedy(fn, case: Case, call) -> str | None:
    """Greedy continuation with the learner's model against GPT-2's, from one token to past the context."""
    if case is not _GPT2_CASES[0]:
        return None
    sizes, sd, ids = case.args
    block = sizes["block_size"]
    model = _gpt2(sizes, sd)
    want = ids[:, :1].clone()
    with torch.no_grad():
        for _ in range(block + 2):
            next_id = model(want[:, -block:]).logits[:, -1].argmax(-1, keepdim=True)
            want = torch.cat([want, next_id], dim=1)
    tokens = ids[:, :1].clone()
    weights = copy.deepcopy(sd)  # one model, built and loaded once, runs every step
    try:
        for _ in range(block + 2):
            logits = call(sizes, weights, tokens[:, -block:].clone())
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


def _random_gpt2(seed: int, sizes: dict) -> dict[str, torch.Tensor]:
    """The state dict of a small GPT-2 with random values everywhere (biases and norms too), in float32."""
    g = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        from transformers import GPT2LMHeadModel

        model = GPT2LMHeadModel(_gpt2_config(sizes))
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                p.copy_(1 + 0.1 * noise)
            elif name.endswith(("wte.weight", "wpe.weight")):
                p.copy_(0.5 * noise)
            elif p.dim() == 1:  # biases and the norms' shifts
                p.copy_(0.1 * noise)
            else:  # a Conv1D matrix (in, out): outputs of about the size of its inputs
                p.copy_(noise / math.sqrt(p.shape[0]))
    return {k: v.clone() for k, v in model.state_dict().items()}


def _gpt2_cases() -> list[Case]:
    cases = []
    # (V, block_size, d_model, n_layers, n_heads) and the inputs; the last has 12 blocks, as GPT-2 small,
    # so that "h.10" sorted as a string before "h.2" is caught
    for seed, ((V, T, d, L, h), shapes) in enumerate((((50, 16, 32, 2, 4), ((2, 16), (3, 5), (1, 1))),
                                                       ((37, 12, 24, 3, 3), ((4, 12),)),
                                                       ((20, 8, 16, 12, 2), ((2, 8),)))):
        sizes = dict(zip(SIZES, (V, T, L, h, d), strict=True))
        sd = _random_gpt2(1520 + seed, sizes)
        g = torch.Generator().manual_seed(seed)
        for B, n in shapes:
            ids = torch.randint(0, V, (B, n), generator=g)
            cases.append(Case(f"GPT-2 with vocab_size={V}, block_size={T}, d_model={d}, {L} block(s), {h} heads; "
                              f"ids of shape ({B}, {n})", (sizes, sd, ids)))
    return cases


_GPT2_CASES = _gpt2_cases()


# The typical mistakes, as a GPT written from modules with one thing changed (in the model or in its loading).

class _Attention(torch.nn.Module):
    def __init__(self, d_model: int, n_heads: int, causal: bool = True) -> None:
        super().__init__()
        self.n_heads, self.causal = n_heads, causal
        self.qkv = torch.nn.Linear(d_model, 3 * d_model)
        self.proj = torch.nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        q, k, v = (t.view(B, T, self.n_heads, -1).transpose(1, 2) for t in self.qkv(x).split(d, dim=-1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if self.causal:
            scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        return self.proj((torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, T, d))


class _Block(torch.nn.Module):
    def __init__(self, d_model: int, n_heads: int, causal: bool) -> None:
        super().__init__()
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(d_model), torch.nn.LayerNorm(d_model)
        self.attn = _Attention(d_model, n_heads, causal)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d_model, 4 * d_model), torch.nn.GELU(approximate="tanh"),
                                       torch.nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class _GPT(torch.nn.Module):
    def __init__(self, vocab_size: int, block_size: int, n_layers: int, n_heads: int, d_model: int,
                 causal: bool = True, final_norm: bool = True) -> None:
        super().__init__()
        self.final_norm = final_norm
        self.wte, self.wpe = torch.nn.Embedding(vocab_size, d_model), torch.nn.Embedding(block_size, d_model)
        self.blocks = torch.nn.ModuleList(_Block(d_model, n_heads, causal) for _ in range(n_layers))
        self.ln_f = torch.nn.LayerNorm(d_model)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        return (self.ln_f(x) if self.final_norm else x) @ self.wte.weight.T


def _load(model: _GPT, sd: dict, transpose_proj: bool = True, order: tuple[int, int, int] = (0, 1, 2)) -> None:
    sd = {k.removeprefix("transformer."): v for k, v in sd.items()}
    pairs = [(model.wte.weight, sd["wte.weight"]), (model.wpe.weight, sd["wpe.weight"]),
             (model.ln_f.weight, sd["ln_f.weight"]), (model.ln_f.bias, sd["ln_f.bias"])]
    for i, b in enumerate(model.blocks):
        p = f"h.{i}."
        qkv_w, qkv_b = sd[p + "attn.c_attn.weight"].chunk(3, dim=1), sd[p + "attn.c_attn.bias"].chunk(3)
        proj = sd[p + "attn.c_proj.weight"]
        pairs += [(b.ln_1.weight, sd[p + "ln_1.weight"]), (b.ln_1.bias, sd[p + "ln_1.bias"]),
                  (b.ln_2.weight, sd[p + "ln_2.weight"]), (b.ln_2.bias, sd[p + "ln_2.bias"]),
                  (b.attn.qkv.weight, torch.cat([qkv_w[j] for j in order], dim=1).T),
                  (b.attn.qkv.bias, torch.cat([qkv_b[j] for j in order])),
                  (b.attn.proj.weight, proj.T if transpose_proj else proj),
                  (b.attn.proj.bias, sd[p + "attn.c_proj.bias"]),
                  (b.mlp[0].weight, sd[p + "mlp.c_fc.weight"].T), (b.mlp[0].bias, sd[p + "mlp.c_fc.bias"]),
                  (b.mlp[2].weight, sd[p + "mlp.c_proj.weight"].T), (b.mlp[2].bias, sd[p + "mlp.c_proj.bias"])]
    with torch.no_grad():
        for mine, theirs in pairs:
            mine.copy_(theirs)


def _variant(sizes, sd, ids, *, causal=True, final_norm=True, transpose_proj=True, order=(0, 1, 2)):
    with torch.random.fork_rng():
        model = _GPT(**sizes, causal=causal, final_norm=final_norm)
    _load(model, sd, transpose_proj, order)
    with torch.no_grad():
        return model.eval()(ids)


def _proj_not_transposed(sizes, sd, ids):
    return _variant(sizes, sd, ids, transpose_proj=False)


def _keys_and_values_swapped(sizes, sd, ids):
    return _variant(sizes, sd, ids, order=(0, 2, 1))


def _without_final_norm(sizes, sd, ids):
    return _variant(sizes, sd, ids, final_norm=False)


def _not_causal(sizes, sd, ids):
    return _variant(sizes, sd, ids, causal=False)


@dataclass(repr=False)
class _ModulesChecker(PartsChecker):
    """A ``PartsChecker`` whose answer is ``{"GPT": class, "load_gpt2": function}``, assembled into one function
    of a case; a function of the case itself (``fn(sizes, hf_state_dict, ids)``) is checked as it is. Each model
    the answer builds is inspected: one that contains someone else's attention or blocks is refused."""

    def __call__(self, answer: Any) -> Verdict:
        if not isinstance(answer, Mapping):
            return Checker.__call__(self, answer)
        missing = [key for key in ("GPT", "load_gpt2") if key not in answer]
        if missing:
            return Verdict(False, f"{self.name}: the dict has no {' and no '.join(repr(k) for k in missing)}; "
                                  "pass {'GPT': your GPT class, 'load_gpt2': your loading function}.",
                           outcome=Outcome.WRONG_FORM)
        gpt, load = answer["GPT"], answer["load_gpt2"]
        if not (isinstance(gpt, type) and issubclass(gpt, torch.nn.Module)):
            return Verdict(False, f"{self.name}: 'GPT' should be your class (a subclass of nn.Module), got "
                                  f"{type(gpt).__name__}.", outcome=Outcome.WRONG_FORM)
        with torch.random.fork_rng():  # building models draws initial weights: the caller's seed stays as it was
            return Checker.__call__(self, _Assembled(gpt, load))

    def watch(self, forbidden: Sequence[Any], fn: Any, args: tuple[Any, ...]) -> _Watch:
        plain = super().watch(forbidden, fn, args)
        return _AssemblyWatch(forbidden, self.reference, _resolve(self.allowed), args, trusted=plain.trusted)

    def _check_case(self, fn: Any, case: Case, forbidden: Sequence[Any] = (), hints: bool = True) -> Problem | None:
        problem = super()._check_case(fn, case, forbidden, hints)
        if isinstance(fn, _Assembled) and fn.built:
            refused = _ready_made(fn.built[-1])
            fn.built.clear()
            if refused is not None:
                return Problem(Outcome.REFUSED, f"{refused} (input: {case.label}). {self.allowances()}")
        return problem


check_gpt_forward = _ModulesChecker(
    name="gpt_forward",
    doc="Check ``fn({'GPT': GPT, 'load_gpt2': load_gpt2})``: your GPT class, built as ``GPT(vocab_size, "
        "block_size, n_layers, n_heads, d_model)`` from your own modules, and ``load_gpt2(model, hf_state_dict)``, "
        "which copies the weights of a Hugging Face ``GPT2LMHeadModel`` into it; the logits of ``model(ids)`` must "
        "match GPT-2's on small random GPT-2s (float32, atol 1e-5, rtol 1e-5), and so must its greedy "
        "continuation. Where they differ, the first sublayer that disagrees is named, which needs "
        "``model.blocks`` (the blocks), each block's ``attn`` and ``mlp``, and ``model.ln_f``.",
    reference=_gpt2_logits,
    cases=_GPT2_CASES,
    atol=1e-5,
    rtol=1e-5,
    mistakes=(
        Mistake(_proj_not_transposed, "GPT-2's Conv1D stores a weight as (in, out) and nn.Linear as (out, in): "
                "attn.c_proj.weight is square, so a copy without the transpose fits and is wrong."),
        Mistake(_keys_and_values_swapped, "c_attn's 3 d_model outputs are the queries, then the keys, then the "
                "values."),
        Mistake(_without_final_norm, "the last block's output goes through the final norm ln_f before the "
                "output layer."),
        Mistake(_not_causal, "each position may attend only to itself and the positions before it."),
    ),
    forbidden=(GPT.forward, at.DecoderBlock.forward, at.MultiHeadAttention.forward, at.FeedForward.forward,
               at.LayerNorm.forward, at.Linear.forward, at.generate, at.scaled_dot_product_attention,
               at.multi_head_attention, at.masked_softmax, at.layer_norm, F.scaled_dot_product_attention,
               torch.nn.MultiheadAttention.forward, torch.nn.TransformerEncoderLayer.forward,
               torch.nn.TransformerDecoderLayer.forward, F.multi_head_attention_forward),
    error_hints=(("must match the size", "GPT-2's Conv1D stores each weight as (in, out), nn.Linear as (out, in): "
                                         "copy the transpose."),),
    diagnose=_first_disagreement,
    extra=_greedy,
)
