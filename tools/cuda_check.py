"""The package's GPU paths, checked on a machine with CUDA: ``python tools/cuda_check.py [--quick]``.

The test suite runs on the CPU, where CI and most readers are; this script runs what only a GPU exercises
and prints what it measured. Each check asserts; the script exits 1 if any failed.

- training on CUDA with bf16 autocast and in float32 (chapter 17's recipes), the loss it reaches and the
  tokens per second;
- a run stopped and resumed on the GPU, with dropout, equal to the run left alone (the GPU's random state
  is saved with the checkpoint), under ``torch.use_deterministic_algorithms``;
- generation on the GPU: cached, uncached and the sliding cache (chapters 17 and 21);
- Muon (chapter 25): its Newton-Schulz step on the GPU against the exact polar factor, and a run with it;
- masked language modelling (chapter 24) on the GPU;
- ``torchrun`` with the NCCL backend, one process;
- the gpu recipe (``--preset gpu``), in full unless ``--quick``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path

import torch

from attnbook.torch.decoding import generate
from attnbook.training.lm import preset, train_gpt
from attnbook.training.mlm import preset as mlm_preset
from attnbook.training.mlm import train_mlm
from attnbook.training.muon import newton_schulz, polar_factor

RESULTS: list[tuple[str, bool, str]] = []


def check(name):
    def wrap(fn):
        def run(*args):
            tic = time.perf_counter()
            try:
                detail = fn(*args) or ""
                RESULTS.append((name, True, detail))
                print(f"PASS {name} ({time.perf_counter() - tic:.0f} s): {detail}", flush=True)
            except Exception as error:  # report every check, not only the first that fails
                RESULTS.append((name, False, repr(error)))
                print(f"FAIL {name}: {error!r}", flush=True)
                traceback.print_exc()
        return run
    return wrap


@check("cpu-small recipe, bf16 and fp32")
def recipe(steps: int) -> str:
    lines = []
    for precision in ("bf16", "fp32"):
        run = train_gpt(preset("cpu-small", steps=steps, device="cuda", precision=precision, progress=False))
        assert run.val_loss < (1.95 if steps >= 2000 else 2.6), run.val_loss
        lines.append(f"{precision}: val loss {run.val_loss:.4f}, {run.train_seconds:.1f} s, "
                     f"{run.tokens_per_second:,.0f} tokens/s")
    return "; ".join(lines)


@check("stop and resume on the GPU, with dropout")
def resume() -> str:
    config = preset("tiny", steps=60, eval_every=20, dropout=0.2, device="cuda", precision="fp32", progress=False)
    with tempfile.TemporaryDirectory() as tmp:
        again = train_gpt(replace(config, out_dir=f"{tmp}/b"))
        whole = train_gpt(replace(config, out_dir=f"{tmp}/a"))
        # Two uninterrupted runs agree, or resuming could not be compared exactly.
        same = all(torch.equal(a, b) for a, b in zip(whole.model.state_dict().values(),
                                                      again.model.state_dict().values(), strict=True))
        assert same, "two identical runs on the GPU differ: not deterministic"
        train_gpt(replace(config, out_dir=f"{tmp}/c"), stop_after=30)
        resumed = train_gpt(replace(config, out_dir=f"{tmp}/c"), resume=True)
    equal = all(torch.equal(a, b) for a, b in zip(whole.model.state_dict().values(),
                                                   resumed.model.state_dict().values(), strict=True))
    assert equal, "the resumed run's weights differ from the run left alone"
    assert [e["loss"] for e in resumed.log] == [e["loss"] for e in whole.log]
    return f"60 steps, stopped at 30: weights and all 60 losses equal (final loss {whole.log[-1]['loss']:.4f})"


@check("generation on the GPU: cached, uncached, sliding")
def generation() -> str:
    out = []
    for positions in ("learned", "rotary"):
        run = train_gpt(preset("tiny", steps=100, positions=positions, device="cuda", progress=False))
        model = run.model.cuda()
        start = torch.zeros(2, 1, dtype=torch.long, device="cuda")
        n = 3 * model.config.block_size
        plain = generate(model, start, n, greedy=True)
        cached = generate(model, start, n, greedy=True, use_cache=True)
        assert plain.device.type == "cuda" and torch.equal(plain, cached), "cached tokens differ on the GPU"
        if positions == "rotary":
            sliding = generate(model, start, n, greedy=True, use_cache=True, sliding_cache=True)
            windowed = model(sliding[:, :-1], window=model.config.block_size).argmax(-1)
            assert torch.equal(windowed[:, :], sliding[:, 1:]), "sliding cache differs from windowed attention"
        out.append(f"{positions}: {n} tokens equal")
    return "; ".join(out)


@check("Muon on the GPU")
def muon(steps: int) -> str:
    g = torch.Generator(device="cuda").manual_seed(0)
    G = torch.randn(128, 512, device="cuda", generator=g)
    exact = polar_factor(G.double()).float()
    ns = newton_schulz(G, steps=30, coefficients=(1.5, -0.5, 0.0)).float()
    gap = (ns - exact).abs().max().item()
    assert gap < 1e-3, gap
    s = torch.linalg.svdvals(newton_schulz(G, dtype=torch.bfloat16).float())
    assert 0.5 < s.min() and s.max() < 1.3, (s.min(), s.max())  # the quintic lands near 1, not on it
    run = train_gpt(preset("cpu-small", steps=steps, optimizer="muon", device="cuda", progress=False))
    assert run.val_loss < (1.95 if steps >= 2000 else 2.6), run.val_loss
    return (f"cubic Newton-Schulz vs SVD max gap {gap:.1e}; quintic bf16 singular values "
            f"{s.min():.3f}..{s.max():.3f}; cpu-small {steps} steps: val loss {run.val_loss:.4f}, "
            f"{run.tokens_per_second:,.0f} tokens/s")


@check("masked language modelling on the GPU")
def mlm() -> str:
    run = train_mlm(mlm_preset("tiny", steps=300, device="cuda", progress=False))
    first, last = run.log[0]["loss"], sum(e["loss"] for e in run.log[-20:]) / 20
    assert last < first - 0.5, (first, last)
    return f"loss {first:.3f} -> {last:.3f}"


@check("torchrun, NCCL, one process")
def torchrun() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1", "-m",
               "attnbook.train", "gpt", "--preset", "tiny", "--device", "cuda", "--out-dir", tmp,
               "--sample", "0", "--no-progress"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert (Path(tmp) / "ckpt.pt").is_file()
    return "trained and saved"


@check("the gpu recipe")
def gpu_recipe(steps: int) -> str:
    run = train_gpt(preset("gpu", steps=steps, progress=False))
    assert run.val_loss < (1.6 if steps >= 5000 else 2.5), run.val_loss
    return (f"{steps} steps: val loss {run.val_loss:.4f} (whole split), training {run.train_seconds:.0f} s, "
            f"{run.tokens_per_second:,.0f} tokens/s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short runs only")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device here; nothing to check")
        return 1
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # what deterministic cuBLAS needs
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, bf16 {torch.cuda.is_bf16_supported()}",
          flush=True)
    steps = 300 if args.quick else 2000
    recipe(steps)
    torch.use_deterministic_algorithms(True)
    resume()
    torch.use_deterministic_algorithms(False)
    generation()
    muon(steps)
    mlm()
    torchrun()
    gpu_recipe(500 if args.quick else 5000)
    failed = [name for name, ok, _ in RESULTS if not ok]
    print(f"\n{len(RESULTS) - len(failed)} of {len(RESULTS)} checks passed" + (f"; failed: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
