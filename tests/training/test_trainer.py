"""The one training loop and the one optimisation config: every run goes through ``trainer.train``, every
run configuration spells and checks the optimisation the same way, checkpoints resume exactly (the masked
language model's too), and checkpoints written under an old field name still load.

Oracles: an uninterrupted run against the same run stopped and resumed; the loop's step count against the
steps asked for; the source of the package, read as text, for a second loop.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import attnbook
from attnbook.training.checkpoint import load_checkpoint, save_checkpoint
from attnbook.training.induction import InductionConfig, train_induction
from attnbook.training.lm import GPTRunConfig, load_gpt, preset, train_gpt
from attnbook.training.mlm import MLMRunConfig, train_mlm
from attnbook.training.mlm import preset as mlm_preset
from attnbook.training.optimisation import Optimisation
from attnbook.training.trainer import TrainConfig, train

SRC = Path(attnbook.__file__).parent
RUN_CONFIGS = [TrainConfig, GPTRunConfig, MLMRunConfig, InductionConfig]


def _params(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


# --- one loop --------------------------------------------------------------------------------------------

def test_only_the_trainer_steps_an_optimizer():
    """No module but ``optimisation.py`` backpropagates, and only ``trainer.py`` calls its step: a second
    training loop would have to do one or the other. (The exercises' reference solutions are learners' loops.)"""
    stepping = {}
    for path in SRC.rglob("*.py"):
        if "exercises" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
                # loss.backward() takes no argument; the NumPy layers' backward(dout) passes are not training
                if name == "optimizer_step" or (name == "backward" and not node.args):
                    stepping.setdefault(name, set()).add(path.relative_to(SRC).as_posix())
    assert stepping == {"backward": {"training/optimisation.py"}, "optimizer_step": {"training/trainer.py"}}


def test_every_run_takes_its_steps_in_the_trainers_loop(word_text, monkeypatch):
    """Each public run calls ``Optimisation.set_step`` (the loop's first act in a step) once per step."""
    calls = []
    original = Optimisation.set_step

    def spy(self, optimizer, step, steps):
        calls.append(step)
        return original(self, optimizer, step, steps)

    monkeypatch.setattr(Optimisation, "set_step", spy)
    train_gpt(preset("tiny", steps=7, warmup=2, eval_every=0, progress=False), text=word_text)
    assert calls == list(range(7))
    calls.clear()
    train_mlm(mlm_preset("tiny", steps=5, warmup=2, eval_every=0, progress=False), word_text)
    assert calls == list(range(5))
    calls.clear()
    train_induction(InductionConfig(vocab_size=8, min_len=3, max_len=4, d_model=16, steps=6, warmup=2, batch_size=4))
    assert calls == list(range(6))


# --- one optimisation config -------------------------------------------------------------------------------

def test_every_run_config_is_built_on_the_one_optimisation_config():
    names = [f.name for f in dataclasses.fields(Optimisation)]
    for config in RUN_CONFIGS:
        assert issubclass(config, Optimisation)
        assert [f.name for f in dataclasses.fields(config) if f.name in names] == names, config.__name__


@pytest.mark.parametrize("config", RUN_CONFIGS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("field, value, message", [
    ("lr", -1.0, "lr must be positive; got -1.0"),
    ("beta1", 3.0, r"beta1 must be in \[0, 1\); got 3.0"),
    ("min_lr", 1.0, r"min_lr must lie in \[0, lr = 0.001\]"),
    ("grad_clip", None, "grad_clip must be 0 \\(no clipping\\) or a positive maximum gradient norm; got None"),
    ("schedule", "step", "schedule must be one of 'cosine', 'linear', 'trapezoid'"),
    ("matrix_lr", 0.01, "matrix_lr is Muon's learning rate; it needs optimizer='muon'"),
])
def test_every_run_config_refuses_a_bad_optimisation_with_the_same_message(config, field, value, message):
    with pytest.raises(ValueError, match=message):
        config(**{"lr": 1e-3, field: value})


@pytest.mark.parametrize("config", RUN_CONFIGS, ids=lambda c: c.__name__)
def test_every_run_config_checks_warmup_and_target_against_the_loop(config):
    with pytest.raises(ValueError, match=r"warmup must lie in \[0, steps = 10\]; got 20"):
        config(steps=10, warmup=20)
    with pytest.raises(ValueError, match="target needs periodic evaluations"):
        config(target=0.5, eval_every=0)


def test_the_masked_models_run_composes_the_gpts_training_fields():
    """``gpt_config`` copies every optimisation and loop field, so the two models train the same way."""
    mlm = MLMRunConfig(lr=2e-3, beta2=0.95, schedule="trapezoid", grad_clip=0.5, steps=300, warmup=30, seed=4)
    gpt = mlm.gpt_config()
    for f in dataclasses.fields(Optimisation):
        assert getattr(gpt, f.name) == getattr(mlm, f.name), f.name
    assert (gpt.steps, gpt.seed, gpt.d_model, gpt.block_size) == (300, 4, mlm.d_model, mlm.block_size)


# --- the loop's own behaviour --------------------------------------------------------------------------------

def _regression(seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    w = torch.randn(4, 1)

    def get_batch(g):
        x = torch.randn(8, 4, generator=g)
        return x, x @ w

    def loss_fn(m, batch):
        x, y = batch
        return F.mse_loss(m(x), y)

    return model, get_batch, loss_fn


def _score(m: torch.nn.Module) -> float:
    """A number that moves with training, up or down: the sum of the first layer's weights."""
    return float(m[0].weight.detach().sum())


def test_a_stopped_run_resumes_exactly_and_a_target_is_reached_in_its_direction(tmp_path):
    config = TrainConfig(steps=30, batch_size=8, lr=1e-2, warmup=3, eval_every=5, progress=False)
    model, get_batch, loss_fn = _regression()
    whole = train(model, get_batch, loss_fn, config, _score)
    end = _params(model)

    stopped = dataclasses.replace(config, out_dir=str(tmp_path))
    model, get_batch, loss_fn = _regression()
    train(model, get_batch, loss_fn, stopped, _score, stop_after=12)
    assert load_checkpoint(tmp_path / "ckpt.pt")["step"] == 12
    model, get_batch, loss_fn = _regression()
    resumed = train(model, get_batch, loss_fn, stopped, _score, resume=True)
    assert _same(_params(model), end)
    assert resumed.losses == whole.losses and resumed.steps_done == 30

    # A loss target is reached at or below it; a score's at or above it: the same value, two directions.
    losses = dict(whole.evals)
    value = losses[15]
    model, get_batch, loss_fn = _regression()
    up = train(model, get_batch, loss_fn, dataclasses.replace(config, target=value),
               _score)
    model, get_batch, loss_fn = _regression()
    down = train(model, get_batch, loss_fn, dataclasses.replace(config, target=value),
                 _score, lower_is_better=True)
    assert up.reached_target_at == min(s for s, v in whole.evals if v >= value)
    assert down.reached_target_at == min(s for s, v in whole.evals if v <= value)


def test_the_masked_language_model_resumes_exactly(tmp_path, word_text):
    """Its masks come from a second generator, which the checkpoint keeps."""
    config = mlm_preset("tiny", steps=12, warmup=2, eval_every=4, eval_windows=4, progress=False)
    whole = train_mlm(config, word_text)
    stopped = dataclasses.replace(config, out_dir=str(tmp_path))
    train_mlm(stopped, word_text, stop_after=6)
    resumed = train_mlm(stopped, word_text, resume=True)
    assert _same(_params(resumed.model), _params(whole.model))
    assert [e["loss"] for e in resumed.log] == [e["loss"] for e in whole.log]


# --- checkpoints written before a field was renamed ------------------------------------------------------------

def test_a_checkpoint_with_the_old_name_target_loss_loads_and_resumes(tmp_path, word_text):
    config = preset("tiny", steps=8, warmup=2, eval_every=4, progress=False, out_dir=str(tmp_path))
    whole = train_gpt(dataclasses.replace(config, out_dir=""), text=word_text)
    train_gpt(config, text=word_text, stop_after=4)
    path = tmp_path / "ckpt.pt"
    state = load_checkpoint(path)
    state["config"]["target_loss"] = state["config"].pop("target")  # as checkpoints were written before
    save_checkpoint(state, path)
    model, _ = load_gpt(path)
    assert all(torch.equal(v, state["model"][k]) for k, v in model.state_dict().items())
    resumed = train_gpt(config, text=word_text, resume=True)
    assert _same(_params(resumed.model), _params(whole.model))


def test_a_checkpoint_with_a_field_unknown_here_is_refused_by_name(tmp_path, word_text):
    config = preset("tiny", steps=4, warmup=1, eval_every=2, progress=False, out_dir=str(tmp_path))
    train_gpt(config, text=word_text)
    path = tmp_path / "ckpt.pt"
    state = load_checkpoint(path)
    state["config"]["warp_factor"] = 9
    save_checkpoint(state, path)
    with pytest.raises(ValueError, match=r"fields this version of attnbook does not know \(warp_factor\)"):
        load_gpt(path)
    with pytest.raises(ValueError, match="warp_factor"):
        train_gpt(dataclasses.replace(config, steps=6), text=word_text, resume=True)


# --- what each setting does, and what is refused ---------------------------------------------------------------

def test_a_target_needs_an_evaluation_and_checkpoints_do_not(tmp_path):
    model, get_batch, loss_fn = _regression()
    with pytest.raises(ValueError, match="target = 0.5 is compared with an evaluation, and this run has none"):
        train(model, get_batch, loss_fn, TrainConfig(steps=10, warmup=1, eval_every=5, target=0.5, progress=False))
    config = TrainConfig(steps=10, warmup=1, eval_every=5, out_dir=str(tmp_path), progress=False)
    train(model, get_batch, loss_fn, config)  # no evaluation: the checkpoints are written all the same
    assert load_checkpoint(tmp_path / "ckpt.pt")["step"] == 10


def test_a_setting_changed_on_resume_takes_effect_and_an_unchanged_one_resumes_exactly(tmp_path):
    """The checkpoint's optimizer keeps its moments and takes the resumed run's betas and weight decay."""
    config = TrainConfig(steps=30, batch_size=8, lr=1e-2, warmup=3, eval_every=5, weight_decay=0.1, progress=False)
    model, get_batch, loss_fn = _regression()
    train(model, get_batch, loss_fn, config)
    whole = _params(model)
    stopped = dataclasses.replace(config, out_dir=str(tmp_path))
    ends = {}
    for decay in (0.1, 0.9):
        model, get_batch, loss_fn = _regression()
        train(model, get_batch, loss_fn, stopped, stop_after=10)
        model, get_batch, loss_fn = _regression()
        train(model, get_batch, loss_fn, dataclasses.replace(stopped, weight_decay=decay), resume=True)
        ends[decay] = _params(model)
    assert _same(ends[0.1], whole)
    assert not _same(ends[0.9], whole)


def test_the_induction_run_refuses_what_its_probe_replaces():
    for bad in ({"target": 1.0, "eval_every": 5}, {"out_dir": "runs"}, {"eval_every": 5}):
        with pytest.raises(ValueError, match="train_induction evaluates with its probe"):
            train_induction(InductionConfig(steps=4, warmup=1, **bad))


def test_the_causal_twin_of_a_masked_run_gets_neither_its_folder_nor_its_target(tmp_path):
    gpt = MLMRunConfig(out_dir=str(tmp_path), target=1.5, eval_every=10).gpt_config()
    assert (gpt.out_dir, gpt.target) == ("", None)


def test_muon_on_a_model_without_blocks_is_refused_before_training():
    model, get_batch, loss_fn = _regression()
    with pytest.raises(ValueError, match="optimizer='muon' trains the matrices of a model's blocks"):
        train(model, get_batch, loss_fn, TrainConfig(steps=4, warmup=1, optimizer="muon", progress=False))


@pytest.mark.parametrize("field, value, message", [
    ("lr", "0.1", "lr must be positive; got '0.1'"),
    ("lr", float("inf"), "lr must be positive; got inf"),
    ("weight_decay", None, "weight_decay must be 0 or more"),
    ("seed", -1, r"seed must be a whole number in \[0, 2\*\*32\); got -1"),
    ("seed", 1.5, "seed must be a whole number"),
    ("progress", "no", "progress must be True or False; got 'no'"),
    ("out_dir", None, "out_dir must be a folder's path as a string"),
    ("muon_momentum_warmup", 2.5, "muon_momentum_warmup must be a whole number, at least 0"),
    ("target", "low", "target must be None \\(no target\\) or a finite number"),
])
def test_a_value_of_the_wrong_kind_is_refused_by_name(field, value, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**{"eval_every": 5, field: value})


def test_a_language_models_target_is_a_positive_loss():
    with pytest.raises(ValueError, match="target is a validation loss here"):
        GPTRunConfig(target=0.0, eval_every=10)


def test_whole_numbers_may_be_numpys():
    """A count computed with NumPy is a whole number too (``bool`` and ``2.0`` are not)."""
    import numpy as np

    config = TrainConfig(steps=np.int64(10), batch_size=np.int32(4), warmup=np.int64(2), eval_every=np.int64(5),
                         seed=np.int64(3))
    assert (config.steps, config.batch_size, config.seed) == (10, 4, 3)
    with pytest.raises(ValueError, match="steps must be a whole number, at least 1; got True"):
        TrainConfig(steps=True, warmup=0)
