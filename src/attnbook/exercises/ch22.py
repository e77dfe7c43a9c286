"""Checkers for the coding exercises of chapter 22 (the modern block)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

import attnbook.numpy as an
import attnbook.torch as at
from attnbook.exercises._capstone import PartsChecker
from attnbook.exercises._harness import BudgetChecker, Case, Checker, Mistake, _resolve, traced_peak
from attnbook.exercises.ch21 import _turn, check_rebase_rotary
from attnbook.torch import rms_norm

# The package's and PyTorch's own RMSNorm: each would do the half-precision exercise in one call.
_RMS_NORMS = (rms_norm, "attnbook.numpy.rms_norm", "torch.nn.functional.rms_norm", "torch.rms_norm")


class Float16Only(RuntimeError):
    """Raised when an answer meant to compute in float16 leaves it."""


_LEAVE_HALF = (torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.numpy, torch.Tensor.__array__,
               torch.Tensor.__float__, torch.Tensor.as_subclass)


class HalfTensor(torch.Tensor):
    """A float16 tensor whose every result must stay float16: an operation that gives a float32 or float64
    tensor (``.float()``, ``.to(torch.float32)``, ``mean(dtype=...)``, mixing with a float32 tensor), or takes
    the values out of PyTorch (``.item()``, ``.tolist()``, ``.numpy()``), raises ``Float16Only``."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in _LEAVE_HALF:
            raise Float16Only(f"{getattr(func, '__name__', func)}() takes the numbers out of float16: "
                              "compute in float16 only")
        out = super().__torch_function__(func, types, args, kwargs or {})
        outs = out if isinstance(out, (tuple, list)) else (out,)
        wide = [t.dtype for t in outs if isinstance(t, torch.Tensor) and t.is_floating_point()
                and t.dtype != torch.float16]
        if wide:
            raise Float16Only(f"{getattr(func, '__name__', func)} gives {wide[0]}: compute in float16 only")
        return out

    def __deepcopy__(self, memo):
        with torch._C.DisableTorchFunctionSubclass():
            return self.detach().clone().as_subclass(HalfTensor)


def half(t: torch.Tensor) -> HalfTensor:
    """``t`` in float16, as a ``HalfTensor``: to try an answer to the half-precision exercise by hand."""
    with torch._C.DisableTorchFunctionSubclass():
        return t.detach().to(torch.float16).as_subclass(HalfTensor)


def _plain(t: torch.Tensor) -> torch.Tensor:
    with torch._C.DisableTorchFunctionSubclass():
        return t.as_subclass(torch.Tensor)


@dataclass(repr=False)
class _HalfChecker(Checker):
    """A checker that hands the learner's function its tensors as ``HalfTensor``s (the same storage, so that a
    change in place is still seen), so that every step of its computation stays in float16."""

    def _run(self, fn, args, label, forbidden):
        halves = tuple(half(a) if isinstance(a, torch.Tensor) else a for a in args)
        got, problem = super()._run(fn, halves, label, forbidden)
        return (_plain(got) if isinstance(got, HalfTensor) else got), problem


def _half(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.float16)


def _half_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2203)
    half = _half  # the cases hold plain float16 tensors; the checker hands them to the answer as HalfTensors
    cases = [Case("x=[[3, 4]], gamma=1, eps=0", (half(torch.tensor([[3.0, 4.0]])), half(torch.ones(2)), 0.0)),
             Case("x=[[256, 0, 0, 0]]: one entry whose square is past float16's largest number, eps=1e-5",
                  (half(torch.tensor([[256.0, 0.0, 0.0, 0.0]])), half(torch.ones(4)), 1e-5)),
             Case("a row of zeros beside an ordinary row, eps=1e-5: the zero row's output is 0",
                  (half(torch.tensor([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5]])), half(torch.ones(3)), 1e-5)),
             Case("entries near float16's largest, +-65504, eps=1e-5",
                  (half(torch.tensor([[65504.0, -65504.0, 30000.0, 1.0]])), half(torch.tensor([1.0, 0.5, 2.0, 1.0])),
                   1e-5))]
    for scale, eps, why in ((300.0, 1e-5, "squares past 65504"),
                            (2e4, 1e-5, "squares past 65504 even after dividing by sqrt(d)"),
                            (1e-3, 1e-5, "eps larger than the mean square"),
                            (1e-2, 1e-6, "squares below float16's smallest normal number"),
                            (1.0, 1e-5, "ordinary sizes")):
        for shape in ((3, 16), (2, 4, 32)):
            x = (torch.randn(*shape, generator=g) * scale).clamp(-65504, 65504)
            gamma = 1 + 0.3 * torch.randn(shape[-1], generator=g)
            cases.append(Case(f"random x {shape} of scale {scale:g} ({why}), eps={eps:g}",
                              (half(x), half(gamma), eps)))
    for scale, eps in ((1e-6, 1e-6), (3e-7, 1e-7)):  # rows whose largest entry m has eps / m^2 past 65504
        x, gamma = torch.randn(3, 16, generator=g) * scale, 1 + 0.3 * torch.randn(16, generator=g)
        cases.append(Case(f"random x (3, 16) of scale {scale:g} (tiny rows: eps / max|x|^2 past 65504), "
                          f"eps={eps:g}", (half(x), half(gamma), eps)))
    x, gamma = torch.randn(4, 8, generator=g) * 50, 0.01 * (1 + 0.3 * torch.randn(8, generator=g))
    cases.append(Case("random x (4, 8) of scale 50 with a small gain, about 0.01, eps=1e-5",
                      (half(x), half(gamma), 1e-5)))
    return cases


def _half_reference(x, gamma, eps):
    # the float16 inputs, exactly, normalised in float64 (outside the HalfTensor's rule, which is the learner's)
    with torch._C.DisableTorchFunctionSubclass():
        return rms_norm(x.double(), gamma.double(), eps)


def _all_in_half(x, gamma, eps):
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * gamma


def _over_root_d(x, gamma, eps):
    # divide by sqrt(d) before squaring: safe up to 256 sqrt(d) only
    y = x / x.shape[-1] ** 0.5
    return x / torch.sqrt((y * y).sum(dim=-1, keepdim=True) + eps) * gamma


def _rescaled_eps_unscaled(x, gamma, eps):
    # divide by the largest entry first (safe from overflow) but add eps as it is, not eps / m^2
    m = x.abs().amax(dim=-1, keepdim=True)
    y = x / torch.where(m > 0, m, torch.ones_like(m))
    return y / torch.sqrt((y * y).mean(dim=-1, keepdim=True) + eps) * gamma


def _unfloored(x, gamma, eps):
    # divide by the largest entry and eps by its square, with no floor under m: eps / m / m overflows for tiny rows
    m = x.abs().amax(dim=-1, keepdim=True)
    y = x / torch.where(m > 0, m, torch.ones_like(m))
    return y * torch.rsqrt((y * y).mean(dim=-1, keepdim=True) + eps / m / m) * gamma


check_rms_norm_fp16 = _HalfChecker(
    name="rms_norm_fp16",
    doc="Check ``fn(x, gamma, eps) -> x.shape``: RMSNorm over the last axis of a float16 ``x`` with a float16 "
        "gain ``gamma`` ``(d,)``, computed in float16 only, finite and within float16's "
        "rounding of the float64 result for every finite float16 input. The inputs are "
        "``attnbook.exercises.ch22.HalfTensor``s, which refuse to leave float16 (``half(t)`` makes one).",
    reference=_half_reference,
    cases=_half_cases(),
    mistakes=(
        Mistake(_over_root_d, "dividing by sqrt(d) first only moves the limit to 256 sqrt(d): an entry near "
                "65504 still overflows. Divide by a number that depends on the entries themselves."),
        Mistake(_all_in_half, "an entry of 256 or more has a square past 65504, float16's largest number: the "
                "mean square is inf and every output 0. Bring the entries into range before squaring."),
        Mistake(_unfloored, "in a row whose largest entry m is below about sqrt(eps / 65504), eps / m / m "
                "overflows to inf and every output is 0, where the exact output is near x / sqrt(eps). Hold m at "
                "a floor (2^-8, say) before dividing: the identity holds for any m > 0."),
        Mistake(_rescaled_eps_unscaled, "after dividing x by m, eps must be divided by m^2 as well: the RMS of x "
                "is m sqrt(mean((x/m)^2) + eps / m^2)."),
    ),
    # float16 keeps 11 significant bits: a few roundings of 0.05% each; the small gain's case has outputs near
    # 0.01, where an error of 0.1% plus 0.001 is far outside
    atol=2e-4, rtol=4e-3,
    forbidden=_RMS_NORMS,
)


def _saved(x: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """What a forward pass keeps for the backward one: ``x_hat = x / RMS(x)`` and ``inv_rms = 1 / RMS(x)``."""
    inv_rms = torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps)
    return x * inv_rms, inv_rms


def _backward_case(label: str, x: torch.Tensor, gamma: torch.Tensor, eps: float, dy: torch.Tensor) -> Case:
    return Case(label, (*_saved(x, eps), gamma, dy))


def _backward_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2201)
    f64 = dict(dtype=torch.float64)
    cases = [_backward_case("x=[[3, 4]], gamma=1, eps=0, dy=[[1, 0]]", torch.tensor([[3.0, 4.0]], **f64),
                            torch.ones(2, **f64), 0.0, torch.tensor([[1.0, 0.0]], **f64)),
             _backward_case("dy parallel to x (x=[[1, 2, 2]], dy=x, gamma=1, eps=0): the scale direction",
                            torch.tensor([[1.0, 2.0, 2.0]], **f64), torch.ones(3, **f64), 0.0,
                            torch.tensor([[1.0, 2.0, 2.0]], **f64)),
             _backward_case("small x (scale 1e-2), eps=1e-2: eps matters, x_hat is far from unit mean square",
                            torch.randn(2, 5, generator=g, **f64) * 1e-2, torch.ones(5, **f64), 1e-2,
                            torch.randn(2, 5, generator=g, **f64))]
    for shape in ((3, 6), (2, 4, 8)):
        x = torch.randn(*shape, generator=g, **f64) * 3 + 1
        gamma = torch.randn(shape[-1], generator=g, **f64)
        dy = torch.randn(*shape, generator=g, **f64)
        cases.append(_backward_case(f"random x {shape} with mean about 1, random gamma and dy, eps=1e-5",
                                    x, gamma, 1e-5, dy))
    return cases


def _backward_reference(x_hat, inv_rms, gamma, dy):
    # the x and eps the saved values came from, then autograd through the package's rms_norm
    x = (x_hat / inv_rms).detach().clone().requires_grad_(True)
    eps = float((inv_rms.detach() ** -2 - (x.detach() ** 2).mean(dim=-1, keepdim=True)).mean().clamp(min=0.0))
    (dx,) = torch.autograd.grad(rms_norm(x, gamma, eps), x, dy)
    return dx


def _rms_held_constant(x_hat, inv_rms, gamma, dy):
    return dy * gamma * inv_rms


def _gamma_forgotten(x_hat, inv_rms, gamma, dy):
    return inv_rms * (dy - x_hat * (dy * x_hat).mean(dim=-1, keepdim=True))


def _sum_not_mean(x_hat, inv_rms, gamma, dy):
    g = dy * gamma
    return inv_rms * (g - x_hat * (g * x_hat).sum(dim=-1, keepdim=True))


def _sign_flipped(x_hat, inv_rms, gamma, dy):
    g = dy * gamma
    return inv_rms * (g + x_hat * (g * x_hat).mean(dim=-1, keepdim=True))


def _inv_rms_forgotten(x_hat, inv_rms, gamma, dy):
    g = dy * gamma
    return g - x_hat * (g * x_hat).mean(dim=-1, keepdim=True)


check_rms_norm_backward = Checker(
    name="rms_norm_backward",
    doc="Check ``fn(x_hat, inv_rms, gamma, dy) -> dx``: the gradient of ``sum(dy * rms_norm(x, gamma, eps))`` "
        "with respect to ``x``, from what the forward pass saved: ``x_hat = x / RMS(x)`` ``(..., d)`` and "
        "``inv_rms = 1 / RMS(x)`` ``(..., 1)`` (eps inside RMS); all float64, ``dy`` ``(..., d)``, ``gamma`` "
        "``(d,)``, ``dx`` shaped like ``x_hat``; without autograd.",
    reference=_backward_reference,
    cases=_backward_cases(),
    mistakes=(
        Mistake(_rms_held_constant, "the root mean square is a function of x too: moving one x_i changes every "
                "output through it, which adds a term along x."),
        Mistake(_gamma_forgotten, "the gain multiplies the output, so dy reaches the normalised vector as dy * "
                "gamma: use that product everywhere dy appears."),
        Mistake(_sum_not_mean, "the derivative of the MEAN square with respect to x_i is 2 x_i / d: the 1/d stays."),
        Mistake(_sign_flipped, "a larger root mean square makes every output smaller: the term along x enters "
                "with a minus sign."),
        Mistake(_inv_rms_forgotten, "y = gamma * x * inv_rms: every path from x to y carries the factor inv_rms "
                "(1 / RMS), so dx is scaled by it."),
    ),
    forbidden=("torch.autograd.grad", "torch.autograd.backward"),
)


# --- grouped-query attention, the queries grouped ----------------------------------------------------------


def _gqa_reference(q, k, v):
    group = q.shape[-3] // k.shape[-3]
    mask = an.causal_mask(q.shape[-2], k.shape[-2])  # the queries are the last T_q positions
    return an.scaled_dot_product_attention(q, an.repeat_kv(k, group), an.repeat_kv(v, group), mask=mask)[0]


def _gqa_cases() -> list[Case]:
    rng = np.random.default_rng(2222)
    cases = []
    for lead, h, h_kv, T_q, T_k, d, why in (((), 2, 1, 3, 3, 2, "multi-query: one key-value head"),
                                            ((), 4, 2, 5, 5, 4, "groups of two"),
                                            ((), 6, 3, 4, 4, 8, "three groups of two"),
                                            ((), 4, 4, 3, 3, 4, "groups of one: multi-head attention"),
                                            ((), 4, 2, 2, 6, 4, "2 new queries after 4 cached keys (T_q != T_k)"),
                                            ((2,), 4, 2, 4, 4, 4, "a batch of two")):
        q = rng.normal(size=(*lead, h, T_q, d))
        k, v = rng.normal(size=(*lead, h_kv, T_k, d)), rng.normal(size=(*lead, h_kv, T_k, d))
        cases.append(Case(f"q {q.shape}, k and v {k.shape}: {why}", (q, k, v)))
    return cases


def _gqa_variant(q, k, v, *, by_modulo=False, scale=True, mask_from_start=False):
    h, h_kv, T_q, T_k = q.shape[-3], k.shape[-3], q.shape[-2], k.shape[-2]
    kv_of = np.arange(h) % h_kv if by_modulo else np.arange(h) // (h // h_kv)
    scores = q @ np.swapaxes(k[..., kv_of, :, :], -1, -2) / (np.sqrt(q.shape[-1]) if scale else 1.0)
    mask = np.tril(np.ones((T_q, T_k), dtype=bool), k=0 if mask_from_start else T_k - T_q)
    scores = np.where(mask, scores, -np.inf)
    w = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (w / w.sum(axis=-1, keepdims=True)) @ v[..., kv_of, :, :]


def _kv_by_modulo(q, k, v):
    return _gqa_variant(q, k, v, by_modulo=True)


def _gqa_unscaled(q, k, v):
    return _gqa_variant(q, k, v, scale=False)


def _mask_from_start(q, k, v):
    return _gqa_variant(q, k, v, mask_from_start=True)


def _mask_rows_interleaved(q, k, v):
    """The query heads of a group stacked along the positions, as the chapter's solution does, with the stacked
    mask built by repeating each row g times (``np.kron``) where the rows are one head after another."""
    *lead, h, T_q, d = q.shape
    h_kv, T_k = k.shape[-3], k.shape[-2]
    g = h // h_kv
    scores = q.reshape(*lead, h_kv, g * T_q, d) @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    sees = np.kron(np.tril(np.ones((T_q, T_k)), k=T_k - T_q), np.ones((g, 1))).astype(bool)
    scores = np.where(sees, scores, -np.inf)
    w = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (w / w.sum(axis=-1, keepdims=True) @ v).reshape(q.shape)


_GQA_FORBIDDEN = (an.repeat_kv, an.grouped_query_attention, "attnbook.torch.repeat_kv",
                  "attnbook.torch.grouped_query_attention", "attnbook.torch.gqa.GroupedQueryAttention.forward",
                  "numpy.repeat", "torch.repeat_interleave", "torch.nn.functional.scaled_dot_product_attention")

def _gqa_big_case() -> Case:
    rng = np.random.default_rng(2223)
    q = rng.normal(size=(32, 2, 64))
    k, v = rng.normal(size=(1, 2048, 64)), rng.normal(size=(1, 2048, 64))
    return Case("q (32, 2, 64), k and v (1, 2048, 64): 32 query heads on one key-value head of 2048 positions",
                (q, k, v))


check_gqa_by_groups = BudgetChecker(
    name="gqa_by_groups",
    doc="Check ``fn(q, k, v) -> (..., h, T_q, d)``: causal grouped-query attention of ``q`` ``(..., h, T_q, d)`` "
        "against ``k``, ``v`` ``(..., h_kv, T_k, d)``, query head i with key-value head i // (h / h_kv), scores "
        "scaled by 1/sqrt(d), the queries the last T_q of the T_k positions; without repeating the key-value "
        "heads.",
    reference=_gqa_reference,
    cases=_gqa_cases(),
    mistakes=(
        Mistake(_kv_by_modulo, "query heads are grouped in a row: heads 0 .. g-1 share key-value head 0, the next "
                "g head 1 (i // g, not i % h_kv); group the query axis as (h_kv, g), not (g, h_kv)."),
        Mistake(_gqa_unscaled, "scale the scores by 1 / sqrt(d), the width of one head."),
        Mistake(_mask_rows_interleaved, "the stacked rows are the group's heads one after another, each with its T_q "
                "queries, so row r is query r % T_q: repeat the whole (T_q, T_k) mask g times (np.tile), not each "
                "of its rows g times in a row (np.kron, np.repeat)."),
        Mistake(_mask_from_start, "with T_q < T_k the queries are the LAST T_q positions: query i is at position "
                "T_k - T_q + i and sees keys up to it."),
    ),
    atol=1e-10,
    forbidden=_GQA_FORBIDDEN,
    big_case=_gqa_big_case(),
    # the scores, their exponentials and the weights, (32, 2, 2048) each, are 1 MiB apiece; one copy of k for
    # every query head is 32 MiB
    budget_bytes=8 * 2**20,
    budget_hint="it copies the key-value heads. Reshape the query heads into (..., h_kv, h / h_kv, T_q, d) and let "
                "broadcasting pair each group with its key-value head.",
)

# --- the capstone: a Llama-style block decoding one token at a time against its own cache ----------------

STEP_TRACE = ("norm1", "queries", "keys", "values", "attention", "norm2", "output")

STEP_HINTS = {
    "norm1": "the first RMSNorm: x_t divided by sqrt(mean of x_t**2 over the features + eps), times norm1.gamma "
             "(eps inside the root).",
    "queries": "the queries are norm1's output times self_attn.q_proj.W, split into n_heads heads of d_model / "
               "n_heads entries (head i takes entries i * d_head onwards), each rotated at position t = the "
               "number of cached keys, with base rope_base, pairs (i, i + d_head/2), counter-clockwise; shape "
               "(n_heads, d_head).",
    "keys": "the cache handed on: the cached keys, unchanged (they are rotated already), with the new key appended "
            "(norm1's output times self_attn.k_proj.W, n_kv_heads heads, rotated at t); shape (n_kv_heads, t + 1, "
            "d_head).",
    "values": "the values handed on: the cached values with the new value appended, not rotated; shape "
              "(n_kv_heads, t + 1, d_head).",
    "attention": "the stream after attention is x_t + (the new query attending to every cached key and the new "
                 "one, query head i with key-value head i // (n_heads / n_kv_heads), heads merged back) times "
                 "self_attn.out_proj.W: the residual is added.",
    "norm2": "the second RMSNorm (its gain is norm3.gamma, the package's name) normalises the stream after "
             "attention, not x_t.",
    "output": "the output is the stream after attention plus (silu(a fc1.W) * (a fc3.W)) fc2.W, with a the second "
              "norm's output: the residual is added again.",
}


def _block_of(params: dict) -> torch.nn.Module:
    """The package's Llama-style decoder block holding ``params``' weights, in float64."""
    d, d_ff = params["ff.fc1.W"].shape
    block = at.DecoderBlock(d, int(params["n_heads"]), d_ff, norm_first=True, activation="swiglu",
                            eps=float(params["eps"]), cross_attention=False, bias=False,
                            n_kv_heads=int(params["n_kv_heads"]), rotary=True, norm="rms",
                            rope_base=float(params["rope_base"])).double().eval()
    block.load_state_dict({k: torch.as_tensor(np.asarray(params[k], dtype=np.float64)) for k in block.state_dict()})
    return block


def _cache_holding(attn: torch.nn.Module, keys, values) -> at.KVCache:
    """A package ``KVCache`` that holds ``keys`` and ``values`` (``(h_kv, t, d_head)``) for ``attn``."""
    cache = at.KVCache()
    if keys.shape[1]:
        cache.keys[attn] = torch.as_tensor(np.asarray(keys, dtype=np.float64))[None]
        cache.values[attn] = torch.as_tensor(np.asarray(values, dtype=np.float64))[None]
        cache.seen[attn] = keys.shape[1]
    return cache


def _step_reference(x_t, params, keys, values, trace=None):
    """The package's block on one new token ``x_t`` (``(d_model,)``) through its own key-value cache holding
    ``keys`` and ``values``; its intermediate results and the cache it hands on in ``trace`` if asked."""
    block = _block_of(params)
    attn, h = block.self_attn, int(params["n_heads"])
    d, t = x_t.shape[-1], keys.shape[1]
    xt = torch.as_tensor(np.asarray(x_t, dtype=np.float64)).reshape(1, 1, d)
    with torch.no_grad():
        out = block(xt, cache=_cache_holding(attn, keys, values))
        if trace is not None:
            cache = _cache_holding(attn, keys, values)
            a = block.norm1(xt)
            after = xt + attn(a, causal=True, cache=cache)[0]
            q = attn.rope(attn.q_proj(a).view(1, 1, h, d // h).transpose(1, 2), t)  # (1, h, 1, d_head)
            trace.update(norm1=a[0, 0], queries=q[0, :, 0], keys=cache.keys[attn][0], values=cache.values[attn][0],
                         attention=after[0, 0], norm2=block.norm3(after)[0, 0], output=out[0, 0])
            trace.update({key: value.numpy() for key, value in trace.items() if key in STEP_TRACE})
    return out[0, 0].numpy()


def _random_block(seed: int, d: int, h: int, h_kv: int, d_ff: int, eps: float, base: float) -> dict:
    """A Llama-style block's weights as NumPy arrays (gains away from 1), with its settings."""
    g = np.random.default_rng(seed)
    d_head = d // h
    shapes = {"self_attn.q_proj.W": (d, d), "self_attn.k_proj.W": (d, h_kv * d_head),
              "self_attn.v_proj.W": (d, h_kv * d_head), "self_attn.out_proj.W": (d, d),
              "ff.fc1.W": (d, d_ff), "ff.fc3.W": (d, d_ff), "ff.fc2.W": (d_ff, d)}
    params = {name: g.normal(size=shape) / np.sqrt(shape[0]) for name, shape in shapes.items()}
    params.update({"norm1.gamma": 1 + 0.3 * g.normal(size=d), "norm3.gamma": 1 + 0.3 * g.normal(size=d),
                   "n_heads": h, "n_kv_heads": h_kv, "eps": eps, "rope_base": base})
    return params


def _step_cases() -> list[Case]:
    cases = []
    for seed, (t, d, h, h_kv, d_ff, eps, base, scale) in enumerate((
            (4, 8, 2, 1, 12, 1e-5, 1e4, 1.0), (0, 8, 2, 1, 12, 1e-5, 1e4, 1.0),
            (6, 16, 4, 2, 20, 0.1, 1e4, 1.0), (5, 12, 3, 3, 16, 1e-5, 100.0, 1.0),
            (1, 8, 4, 2, 8, 1e-5, 1e4, 1.0), (9, 16, 4, 1, 12, 1e-5, 1e4, 1.0),
            (40, 8, 2, 2, 10, 1e-2, 5e5, 0.05))):
        params = _random_block(2230 + seed, d, h, h_kv, d_ff, eps, base)
        x = scale * np.random.default_rng(seed).normal(size=(t + 1, d))
        block = _block_of(params)
        cache = at.KVCache()
        if t:
            with torch.no_grad():  # the package's own cache after the first t tokens
                block(torch.as_tensor(x[None, :t]), cache=cache)
            keys, values = (c[block.self_attn][0].numpy() for c in (cache.keys, cache.values))
        else:
            keys = values = np.zeros((h_kv, 0, d // h))
        cases.append(Case(f"token {t} of a text (scale {scale:g}), its cache holding {t} position(s); d_model={d}, "
                          f"{h} query heads, {h_kv} key-value head(s), d_ff={d_ff}, eps={eps:g}, rope_base={base:g}",
                          (x[t], params, keys, values)))
    return cases


_STEP_CASES = _step_cases()


def _step_variant(x_t, params, keys, values, *, sign=1.0, at_zero=False, rotate_new_key=True, sees_itself=True,
                  eps=True, residual=True, kv_by_modulo=False, rotate_values=False, second_norm_on_x=False):
    """One step of the block in NumPy, written out, with one thing changed: the typical mistakes (they may not
    call the package's norm, rotation or network, which the checker refuses in them as in a learner's answer)."""
    p = params
    d = x_t.shape[-1]
    h, h_kv = int(p["n_heads"]), int(p["n_kv_heads"])
    dh, t, base = d // h, keys.shape[1], float(p["rope_base"])
    e = float(p["eps"]) if eps else 0.0
    pos = np.array([0.0 if at_zero else sign * t])

    def norm(y, gamma):
        return y / np.sqrt((y * y).mean(axis=-1, keepdims=True) + e) * gamma

    def heads(y, n, rotate=True):  # (n d_head,) -> (n, 1, d_head)
        y = y.reshape(n, 1, dh)
        return np.stack([_turn(yh, pos, base) for yh in y]) if rotate else y

    a = norm(x_t, p["norm1.gamma"])
    q = heads(a @ p["self_attn.q_proj.W"], h)
    k = heads(a @ p["self_attn.k_proj.W"], h_kv, rotate=rotate_new_key)
    v = heads(a @ p["self_attn.v_proj.W"], h_kv, rotate=rotate_values)
    K = np.concatenate([keys, k], axis=1) if sees_itself else keys
    V = np.concatenate([values, v], axis=1) if sees_itself else values
    kv_of = np.arange(h) % h_kv if kv_by_modulo else np.arange(h) // (h // h_kv)
    s = q @ np.swapaxes(K[kv_of], -1, -2) / np.sqrt(dh)  # (h, 1, T_k)
    w = np.exp(s - s.max(axis=-1, keepdims=True, initial=-np.inf))  # no keys at all: no weights
    o = (w / w.sum(axis=-1, keepdims=True) @ V[kv_of]).reshape(d)
    after = (x_t if residual else 0) + o @ p["self_attn.out_proj.W"]
    a = norm(x_t if second_norm_on_x else after, p["norm3.gamma"])
    gate = a @ p["ff.fc1.W"]
    return (after if residual else 0) + (gate / (1 + np.exp(-gate)) * (a @ p["ff.fc3.W"])) @ p["ff.fc2.W"]


def _step_mistake(name: str, **change):
    """A typical mistake: one step of the block with ``change`` made (see ``_step_variant``)."""
    def mistake(x_t, params, keys, values, trace=None):
        return _step_variant(x_t, params, keys, values, **change)

    mistake.__name__ = mistake.__qualname__ = name
    return mistake


_rotated_at_zero = _step_mistake("_rotated_at_zero", at_zero=True)
_new_key_not_rotated = _step_mistake("_new_key_not_rotated", rotate_new_key=False)
_itself_not_seen = _step_mistake("_itself_not_seen", sees_itself=False)
_rotated_clockwise = _step_mistake("_rotated_clockwise", sign=-1.0)
_norm_without_eps = _step_mistake("_norm_without_eps", eps=False)
_no_residual = _step_mistake("_no_residual", residual=False)
_kv_heads_by_modulo = _step_mistake("_kv_heads_by_modulo", kv_by_modulo=True)
_values_rotated = _step_mistake("_values_rotated", rotate_values=True)
_second_norm_on_input = _step_mistake("_second_norm_on_input", second_norm_on_x=True)


def _traced(case: Case, call) -> tuple[dict, dict]:
    """The package's trace and the learner's on one case."""
    x_t, params, keys, values = case.args
    expected: dict = {}
    _step_reference(x_t, params, keys, values, trace=expected)
    got: dict = {}
    call(x_t.copy(), dict(params), keys.copy(), values.copy(), got)
    return expected, got


def _differs(value, expected) -> bool:
    try:
        value = np.asarray(value, dtype=np.float64)
        return not (value.shape == expected.shape and np.allclose(value, expected, atol=1e-8, rtol=1e-6))
    except (TypeError, ValueError):
        return True


def _first_step_disagreement(fn, case: Case, call) -> str | None:
    """Run the learner's step with a trace and name the first part whose values differ from the package's."""
    expected, got = _traced(case, call)
    if not got:
        return (f"To find the part that disagrees, fill the dict passed as `trace` (keys {', '.join(STEP_TRACE)}).")
    for key in STEP_TRACE:
        if key in got and _differs(got[key], expected[key]):
            return f"The first part that disagrees is {key}: {STEP_HINTS[key]}"
    return "Every traced part agrees with the package's: trace the parts you left out."


def _cache_handed_on(fn, case: Case, call) -> str | None:
    """Once the output agrees: the cache the learner hands on in ``trace`` (if any) must be the package's; after
    the last case, the whole step must attend without copying the key-value heads (``_held_by_step``)."""
    expected, got = _traced(case, call)
    for key in ("keys", "values"):
        if key in got and _differs(got[key], expected[key]):
            return (f"the output is right, but trace[{key!r}], the cache handed on to the next token, is not "
                    f"(input: {case.label}): {STEP_HINTS[key]}")
    if case is _STEP_CASES[-1]:
        return _held_by_step(fn, call)
    return None


# The whole step's memory on a long cache: 32 query heads on one key-value head of 8,192 positions. The cache
# is 1 MiB for the keys and 1 MiB for the values; the scores, their exponentials and the weights, (32, 8193)
# each, are 2 MiB apiece; one copy of the keys or the values for every query head is 32 MiB.
_STEP_BUDGET_MIB = 24  # the chapter's solution holds about 8 MiB; a copy of the keys alone, 32 MiB


@functools.cache
def _long_cache_case() -> Case:
    d, h, h_kv, t = 512, 32, 1, 8192
    params = _random_block(2299, d, h, h_kv, 64, 1e-5, 1e4)
    rng = np.random.default_rng(2299)
    keys, values = rng.normal(size=(h_kv, t, d // h)), rng.normal(size=(h_kv, t, d // h))
    return Case(f"a cache of {t} positions, d_model={d}, {h} query heads on {h_kv} key-value head",
                (rng.normal(size=d), params, keys, values))


def _held_by_step(fn, call) -> str | None:
    """The peak of NumPy's and Python's allocations while the step runs on ``_long_cache_case``: above the budget,
    the step copies the key-value heads, which the statement rules out for the whole step as for its part."""
    checker = check_llama_block_step
    if checker.watch(_resolve(checker.forbidden), fn, ()).trusted:
        return None  # a typical mistake, or an answer built from the reference in the tests
    case = _long_cache_case()
    x_t, params, keys, values = case.args
    args = (x_t.copy(), dict(params), keys.copy(), values.copy())
    with traced_peak() as held:
        call(*args)
    peak = held[0]
    if peak <= _STEP_BUDGET_MIB * 2**20:
        return None
    return (f"the values are right, but on {case.label} the step held {peak / 2**20:.1f} MiB at once, more than the "
            f"{_STEP_BUDGET_MIB} MiB it needs: it copies the key-value heads (one copy of the cached keys for every "
            "query head is 32 MiB here). Attend with gqa_by_groups, which pairs each group of query heads with its "
            "key-value head by reshaping the queries, without repeating the keys or the values.")


check_llama_block_step = PartsChecker(
    name="llama_block_step",
    allowed=(an.rms_norm, an.swiglu),  # the block's norm and network; attention is the exercise
    doc="Check ``fn(x_t, params, keys, values, trace=None) -> (d_model,)``: the package's Llama-style decoder "
        "block (pre-norm RMSNorm, rotary grouped-query causal attention, SwiGLU, no biases) on one new token "
        "``x_t`` at position t = ``keys.shape[1]``, its key-value cache ``keys`` and ``values`` of shape "
        "``(n_kv_heads, t, d_head)`` (keys rotated at their positions), its weights in the dict ``params`` (the "
        "block's state dict as NumPy arrays, with ``n_heads``, ``n_kv_heads``, ``eps`` and ``rope_base``). If "
        "``trace`` is a dict, fill it with " + ", ".join(f"``{k}``" for k in STEP_TRACE) + " (``keys`` and "
        "``values``: the cache with the new token appended, handed on to the next step). The package's NumPy "
        "``rms_norm`` and ``swiglu`` may be used; its rotations, attention, cache and modules may not. Pass a "
        "dict of your parts (``rebase_rotary``, ``gqa_by_groups``, ``llama_block_step``) to have each checked "
        "before the whole.",
    reference=_step_reference,
    cases=_STEP_CASES,
    mistakes=(
        Mistake(_rotated_at_zero, "the new token sits at position t, the number of keys already cached "
                "(keys.shape[1]): rotate its query and key at t, not at 0, and leave the cached keys as they are, "
                "rotated once at their own positions (rotating them again at t has the same effect)."),
        Mistake(_new_key_not_rotated, "the cache holds keys rotated at their own positions, and the query meets "
                "them all: rotate the new key at t before appending it."),
        Mistake(_itself_not_seen, "append the new key and value to the cache before attending: the new token "
                "attends to itself too."),
        Mistake(_rotated_clockwise, "rotary positions: the queries and keys are rotated counter-clockwise, by "
                "+position * theta_i (check your rebase_rotary)."),
        Mistake(_norm_without_eps, "RMSNorm: eps goes inside the square root, added to the mean square."),
        Mistake(_no_residual, "the residual connections: each sublayer's output is ADDED to the stream "
                "(x_t + attention(norm1(x_t)), then h + ffn(norm2(h)))."),
        Mistake(_kv_heads_by_modulo, "grouped-query attention: query head i uses key-value head i // (n_heads / "
                "n_kv_heads), heads in a row sharing one."),
        Mistake(_values_rotated, "rotary positions rotate the queries and keys only: the values are not rotated."),
        Mistake(_second_norm_on_input, "the second norm: it normalises the stream after attention, not the "
                "block's input."),
    ),
    atol=1e-8,
    rtol=1e-6,
    forbidden=(at.DecoderBlock.forward, at.MultiHeadAttention.forward, at.SwiGLU.forward, at.RMSNorm.forward,
               at.GPT.forward, at.KVCache.update, "attnbook.torch.rotary.RotaryTables.forward", *_GQA_FORBIDDEN,
               an.apply_rotary, an.apply_rotary_complex, an.rotate_half, "attnbook.torch.apply_rotary",
               "attnbook.torch.apply_rotary_complex", "attnbook.torch.rotate_half", "attnbook.torch.swiglu",
               rms_norm, "torch.nn.functional.rms_norm", "torch.rms_norm"),
    # the learner's own earlier functions; the norm and the network are the package's NumPy ones
    parts=(("rebase_rotary", check_rebase_rotary), ("gqa_by_groups", check_gqa_by_groups)),
    diagnose=_first_step_disagreement,
    extra=_cache_handed_on,
)
