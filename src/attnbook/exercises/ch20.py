"""Checkers for the coding exercises of chapter 20 (attention at scale)."""

from __future__ import annotations

import copy
import functools
import hashlib
import math
import tracemalloc
import weakref
from dataclasses import dataclass

import numpy as np

from attnbook.exercises._harness import (
    Case,
    Checker,
    Mistake,
    Outcome,
    Verdict,
    _guarded_compare,
    _resolve,
    traced_peak,
)
from attnbook.numpy import flash_attention_backward, scaled_dot_product_attention, tiled_attention
from attnbook.torch import flash_attention_backward as torch_flash_attention_backward

HOLD_HINT = "keep running statistics, not the blocks: each block must be let go before the next but one is read."


class BlockStream:
    """Blocks of one or more arrays along their first axis, to be read once, left to right.

    Iterating yields a copy of each block in turn (for several arrays, a tuple of their blocks), as data
    arriving in pieces would; a second pass raises ``RuntimeError``, and so does keeping the blocks: when
    block ``i + 2`` is asked for, block ``i`` must be gone, and the memory held since the first block was
    read (``tracemalloc``) must stay below a few blocks' worth, so that copies of the blocks are refused too.
    ``whole()`` gives the arrays to the checker.
    """

    SLACK_BYTES = 32 * 2**10  # what a one-pass answer's loop may hold besides the blocks (frames, scalars)

    def __init__(self, arrays: tuple[np.ndarray, ...], block_size: int):
        self._arrays = tuple(np.array(a, dtype=np.float64) for a in arrays)
        self.block_size = block_size
        self._read = False

    def whole(self):
        """The arrays themselves (one array, or a tuple of them): for the reference, not for the learner."""
        return self._arrays[0] if len(self._arrays) == 1 else self._arrays

    def __iter__(self):
        if self._read:
            raise RuntimeError("these blocks can be read only once: compute everything in one pass over them.")
        self._read = True
        return self._blocks()

    def _blocks(self):
        handed = []  # weak references to the arrays of each block handed out
        one_block = sum(a[:self.block_size].nbytes for a in self._arrays)
        # an answer keeps running statistics, a block or two and their temporaries; a copy of every block
        # read so far grows with the number of blocks, past this
        allowed = 4 * one_block + self.SLACK_BYTES
        was_tracing = tracemalloc.is_tracing()
        if not was_tracing:
            tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        try:
            for i, start in enumerate(range(0, len(self._arrays[0]), self.block_size)):
                if i >= 2 and any(ref() is not None for ref in handed[i - 2]):
                    raise RuntimeError(f"block {i - 1} is still held when block {i + 1} is read: {HOLD_HINT}")
                held = tracemalloc.get_traced_memory()[0] - base
                if i >= 2 and held > allowed:
                    raise RuntimeError(f"{held:,} bytes held after {i} blocks (copies?): {HOLD_HINT}")
                block = tuple(a[start:start + self.block_size].copy() for a in self._arrays)
                handed.append([weakref.ref(b) for b in block])
                yield block[0] if len(block) == 1 else block
                del block
        finally:
            if not was_tracing:
                tracemalloc.stop()

    def __deepcopy__(self, memo):
        return BlockStream(copy.deepcopy(self._arrays, memo), self.block_size)

    def __eq__(self, other):  # the same data, whether read or not: reading is not changing
        return (isinstance(other, BlockStream) and self.block_size == other.block_size
                and len(self._arrays) == len(other._arrays)
                and all(np.array_equal(a, b) for a, b in zip(self._arrays, other._arrays, strict=True)))

    __hash__ = None

    def __repr__(self):
        shapes = ", ".join(str(a.shape) for a in self._arrays)
        return f"BlockStream({shapes}, block_size={self.block_size})"


def _per_position(n_heads, n_kv_heads, d_head, *, lse=True, kv_heads=None):
    """Numbers kept per position, head count included: Q and O (n_heads), K and V (n_kv_heads), and lse."""
    kv = n_kv_heads if kv_heads is None else kv_heads
    return 2 * d_head * (n_heads + kv) + (n_heads if lse else 0)


def _largest_T(a, b, c):
    """The largest integer T >= 0 with a T^2 + b T <= c (a >= 0, b > 0), in exact integer arithmetic."""
    if c < 0:
        return 0
    if a == 0:
        return c // b
    T = (math.isqrt(b * b + 4 * a * c) - b) // (2 * a)
    while a * (T + 1) ** 2 + b * (T + 1) <= c:
        T += 1
    while T > 0 and a * T * T + b * T > c:
        T -= 1
    return T


def _longest_context(memory_bytes, batch, n_layers, n_heads, n_kv_heads, d_head, bytes_per_value, tiled, *,
                     lse=True, kv_heads=None, linear=True, per_batch=True, round_up=False):
    """The reference, with a switch for each mistake."""
    units = memory_bytes // ((batch if per_batch else 1) * n_layers * bytes_per_value)  # numbers per sequence-layer
    b = _per_position(n_heads, n_kv_heads, d_head, lse=lse and tiled, kv_heads=kv_heads)
    if tiled:
        return max(0, -(-units // b) if round_up else units // b)
    if not linear:
        return math.isqrt(max(0, units) // n_heads)
    return _largest_T(n_heads, b, units)


def _context_reference(memory_bytes, batch, n_layers, n_heads, n_kv_heads, d_head, bytes_per_value, tiled):
    return _longest_context(memory_bytes, batch, n_layers, n_heads, n_kv_heads, d_head, bytes_per_value, tiled)


def _context_kv_as_queries(*args):
    return _longest_context(*args, kv_heads=args[3])  # n_heads key-value heads: grouping ignored


# the other mistakes, one switch each
_context_no_lse = functools.partial(_longest_context, lse=False)
_context_P_only = functools.partial(_longest_context, linear=False)
_context_one_sequence = functools.partial(_longest_context, per_batch=False)
_context_rounded_up = functools.partial(_longest_context, round_up=True)


def _context_cases() -> list[Case]:
    def plain_bytes(T, batch, L, h, h_kv, d, bpv):  # the bytes plain attention keeps for T positions
        return batch * L * bpv * (h * T * T + T * _per_position(h, h_kv, d, lse=False))

    tiled_1000 = 4 * 3 * 2 * 1000 * _per_position(4, 2, 16)  # batch 4, 3 layers, 16-bit, 1,000 positions
    cases = [
        Case("tiled: exactly 1,000 positions fit (batch 4, 3 layers, 4 heads, 2 kv heads of 16, 16-bit)",
             (tiled_1000, 4, 3, 4, 2, 16, 2, True)),
        Case("tiled: one byte short of 1,000 positions", (tiled_1000 - 1, 4, 3, 4, 2, 16, 2, True)),
        Case("plain: exactly 1,000 positions fit (the same model)",
             (plain_bytes(1000, 4, 3, 4, 2, 16, 2), 4, 3, 4, 2, 16, 2, False)),
        Case("plain: one byte short of 1,000 positions", (plain_bytes(1000, 4, 3, 4, 2, 16, 2) - 1, 4, 3, 4, 2, 16,
                                                          2, False)),
        Case("plain and tiled: not even one position fits in 100 bytes", (100, 2, 2, 2, 2, 8, 4, False)),
        Case("tiled: 100 bytes", (100, 2, 2, 2, 2, 8, 4, True)),
    ]
    for memory, batch, L, h, h_kv, d, bpv in ((24 * 2**30, 8, 32, 32, 8, 128, 2), (80 * 10**9, 1, 80, 64, 8, 128, 2),
                                              (16 * 2**30, 4, 48, 25, 25, 64, 4)):
        for tiled in (False, True):
            cases.append(Case(f"{'tiled' if tiled else 'plain'}: {memory:,} bytes, batch {batch}, {L} layers, {h} "
                              f"heads, {h_kv} kv heads of {d}, {8 * bpv}-bit", (memory, batch, L, h, h_kv, d, bpv,
                                                                               tiled)))
    return cases


check_longest_context = Checker(
    name="longest_context",
    doc="Check ``fn(memory_bytes, batch, n_layers, n_heads, n_kv_heads, d_head, bytes_per_value, tiled) -> int``: "
        "the most positions per sequence for which what the attention layers keep for the backward pass fits in "
        "``memory_bytes``: per layer and sequence, Q and O (``n_heads`` heads of ``d_head``), K and V "
        "(``n_kv_heads`` heads), and the weights P (``n_heads`` x T x T) for plain attention or the log-sum-exp "
        "(``n_heads`` numbers per position) for tiled attention; every number ``bytes_per_value`` bytes.",
    reference=_context_reference,
    cases=_context_cases(),
    mistakes=(
        Mistake(_context_no_lse, "the tiled backward pass recomputes P from L, the log-sum-exp of each query's "
                "scores: one number per query and head, kept beside Q, K, V and O."),
        Mistake(_context_kv_as_queries, "with grouped-query attention the keys and values have n_kv_heads heads, "
                "not n_heads: only the queries, the output, P and L have one per query head."),
        Mistake(_context_P_only, "P is not all plain attention keeps: Q, K, V and O grow with T as well, so solve "
                "the quadratic h T^2 + b T <= memory, not h T^2 <= memory."),
        Mistake(_context_one_sequence, "each sequence of the batch keeps its own activations: the memory is shared "
                "by batch sequences."),
        Mistake(_context_rounded_up, "round down: a position whose activations do not fit entirely does not fit."),
    ),
)


# The queries, keys, values and mask each case's partial results came from, for the reference only: the
# learner receives a plain list of triples, which cannot lead back to them.
_SOURCES: dict[str, tuple] = {}


def _fingerprint(parts) -> str:
    digest = hashlib.sha256()
    for triple in parts:
        for array in triple:
            array = np.ascontiguousarray(array, dtype=np.float64)
            digest.update(str(array.shape).encode())
            digest.update(array.tobytes())
    return digest.hexdigest()


def _partials(Q, K, V, mask, splits) -> list:
    # each part: the running maximum m, the sum l of exp(s - m), and acc = sum exp(s - m) v over its keys
    S = Q @ K.T / math.sqrt(Q.shape[-1])
    S = np.where(mask, S, -np.inf)
    parts = []
    for lo, hi in zip(splits[:-1], splits[1:], strict=True):
        s = S[:, lo:hi]
        m = s.max(axis=1)
        with np.errstate(invalid="ignore"):  # a query with no key in this part: m = -inf, nothing to add
            e = np.where(np.isfinite(m)[:, None], np.exp(s - m[:, None]), 0.0)
        parts.append((m, e.sum(axis=1), e @ V[lo:hi]))
    _SOURCES[_fingerprint(parts)] = (Q, K, V, mask)
    return parts


def _merged_reference(parts):
    Q, K, V, mask = _SOURCES[_fingerprint(parts)]
    return scaled_dot_product_attention(Q, K, V, mask=mask)[0]


def _merge_plain_average(parts):
    return sum(acc / ell[:, None] for _, ell, acc in parts) / len(parts)


def _merge_no_rescale(parts):
    return sum(acc for _, _, acc in parts) / sum(ell for _, ell, _ in parts)[:, None]


def _merge_rescale_sum_only(parts):
    M = np.max([m for m, _, _ in parts], axis=0)
    L = sum(ell * np.exp(m - M) for m, ell, _ in parts)
    return sum(acc for _, _, acc in parts) / L[:, None]


def _merge_cases() -> list[Case]:
    rng = np.random.default_rng(2021)
    cases = []
    for T_q, T_k, d, splits, label in ((1, 8, 4, (0, 4, 8), "one query, two halves of 8 keys"),
                                       (3, 10, 4, (0, 3, 4, 10), "three queries, parts of 3, 1 and 6 keys"),
                                       (4, 12, 8, (0, 12), "four queries, one part holding every key")):
        Q, K, V = rng.normal(size=(T_q, d)), rng.normal(size=(T_k, d)), rng.normal(size=(T_k, d))
        cases.append(Case(label, (_partials(Q, K, V, np.ones((T_q, T_k), dtype=bool), list(splits)),)))
    Q, K, V = rng.normal(size=(2, 4)) * 40, rng.normal(size=(9, 4)) * 40, rng.normal(size=(9, 3))
    cases.append(Case("two queries, scores in the hundreds (exp overflows without a maximum), parts of 5 and 4",
                      (_partials(Q, K, V, np.ones((2, 9), dtype=bool), [0, 5, 9]),)))
    Q, K, V = rng.normal(size=(4, 4)), rng.normal(size=(8, 4)), rng.normal(size=(8, 2))
    causal = np.tril(np.ones((4, 8), dtype=bool), k=4)  # the last 4 of 8 positions, as with a cache
    cases.append(Case("four queries under a causal mask, parts of 4, 2 and 2 keys: in the last part, the first "
                      "queries see no key (m = -inf, l = 0)", (_partials(Q, K, V, causal, [0, 4, 6, 8]),)))
    return cases


check_merge_partials = Checker(
    name="merge_partials",
    doc="Check ``fn(parts) -> O``: attention ``(T_q, d_v)`` from partial results ``(m, l, acc)`` over disjoint sets "
        "of keys, each ``m`` and ``l`` ``(T_q,)`` and ``acc`` ``(T_q, d_v)``.",
    reference=_merged_reference,
    cases=_merge_cases(),
    mistakes=(
        Mistake(_merge_plain_average, "the parts do not weigh the same: a part whose keys score higher holds more "
                "of each query's weight. Weigh each part by its share of the total sum."),
        Mistake(_merge_no_rescale, "each part's l and acc are measured against its own maximum: bring them to a "
                "common one, multiplying by exp(m_i - M), before adding."),
        Mistake(_merge_rescale_sum_only, "acc was measured against the part's maximum too: rescale it by "
                "exp(m_i - M) as you rescale l."),
    ),
    atol=1e-12,
    rtol=1e-10,
)


def _one_query(q, blocks):
    # the output and the log-sum-exp of the scaled scores, from the package's tiled attention on the whole
    K, V = blocks.whole()
    return tiled_attention(q[None, :], K, V, block_q=1, block_k=len(K))[0]


def _lse_blocks(q, blocks, *, rescale_o=True, scale=None, l_is_max=False):
    """The log-space loop with a switch for each mistake."""
    c = 1 / math.sqrt(q.shape[0]) if scale is None else scale
    L, o = -math.inf, 0.0
    for K_block, V_block in blocks:
        s = K_block @ q * c
        top = max(L, float(s.max()))
        L_new = top if l_is_max else top + math.log(math.exp(L - top) + float(np.exp(s - top).sum()))
        o = (math.exp(L - L_new) if rescale_o else 1.0) * o + np.exp(s - L_new) @ V_block
        L = L_new
    return o


def _o_not_rescaled(q, blocks):
    return _lse_blocks(q, blocks, rescale_o=False)


def _l_is_the_max(q, blocks):
    return _lse_blocks(q, blocks, l_is_max=True)


def _no_scale(q, blocks):
    return _lse_blocks(q, blocks, scale=1.0)


def _keys_at_once(q, blocks):
    pairs = list(blocks)
    K, V = np.concatenate([k for k, _ in pairs]), np.concatenate([v for _, v in pairs])
    s = K @ q / math.sqrt(len(q))
    L = float(s.max() + np.log(np.exp(s - s.max()).sum()))
    return np.exp(s - L) @ V


def _query_cases() -> list[Case]:
    rng = np.random.default_rng(2022)
    cases = []
    for n, d, block, spread in ((5, 2, 2, 1.0), (12, 4, 5, 3.0), (33, 8, 8, 4.0), (20, 3, 1, 6.0)):
        q = rng.normal(size=d) * spread
        K, V = rng.normal(size=(n, d)) * spread, rng.normal(size=(n, 3))
        K[n // 2] = q * 2  # a late key that raises the maximum: the rescaling matters
        cases.append(Case(f"q of size {d}, {n} keys and values in blocks of {block}", (q, BlockStream((K, V), block))))
    q = np.array([30.0, -20.0])
    K, V = np.array([[30.0, 0.0], [31.0, 1.0], [29.0, 2.0], [-40.0, 0.0]]), rng.normal(size=(4, 2))
    cases.append(Case("scores near 640, in blocks of 2 (exp overflows without a shift)", (q, BlockStream((K, V), 2))))
    q, K, V = rng.normal(size=8), rng.normal(size=(4096, 8)), rng.normal(size=(4096, 4))
    cases.append(Case("q of size 8, 4,096 keys and values in 64 blocks of 64 (384 KiB: copies of them all do not "
                      "fit in what a one-pass answer holds)", (q, BlockStream((K, V), 64))))
    return cases


check_blockwise_attention = Checker(
    name="blockwise_attention",
    doc="Check ``fn(q, blocks) -> o``: one query's attention output ``(d_v,)`` over (K_block, V_block) pairs read "
        "once, keeping only the log-sum-exp L of the scores so far and the output normalised by it.",
    reference=_one_query,
    cases=_query_cases(),
    mistakes=(
        Mistake(_o_not_rescaled, "the output so far is normalised by the old total, exp(L): when a block arrives, "
                "multiply it by exp(L - L_new) before adding the block's terms."),
        Mistake(_l_is_the_max, "L is the logarithm of the whole sum of exp(s), not the largest score: add the "
                "logarithm of the sum of exp(s - max) to the maximum, or the output's weights do not sum to 1."),
        Mistake(_no_scale, "scale the scores by 1 / sqrt(d_k) as plain attention does."),
        Mistake(_keys_at_once, HOLD_HINT),
    ),
    atol=1e-10,
)


# --- the tiled backward pass -------------------------------------------------------------------------

FULL_P_HINT = ("recompute each tile of P from its scores and lse, and let it go: never hold the whole (T, T) "
               "matrix of weights.")


def _tiled_backward(Q, K, V, O, dO, lse, block):  # noqa: E741 (the papers' name for the output)
    return flash_attention_backward(Q, K, V, O, dO, lse, block_q=block, block_k=block)


def _tiles_backward(Q, K, V, O, dO, lse, block, *, use_D=True, scale=None, per_tile=False):  # noqa: E741
    """The tiled loop with a switch for each mistake: D left out, the wrong scale, or each tile's weights
    normalised over the tile's own keys (``per_tile``) instead of the whole row's."""
    scale = 1.0 / math.sqrt(Q.shape[-1]) if scale is None else scale
    D = (dO * O).sum(-1) if use_D else np.zeros(len(Q))
    dQ, dK, dV = np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)
    for k0 in range(0, len(K), block):
        Kb, Vb = K[k0:k0 + block], V[k0:k0 + block]
        for q0 in range(0, len(Q), block):
            S = Q[q0:q0 + block] @ Kb.T * scale
            if per_tile:  # a softmax over the tile alone: its weights sum to 1 within the tile
                P = np.exp(S - S.max(axis=1, keepdims=True))
                P /= P.sum(axis=1, keepdims=True)
            else:
                P = np.exp(S - lse[q0:q0 + block, None])
            dV[k0:k0 + block] += P.T @ dO[q0:q0 + block]
            dS = P * (dO[q0:q0 + block] @ Vb.T - D[q0:q0 + block, None])
            dQ[q0:q0 + block] += dS @ Kb * scale
            dK[k0:k0 + block] += dS.T @ Q[q0:q0 + block] * scale
    return dQ, dK, dV


def _forgot_D(Q, K, V, O, dO, lse, block):  # noqa: E741
    return _tiles_backward(Q, K, V, O, dO, lse, block, use_D=False)


def _scale_once_more(Q, K, V, O, dO, lse, block):  # noqa: E741
    dQ, dK, dV = _tiles_backward(Q, K, V, O, dO, lse, block)
    return dQ / math.sqrt(Q.shape[-1]), dK / math.sqrt(Q.shape[-1]), dV  # the scale applied twice


def _softmax_per_tile(Q, K, V, O, dO, lse, block):  # noqa: E741
    return _tiles_backward(Q, K, V, O, dO, lse, block, per_tile=True)


def _full_P(Q, K, V, O, dO, lse, block):  # noqa: E741
    P = np.exp(Q @ K.T / math.sqrt(Q.shape[-1]) - lse[:, None])  # (T, T): right values, quadratic memory
    dS = P * (dO @ V.T - (dO * O).sum(-1, keepdims=True))
    return dS @ K / math.sqrt(Q.shape[-1]), dS.T @ Q / math.sqrt(Q.shape[-1]), P.T @ dO


def _backward_case(T: int, d: int, block: int, seed: int) -> Case:
    rng = np.random.default_rng(seed)
    Q, K, V, dO = rng.normal(size=(4, T, d))
    O, lse = tiled_attention(Q, K, V, block_q=block, block_k=block, return_lse=True)  # noqa: E741
    return Case(f"T = {T}, d = {d}, tiles of {block} x {block}", (Q, K, V, O, dO, lse, block))


class _ReadFlag(np.ndarray):
    """An array that notes (in ``seen``, shared by its views) whether any operation read its values."""

    seen: list[bool]

    def __array_finalize__(self, obj):
        self.seen = getattr(obj, "seen", [False])

    def _mark(self):
        self.seen[0] = True

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        self._mark()
        plain = tuple(np.asarray(x) if isinstance(x, _ReadFlag) else x for x in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(np.asarray(x) if isinstance(x, _ReadFlag) else x for x in kwargs["out"])
        return getattr(ufunc, method)(*plain, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        self._mark()
        return super().__array_function__(func, types, args, kwargs)

    def __getitem__(self, key):
        self._mark()
        return np.asarray(self)[key]

    def __array__(self, dtype=None, copy=None):
        self._mark()
        return self.view(np.ndarray) if dtype is None else self.view(np.ndarray).astype(dtype)


TILE_SOFTMAX_HINT = ("each tile's weights were normalised over that tile's keys alone, as if the tile were the "
                     "whole row: a weight is exp(S - lse), with lse the log of the sum over every key of the row, "
                     "so that a row's weights sum to 1 across all of its tiles, not within each.")
D_FOLLOWS_O_HINT = ("the values are right, but the gradients did not change when O did: with an O that is not P V "
                    "(O doubled) they must follow D = rowsum(dO * O) of the O given. An answer that finds D by an "
                    "extra pass over the tiles of P gives the same values on every true output; the exercise asks "
                    "for D from O, before the loop, without that pass.")
D_HINT = ("the values are right, but it never reads O: D = rowsum(dO * O), from the output and its gradient, is the "
          "softmax's correction for each row, with no extra pass over the tiles of P to find it.")


@dataclass(repr=False)
class _TiledChecker(Checker):
    """A checker that, once the values are right, also measures the peak memory of one large case."""

    big_case: Case | None = None  # T large beside the tiles: a (T, T) matrix dwarfs the gradients and a tile

    def __call__(self, fn):
        verdict = super().__call__(fn)
        if not verdict or self.big_case is None:
            return verdict
        # D must come from O: an answer that finds it by a first pass over the tiles never reads O at all
        args = list(copy.deepcopy(self.cases[0].args))
        if not self.watch(_resolve(self.forbidden), fn, tuple(args)).trusted:  # not a mistake, nor the reference
            tracked = np.asarray(args[3]).view(_ReadFlag)
            tracked.seen = [False]
            args[3] = tracked
            _, problem = self._run(fn, tuple(args), self.cases[0].label, _resolve(self.forbidden))
            if problem is not None:
                return Verdict(False, f"{self.name}: {problem.text}", outcome=problem.outcome)
            if not tracked.seen[0]:
                return Verdict(False, f"{self.name}: {D_HINT} (input: {self.cases[0].label})")
            # reading O is not enough (np.zeros_like(O) reads it): the gradients must follow it. With O
            # doubled, D = rowsum(dO * O) doubles, and an answer that sums D over the tiles of P does not see it
            moved = list(copy.deepcopy(self.cases[0].args))
            moved[3] = 2 * np.asarray(moved[3])
            label = f"{self.cases[0].label}, O doubled"
            expected = self.reference(*copy.deepcopy(moved))
            got, problem = self._run(fn, tuple(moved), label, _resolve(self.forbidden))
            if problem is not None:
                return Verdict(False, f"{self.name}: {problem.text}", outcome=problem.outcome)
            if _guarded_compare(expected, got, self.atol, self.rtol) is not None:
                return Verdict(False, f"{self.name}: {D_FOLLOWS_O_HINT} (input: {label})",
                               outcome=Outcome.WRONG_VALUE)
        Q, K, V, O, dO, lse, block = copy.deepcopy(self.big_case.args)  # noqa: E741
        allowed = 8 * len(Q) * len(K) // 2  # half a (T, T) matrix of float64 weights: far above the gradients
        try:
            with traced_peak() as held, np.errstate(all="ignore"):
                fn(Q, K, V, O, dO, lse, block)
        except Exception:  # it passed the cases: a failure here would be the checker's problem, not a verdict
            return verdict
        peak = held[0]
        if peak > allowed:
            return Verdict(False, f"{self.name}: the values are right, but on {self.big_case.label} it held "
                                  f"{peak / 2**20:.1f} MiB at once, more than half a (T, T) matrix of "
                                  f"weights ({allowed / 2**20:.1f} MiB): {FULL_P_HINT}")
        return verdict


check_tiled_backward = _TiledChecker(
    name="tiled_backward",
    doc="Check ``fn(Q, K, V, O, dO, lse, block) -> (dQ, dK, dV)``: attention's backward pass, tile by tile.",
    reference=_tiled_backward,
    cases=[_backward_case(8, 2, 4, 0), _backward_case(13, 3, 5, 1), _backward_case(40, 4, 16, 2),
           _backward_case(33, 4, 7, 3)],
    mistakes=(
        Mistake(_forgot_D, "the softmax's backward subtracts D = rowsum(dO * O) from dP before multiplying by P."),
        Mistake(_scale_once_more, "the scores are Q K^T / sqrt(d): dQ and dK carry that factor once, not twice."),
        Mistake(_softmax_per_tile, TILE_SOFTMAX_HINT),
        Mistake(_full_P, FULL_P_HINT),
    ),
    atol=1e-10,
    big_case=_backward_case(512, 8, 32, 4),
    # the package's tiled backward (and its PyTorch twin) answers in one call; chapter 19's and autograd's hold
    # the whole P
    forbidden=(flash_attention_backward, torch_flash_attention_backward, "attnbook.numpy.backprop.attention_backward",
               "torch.autograd.grad", "torch.autograd.backward"),
)
