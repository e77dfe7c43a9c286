"""``python -m attnbook.bench attention`` (chapter 20): what attention costs, in time and memory, as T grows.

NumPy's peak memory is measured with ``tracemalloc``, which sees every array NumPy allocates: the peak of
the bytes allocated during one call, the output included, the inputs not. PyTorch's allocations do not go
through Python's allocator; ``torch.profiler`` with ``profile_memory=True`` records them per operator, and
the figure given is the sum of all bytes allocated during one call (output included): an upper bound of
its peak, equal to it when nothing is freed before the last allocation.

On a machine shared with other work, run it with one thread per library
(``OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1``): OpenBLAS threads that wait for a busy core make the many
small products of tiled attention many times slower, which measures the load, not the algorithm.

The allocator part (``bench_allocator``, which can be called alone) counts the minor page faults
of one call of each kernel, and times plain against tiled attention, in child processes started with glibc's
default allocator and with one told to keep the memory it frees (``KEEP_FREED_MEMORY``: these variables are read
when the process starts, so each setting needs a process of its own). A page fault counts regardless of what
else the machine runs; times do not, so the part prints times only as ratios of kernels that took turns in
one process, and of the two settings' processes, which alternate.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable

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


def interleaved_times(kernels: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Seconds of each kernel in each of ``rounds`` rounds, after one warm-up round.

    Every round runs each kernel once, in turn, so that a load that comes and goes during the run falls on
    all of them alike rather than on whichever ran while it lasted."""
    times: dict[str, list[float]] = {name: [] for name in kernels}
    for r in range(rounds + 1):
        for name, fn in kernels.items():
            tic = time.perf_counter()
            fn()
            if r > 0:
                times[name].append(time.perf_counter() - tic)
    return times


def spread_ms(seconds: list[float]) -> str:
    """``median (min-max)`` in milliseconds, the way the tables of chapter 20 give a time."""
    lo, mid, hi = (1e3 * x for x in (min(seconds), statistics.median(seconds), max(seconds)))
    digits = 1 if hi < 1000 else 0
    return f"{mid:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"


def _traced_peak(fn) -> float:
    """Peak bytes NumPy allocates while ``fn`` runs, in MiB."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / MIB
    finally:
        tracemalloc.stop()


def _rounds(T: int) -> int:
    return 7 if T <= 1024 else 5 if T <= 4096 else 3


def _sdpa(backend: str, T: int, causal: bool = False) -> Callable[[], object]:
    """One call of PyTorch's SDPA restricted to ``backend``, on the benchmark's inputs of length ``T``."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = (torch.from_numpy(a)[None] for a in _inputs(T))  # (1, 1, T, d_head)

    def call() -> object:
        with sdpa_kernel(getattr(SDPBackend, backend)):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return call


def torch_allocated(call: Callable[[], object]) -> float:
    """MiB allocated during one call (``torch.profiler``, ``profile_memory=True``), after a warm-up call."""
    from torch.profiler import ProfilerActivity, profile

    call()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        call()
    return sum(max(e.self_cpu_memory_usage, 0) for e in prof.events()) / MIB


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
    """Time and memory of NumPy plain and tiled attention and of each PyTorch backend, one row per length in
    ``lengths``; plain attention is skipped above ``max_plain_gib`` of scores."""
    print(f"\none head, d_head = {D_HEAD}, float32, tiles of {BLOCK} x {BLOCK}; time in ms: median (min-max) of "
          "7, 5 or 3 rounds by length, the kernels taking turns within each round, after a warm-up round; "
          "memory: MiB (NumPy: peak, tracemalloc; PyTorch: allocated during the call, torch.profiler)")
    names = ["numpy plain", "numpy tiled"] + [f"torch {b.lower()}" for b in backends]
    print(f"{'T':>6} | " + " | ".join(f"{n + ' ms':>24} {'MiB':>7}" for n in names))
    for T in lengths:
        Q, K, V = _inputs(T)
        plain_bytes = 3 * T * T * 4  # at least the scores, their exponentials and the weights, float32
        kernels: dict[str, Callable[[], object]] = {}
        if plain_bytes / 2**30 <= max_plain_gib:
            kernels["numpy plain"] = functools.partial(scaled_dot_product_attention, Q, K, V)
        kernels["numpy tiled"] = functools.partial(tiled_attention, Q, K, V, block_q=BLOCK, block_k=BLOCK)
        for b in backends:
            kernels[f"torch {b.lower()}"] = _sdpa(b, T)
        memory = {name: (torch_allocated(fn) if name.startswith("torch") else _traced_peak(fn))
                  for name, fn in kernels.items()}
        times = interleaved_times(kernels, _rounds(T))
        cells = []
        for name in names:
            if name in kernels:
                cells.append(f"{spread_ms(times[name]):>24} {memory[name]:>7.1f}")
            else:
                cells.append(f"{'skipped':>24} {f'~{plain_bytes / 2**30:.0f} GiB':>7}")
        print(f"{T:>6} | " + " | ".join(cells), flush=True)


def bench_causal(T: int, backends: list[str]) -> None:
    """Tiled attention at length ``T`` with and without the causal mask: the tiles computed and
    the ratio of the times, for NumPy and each PyTorch backend."""
    Q, K, V = _inputs(T)
    schedule = tile_schedule(T, T, BLOCK, BLOCK, causal=True)
    full = lambda: tiled_attention(Q, K, V, block_q=BLOCK, block_k=BLOCK)  # noqa: E731
    causal = lambda: tiled_attention(Q, K, V, causal=True, block_q=BLOCK, block_k=BLOCK)  # noqa: E731
    np.testing.assert_allclose(causal()[0], scaled_dot_product_attention(Q, K, V, mask=causal_mask(T))[0][0],
                               rtol=1e-4, atol=1e-5)
    kernels = {"numpy tiled": full, "numpy tiled causal": causal}
    for b in backends:
        kernels[f"torch {b.lower()}"] = _sdpa(b, T)
        kernels[f"torch {b.lower()} causal"] = _sdpa(b, T, causal=True)
    times = interleaved_times(kernels, 5)
    print(f"\ncausal against full attention, T = {T}, median (min-max) ms of 5 rounds, the kernels taking turns; "
          f"tiles {BLOCK} x {BLOCK}: {int(schedule.sum())} of {schedule.size} tiles computed ({schedule.mean():.1%})")
    for name in kernels:
        if name.endswith("causal"):
            base = name.removesuffix(" causal")
            ratio = statistics.median(times[name]) / statistics.median(times[base])
            print(f"{base:>22}: causal {spread_ms(times[name])} against {spread_ms(times[base])}, "
                  f"ratio of medians {ratio:.2f}", flush=True)


def bench_gqa(prompt: int = 64, new_tokens: int = 448) -> None:
    """Generation with a key-value cache from a 6-layer GPT with 8, 2 and 1 key-value heads: cache size and speed."""
    from attnbook.torch.decoding import generate
    from attnbook.torch.kvcache import KVCache
    from attnbook.torch.transformer import GPT, GPTConfig

    block = prompt + new_tokens
    print(f"\ndecoder, 6 layers, 8 heads, d_model 512, context {block}, untrained; prompt {prompt}, "
          f"{new_tokens} new tokens, batch 1, with the KV cache")
    print(f"{'attention':>22} | {'params':>10} | {'cache KiB/token':>15} | {'cache MiB full':>14} | "
          "tokens/s, median (min-max) of 3 rounds, the models taking turns")
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
              f"{cache.nbytes / MIB:>14.2f} | {statistics.median(rates[n_kv]):.1f} ({min(rates[n_kv]):.1f}-"
              f"{max(rates[n_kv]):.1f})", flush=True)


# glibc returns a freed block of this size or more to the kernel at once (mmap threshold), and trims the top of its
# heap once this much there is free (trim threshold); set as high as they go, it keeps what it frees for reuse.
KEEP_FREED_MEMORY = {"MALLOC_MMAP_THRESHOLD_": "2147483647", "MALLOC_TRIM_THRESHOLD_": "4294967295"}


def minor_faults(fn: Callable[[], object]) -> int:
    """Minor page faults of this process while ``fn()`` runs: pages the kernel had to map (and zero) for it."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    fn()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def allocator_run(lengths: list[int], rounds: int = 15, math: bool = True) -> dict[str, dict[str, dict[str, object]]]:
    """In this process: for each length, the page faults of one call of each kernel (the median of three calls)
    and its times in ``rounds`` interleaved rounds: NumPy's plain and tiled attention, and PyTorch's ``MATH``
    backend unless ``math`` is false. Run it in a child process per allocator setting."""
    results: dict[str, dict[str, dict[str, object]]] = {}
    for T in lengths:
        Q, K, V = _inputs(T)
        kernels = {"numpy plain": functools.partial(scaled_dot_product_attention, Q, K, V),
                   "numpy tiled": functools.partial(tiled_attention, Q, K, V, block_q=BLOCK, block_k=BLOCK)}
        if math:
            kernels["torch math"] = _sdpa("MATH", T)
        times = interleaved_times(kernels, rounds)
        results[str(T)] = {name: {"faults": statistics.median(minor_faults(fn) for _ in range(3)),
                                  "seconds": times[name]} for name, fn in kernels.items()}
    return results


def allocator_child(lengths: list[int], keep: bool, rounds: int = 15,
                    math: bool = True) -> dict[str, dict[str, dict[str, object]]]:
    """``allocator_run(lengths, rounds, math)`` in a fresh Python process, with glibc told to keep the memory it frees
    (``keep``) or with its defaults; the variables must be in the environment before the interpreter starts. The
    process runs one BLAS thread (``OPENBLAS_NUM_THREADS=1``), as the benchmark does, whatever its parent runs."""
    env = {**os.environ, **(KEEP_FREED_MEMORY if keep else {}), "OPENBLAS_NUM_THREADS": "1"}
    if not keep:
        for name in KEEP_FREED_MEMORY:
            env.pop(name, None)
    code = ("import json, sys; from attnbook.bench.attention import allocator_run; "
            f"print(json.dumps(allocator_run({list(lengths)!r}, {rounds}, {math})))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_allocator(lengths: list[int], repeats: int = 3, rounds: int = 15) -> None:
    """Page faults and tiled / plain time ratios with glibc's default allocator and with freed memory kept."""
    page = resource.getpagesize()
    settings = {"default": False, "kept": True}
    runs: dict[str, list[dict]] = {name: [] for name in settings}
    for _ in range(repeats):  # the two settings' processes alternate, so that both see the same load
        for name, keep in settings.items():
            runs[name].append(allocator_child(lengths, keep, rounds))
    print(f"\nallocator: float32, one head, d_head = {D_HEAD}, tiles of {BLOCK}; {repeats} processes per setting, "
          "alternating; 'kept' = " + " ".join(f"{k}={v}" for k, v in KEEP_FREED_MEMORY.items()))
    print(f"minor page faults per call (median of 3 calls), in {page}-byte pages and in float32 T x T arrays' "
          "worth (NumPy asks for 2 MiB pages for arrays of 4 MiB and more, which the kernel may grant: then one "
          f"fault maps 512 pages); time: ratio of the fastest of {rounds} interleaved rounds (the least disturbed), "
          "one figure per process")
    print(f"{'T':>6} {'allocator':>9} | {'plain faults':>12} {'arrays':>6} | {'tiled faults':>12} | "
          f"{'math faults':>11} {'arrays':>6} | {'tiled / plain':>15} | {'math / plain':>13} | "
          f"{'plain: kept / default':>21}")
    for T in lengths:
        array_pages = 4 * T * T / page
        best_ms = {name: [{k: min(v["seconds"]) for k, v in run[str(T)].items()} for run in rs]
                     for name, rs in runs.items()}
        for name, rs in runs.items():
            f = {k: max(run[str(T)][k]["faults"] for run in rs) for k in rs[0][str(T)]}  # the most of the processes
            tiled = "/".join(f"{m['numpy tiled'] / m['numpy plain']:.2f}" for m in best_ms[name])
            math = "/".join(f"{m['torch math'] / m['numpy plain']:.2f}" for m in best_ms[name])
            kept = ""
            if name == "kept":
                kept = "/".join(f"{k['numpy plain'] / d['numpy plain']:.2f}"
                                for k, d in zip(best_ms["kept"], best_ms["default"], strict=True))
            print(f"{T:>6} {name:>9} | {f['numpy plain']:>12.0f} {f['numpy plain'] / array_pages:>6.2f} | "
                  f"{f['numpy tiled']:>12.0f} | {f['torch math']:>11.0f} {f['torch math'] / array_pages:>6.2f} | "
                  f"{tiled:>15} | {math:>13} | {kept:>21}", flush=True)


def bench_attention(lengths: list[int], max_plain_gib: float) -> None:
    """The whole ``attention`` benchmark: lengths, the causal mask, grouped-query decoding, the allocator."""
    backends = cpu_backends()
    blas = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    print(f"attention benchmark: torch {torch.__version__} ({torch.get_num_threads()} threads), numpy {np.__version__} "
          f"(OPENBLAS_NUM_THREADS={blas}), {platform.processor() or platform.machine()}")
    print("PyTorch SDPA backends that run on this CPU: " + ", ".join(backends), flush=True)
    bench_lengths(lengths, max_plain_gib, backends)
    bench_causal(4096, backends)
    bench_gqa()
    bench_allocator([T for T in lengths if T <= 4096])

