"""``python -m attnbook.bench attention`` (chapter 20): what attention costs, in time and memory, as T grows.

NumPy's peak memory is measured with ``tracemalloc``, which sees every array NumPy allocates: the peak of
the bytes allocated during one call, the output included, the inputs not. PyTorch's allocations do not go
through Python's allocator; ``torch.profiler`` with ``profile_memory=True`` records them per operator, and
the figure given is the sum of all bytes allocated during one call (output included): an upper bound of
its peak, equal to it when nothing is freed before the last allocation.

On a machine shared with other work, run it with one thread per library
(``OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1``): OpenBLAS threads that wait for a busy core make the many
small products of tiled attention many times slower, which measures the load, not the algorithm.
"""

from __future__ import annotations

import functools
import math
import os
import platform
import time
import tracemalloc

import numpy as np
import torch
import torch.nn.functional as F

from attnbook.numpy.attention import scaled_dot_product_attention
from attnbook.numpy.flash import tile_schedule, tiled_attention
from attnbook.numpy.masks import causal_mask

D_HEAD = 64
BLOCK = 128
MIB = 2**20


def _inputs(T: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((1, T, D_HEAD), dtype=np.float32) for _ in range(3))


def _best_time(fn, repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        tic = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - tic)
    return best


def _traced_peak(fn) -> float:
    """Peak bytes NumPy allocates while ``fn`` runs, in MiB."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / MIB
    finally:
        tracemalloc.stop()


def _repeats(T: int) -> int:
    return 5 if T <= 1024 else 3 if T <= 4096 else 1


def torch_run(backend: str, T: int, causal: bool = False) -> tuple[float, float]:
    """Seconds (best of a few) and MiB allocated (``torch.profiler``) of PyTorch's SDPA with one backend."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.profiler import ProfilerActivity, profile

    q, k, v = (torch.from_numpy(a)[None] for a in _inputs(T))  # (1, 1, T, d_head)
    with sdpa_kernel(getattr(SDPBackend, backend)):
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # warm-up
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        allocated = sum(max(e.self_cpu_memory_usage, 0) for e in prof.events()) / MIB
        seconds = _best_time(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), _repeats(T))
    return seconds, allocated


def cpu_backends() -> list[str]:
    """The SDPA backends that run on this CPU, tried one at a time."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(1, 1, 16, D_HEAD)
    found = []
    for name in ("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION"):
        try:
            with sdpa_kernel(getattr(SDPBackend, name)):
                F.scaled_dot_product_attention(q, q, q)
            found.append(name)
        except (RuntimeError, AttributeError):
            pass
    return found


def bench_lengths(lengths: list[int], max_plain_gib: float, backends: list[str]) -> None:
    print(f"\none head, d_head = {D_HEAD}, float32, tiles of {BLOCK} x {BLOCK}; time in ms (best of 5, 3 or 1); "
          "memory: MiB (NumPy: peak, tracemalloc; PyTorch: allocated during the call, torch.profiler)")
    head = f"{'T':>6} | {'plain ms':>9} {'MiB':>7} | {'tiled ms':>9} {'MiB':>6}"
    head += "".join(f" | {b.lower() + ' ms':>11} {'MiB':>6}" for b in backends)
    print(head)
    for T in lengths:
        Q, K, V = _inputs(T)
        row = f"{T:>6} |"
        plain_bytes = 3 * T * T * 4  # at least the scores, their exponentials and the weights, float32
        if plain_bytes / 2**30 <= max_plain_gib:
            plain = functools.partial(scaled_dot_product_attention, Q, K, V)
            row += f" {1e3 * _best_time(plain, _repeats(T)):>9.1f} {_traced_peak(plain):>7.1f} |"
        else:
            row += f" {'skipped':>9} {f'~{plain_bytes / 2**30:.0f} GiB':>7} |"
        tiled = functools.partial(tiled_attention, Q, K, V, block_q=BLOCK, block_k=BLOCK)
        row += f" {1e3 * _best_time(tiled, _repeats(T)):>9.1f} {_traced_peak(tiled):>6.1f}"
        for b in backends:
            seconds, grown = torch_run(b, T)
            row += f" | {1e3 * seconds:>11.1f} {grown:>6.1f}"
        print(row, flush=True)


def bench_causal(T: int, backends: list[str]) -> None:
    Q, K, V = _inputs(T)
    schedule = tile_schedule(T, T, BLOCK, BLOCK, causal=True)
    full = lambda: tiled_attention(Q, K, V, block_q=BLOCK, block_k=BLOCK)  # noqa: E731
    causal = lambda: tiled_attention(Q, K, V, causal=True, block_q=BLOCK, block_k=BLOCK)  # noqa: E731
    np.testing.assert_allclose(causal()[0], scaled_dot_product_attention(Q, K, V, mask=causal_mask(T))[0][0],
                               rtol=1e-4, atol=1e-5)
    t_full, t_causal = [], []
    for _ in range(3):  # alternate, so that both see the same load
        t_full.append(_best_time(full, 1))
        t_causal.append(_best_time(causal, 1))
    print(f"\ncausal tiled attention, T = {T}, tiles {BLOCK} x {BLOCK}: {int(schedule.sum())} of {schedule.size} tiles "
          f"computed ({schedule.mean():.1%}); time {1e3 * min(t_causal):.0f} ms against {1e3 * min(t_full):.0f} ms "
          f"without the mask, ratio {min(t_causal) / min(t_full):.2f}", flush=True)
    for b in backends:
        s_full, _ = torch_run(b, T, causal=False)
        s_causal, _ = torch_run(b, T, causal=True)
        print(f"PyTorch {b.lower()}, T = {T}: causal {1e3 * s_causal:.1f} ms against {1e3 * s_full:.1f} ms, "
              f"ratio {s_causal / s_full:.2f}", flush=True)


def bench_gqa(prompt: int = 64, new_tokens: int = 448) -> None:
    from attnbook.torch.decoding import generate
    from attnbook.torch.kvcache import KVCache
    from attnbook.torch.transformer import GPT, GPTConfig

    block = prompt + new_tokens
    print(f"\ndecoder, 6 layers, 8 heads, d_model 512, context {block}, untrained; prompt {prompt}, "
          f"{new_tokens} new tokens, batch 1, with the KV cache")
    print(f"{'attention':>22} | {'params':>10} | {'cache KiB/token':>15} | {'cache MiB full':>14} | {'tokens/s':>9}")
    rates: dict[int, list[float]] = {}
    models = {}
    for n_kv in (8, 2, 1):
        torch.manual_seed(0)
        models[n_kv] = GPT(GPTConfig(vocab_size=256, block_size=block, n_layers=6, n_heads=8, d_model=512,
                                     n_kv_heads=n_kv)).eval()
        rates[n_kv] = []
    ids = torch.randint(256, (1, prompt), generator=torch.Generator().manual_seed(0))
    for _ in range(3):  # alternate the models, so that all see the same load
        for n_kv, model in models.items():
            tic = time.perf_counter()
            with torch.no_grad():
                generate(model, ids, new_tokens, generator=torch.Generator().manual_seed(0), use_cache=True)
            rates[n_kv].append(new_tokens / (time.perf_counter() - tic))
    for n_kv, model in models.items():
        cache = KVCache()
        with torch.no_grad():
            model(torch.randint(256, (1, block)), cache=cache)
        name = {8: "multi-head (8 kv heads)", 2: "grouped (2 kv heads)", 1: "multi-query (1)"}[n_kv]
        print(f"{name:>22} | {model.n_params():>10,} | {cache.nbytes / block / 1024:>15.1f} | "
              f"{cache.nbytes / MIB:>14.2f} | {max(rates[n_kv]):>9.0f}", flush=True)


def bench_attention(lengths: list[int], max_plain_gib: float) -> None:
    backends = cpu_backends()
    blas = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    print(f"attention benchmark: torch {torch.__version__} ({torch.get_num_threads()} threads), numpy {np.__version__} "
          f"(OPENBLAS_NUM_THREADS={blas}), {platform.processor() or platform.machine()}")
    print("PyTorch SDPA backends that run on this CPU: " + ", ".join(backends), flush=True)
    bench_lengths(lengths, max_plain_gib, backends)
    bench_causal(4096, backends)
    bench_gqa()
