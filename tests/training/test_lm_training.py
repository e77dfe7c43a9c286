"""Training a GPT (chapter 17): checkpoints, exact resume, torchrun, the command line, devices.

A small made-up corpus stands in for Tiny Shakespeare so that no test needs the data file or the network.
"""

import math
import os
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.distributed

from attnbook.torch import GPT
from attnbook.train import main as train_main
from attnbook.training.checkpoint import load_checkpoint, save_checkpoint
from attnbook.training.device import autocast
from attnbook.training.distributed import init_distributed
from attnbook.training.lm import PRESETS, GPTRunConfig, evaluate_loss, load_gpt, preset, train_gpt

ROOT = Path(__file__).resolve().parents[2]


def tiny(**overrides) -> GPTRunConfig:
    return preset("tiny", progress=False, **overrides)


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_training_lowers_the_loss_and_logs_it(word_text):
    run = train_gpt(tiny(steps=60, eval_every=20), text=word_text)
    assert [e["step"] for e in run.log] == list(range(1, 61))
    assert [e["step"] for e in run.log if "val_loss" in e] == [20, 40, 60]
    assert run.log[0]["loss"] == pytest.approx(math.log(run.tokenizer.vocab_size), abs=0.1)  # a uniform guess
    assert run.val_loss < run.log[0]["loss"] - 0.5
    assert run.log[4]["lr"] == pytest.approx(1e-3)  # the end of the 5-step warm-up
    assert run.log[-1]["lr"] == pytest.approx(1e-4)  # cosine decay down to min_lr


def test_evaluate_loss_of_an_untrained_model_is_log_vocab():
    torch.manual_seed(0)
    model = GPT(tiny().model_config(vocab_size=40))
    data = torch.randint(40, (2000,))
    assert evaluate_loss(model, data, 16, 8) == pytest.approx(math.log(40), abs=0.02)


def test_a_stopped_run_resumes_to_the_same_weights(word_text, tmp_path):
    config = tiny(steps=24, eval_every=8, dropout=0.1)  # dropout: the random state must be restored too
    whole = train_gpt(replace(config, out_dir=str(tmp_path / "a")), text=word_text)
    b = replace(config, out_dir=str(tmp_path / "b"))
    first = train_gpt(b, text=word_text, stop_after=12)  # stopped between two evaluations: checkpoint at 12
    assert first.steps_done == 12 and not same_weights(first.model, whole.model)
    resumed = train_gpt(b, text=word_text, resume=True)
    assert resumed.steps_done == 24
    assert same_weights(resumed.model, whole.model)
    assert [e["loss"] for e in resumed.log] == [e["loss"] for e in whole.log]
    model, tokenizer = load_gpt(tmp_path / "b" / "ckpt.pt")
    assert same_weights(model, whole.model) and tokenizer.chars == whole.tokenizer.chars


def test_the_gpus_random_state_is_saved_and_restored(word_text, tmp_path, monkeypatch):
    """Dropout on a GPU draws from the GPU's generators: a checkpoint keeps their state and resume restores it
    (``tools/cuda_check.py`` checks the resumed weights on a real GPU). Here the GPU is simulated."""
    saved_state = [torch.arange(8, dtype=torch.uint8)]
    restored = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: saved_state)
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", restored.append)
    config = tiny(steps=8, eval_every=4, device="cpu", out_dir=str(tmp_path))
    train_gpt(config, text=word_text, stop_after=4)
    assert torch.equal(load_checkpoint(tmp_path / "ckpt.pt")["cuda_rng"][0], saved_state[0])
    assert not restored
    train_gpt(config, text=word_text, resume=True)
    assert len(restored) == 1 and torch.equal(restored[0][0], saved_state[0])


def test_resume_refuses_another_model(word_text, tmp_path):
    train_gpt(tiny(steps=6, out_dir=str(tmp_path)), text=word_text)
    with pytest.raises(ValueError, match="d_model"):
        train_gpt(tiny(steps=8, d_model=64, out_dir=str(tmp_path)), text=word_text, resume=True)
    with pytest.raises(ValueError, match="out_dir"):
        train_gpt(tiny(), text=word_text, resume=True)


def test_checkpoints_are_atomic_and_load_weights_only(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    save_checkpoint({"step": 1, "w": torch.ones(3)}, path)

    def crash(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(RuntimeError, match="disk full"):
        save_checkpoint({"step": 2, "w": torch.zeros(3)}, path)
    monkeypatch.undo()
    state = load_checkpoint(path)  # the old checkpoint is whole, and no temporary file is left
    assert state["step"] == 1 and torch.equal(state["w"], torch.ones(3))
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    torch.save({"x": Evil()}, tmp_path / "evil.pt")
    with pytest.raises(Exception, match="(?i)weights.only|unsupported"):
        load_checkpoint(tmp_path / "evil.pt")
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torchrun_two_processes_match_one(word_text, text_file, tmp_path):
    """Two gloo processes, each on half of every batch, end where one process on whole batches ends."""
    out = tmp_path / "ddp"
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2",
               "--master_addr=127.0.0.1", f"--master_port={_free_port()}", "-m", "attnbook.train", "gpt",
               "--preset", "tiny", "--steps", "12", "--eval-every", "6", "--text-file", str(text_file),
               "--out-dir", str(out), "--sample", "0", "--no-progress",
               "--device", "cpu"]  # gloo, also on a machine with a GPU
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("validation loss") == 1  # only rank 0 reports
    ddp_model, _ = load_gpt(out / "ckpt.pt")
    single = train_gpt(tiny(steps=12, eval_every=6, device="cpu"), text=word_text)  # on the CPU, as the processes
    for (name, a), b in zip(ddp_model.state_dict().items(), single.model.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4, msg=name)
    # What no averaging would give:
    half = train_gpt(tiny(steps=12, eval_every=6, batch_size=4, device="cpu"), text=word_text)
    assert not torch.allclose(half.model.tok.E, ddp_model.tok.E, atol=1e-3)


def test_more_processes_than_gpus_is_refused_before_joining(monkeypatch):
    """torchrun with 2 processes on a machine with 1 GPU: the second process says why, and never waits."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    joined = []
    monkeypatch.setattr(torch.distributed, "init_process_group", lambda **kw: joined.append(kw))
    with pytest.raises(ValueError, match=r"needs GPU 1, but the machine has 1.*--nproc_per_node"):
        init_distributed("cuda")
    assert not joined


def test_batch_must_split_evenly(word_text, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(ValueError, match="batch_size = 8 must divide evenly among 3 processes"):
        train_gpt(tiny(), text=word_text)


def test_command_line_trains_saves_and_samples(text_file, tmp_path, capsys):
    train_main(["gpt", "--preset", "tiny", "--steps", "6", "--eval-every", "3", "--text-file", str(text_file),
                "--out-dir", str(tmp_path / "run"), "--sample", "40", "--no-progress", "--lr", "0.002"])
    printed = capsys.readouterr().out
    assert "steps 6, validation loss" in printed
    state = load_checkpoint(tmp_path / "run" / "ckpt.pt")
    assert state["config"]["lr"] == 0.002 and state["config"]["d_model"] == PRESETS["tiny"].d_model
    assert (tmp_path / "run" / "log.json").is_file()
    with pytest.raises(SystemExit):
        train_main(["gpt", "--preset", "huge"])


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="d_model = 30 must be divisible by n_heads, .*; got n_heads = 4"):
        GPTRunConfig(d_model=30)
    with pytest.raises(ValueError, match="warmup"):
        GPTRunConfig(steps=10, warmup=20)
    with pytest.raises(ValueError, match="unknown preset 'big'"):
        preset("big")


def test_autocast():
    with autocast(torch.device("cpu")):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32
    with pytest.raises(ValueError, match="CUDA only"):
        autocast(torch.device("cpu"), "bf16")
    if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        with autocast(torch.device("cuda")):
            a = torch.ones(2, 2, device="cuda")
            assert (a @ a).dtype == torch.bfloat16
