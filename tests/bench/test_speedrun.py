"""Training to a target loss (chapter 25): the run stops at the first evaluation that meets the target,
exactly where the same run without a target first met it, and the benchmark reports it."""

import math
from dataclasses import replace

import pytest

from attnbook.bench.speedrun import bench_speedrun, speedrun
from attnbook.training.lm import GPTRunConfig, evaluate_loss, preset, split_text_ids, train_gpt


def test_a_run_stops_where_its_untargeted_twin_first_meets_the_target(verse_text):
    config = preset("tiny", progress=False, steps=60, eval_every=10, eval_batches=10**6)  # the whole split
    text = verse_text * 4  # a validation split of several batches
    free = train_gpt(config, text=text)
    checks = [(e["step"], e["val_loss"]) for e in free.log if "val_loss" in e]
    target = (checks[1][1] + checks[2][1]) / 2  # met first at the third check
    first = next(step for step, loss in checks if loss <= target)
    # With a target every check reads the whole split, whatever eval_batches says.
    stopped = train_gpt(replace(config, target=target, eval_batches=1), text=text)
    assert stopped.reached_target_at == first == 30
    assert [e["loss"] for e in stopped.log] == [e["loss"] for e in free.log[:first]]  # the same run, cut short
    assert [e["val_loss"] for e in stopped.log if "val_loss" in e] == [loss for _, loss in checks[:3]]
    _, val_ids = split_text_ids(text, stopped.tokenizer)
    whole = evaluate_loss(stopped.model, val_ids, config.block_size, 64)
    assert stopped.val_loss == stopped.log[-1]["val_loss"] == pytest.approx(whole, rel=1e-6)
    # A subset's check would have read other figures: the test above could tell the two apart.
    subset = train_gpt(replace(config, eval_batches=1), text=text)
    assert [e["val_loss"] for e in subset.log if "val_loss" in e][:3] != [loss for _, loss in checks[:3]]


def test_a_target_never_met_runs_to_the_end(verse_text):
    config = preset("tiny", progress=False, steps=10, eval_every=10)
    result = speedrun(config, target=0.01, variant="tiny", text=verse_text)
    assert result.seconds is None and result.step is None and math.isfinite(result.val_loss)


def test_the_benchmark_prints_a_row_per_variant(verse_text, capsys):
    extra = {"short": {"steps": 20, "warmup": 5}}
    results = bench_speedrun(["baseline", "short"], [1, 2], target=math.log(20), recipe="tiny", eval_every=10,
                             text=verse_text, extra=extra)
    assert [(r.variant, r.seed) for r in results] == [("baseline", 1), ("short", 1), ("baseline", 2), ("short", 2)]
    assert all(r.step == 10 for r in results)  # a uniform guess scores log(vocab) < log(20) at once
    out = capsys.readouterr().out
    assert "| baseline | 2/2 |" in out and "| short | 2/2 |" in out
    with pytest.raises(ValueError, match="unknown variants"):
        bench_speedrun(["nope"], [1], 2.0, recipe="tiny", text=verse_text)


def test_a_target_needs_periodic_evaluations():
    with pytest.raises(ValueError, match="target needs periodic evaluations"):
        GPTRunConfig(target=1.9, eval_every=0)


def test_a_reference_that_misses_the_target_is_warned_of_and_times_nothing(verse_text, capsys):
    # The reference barely moves from a uniform guess (its rate is tiny); the other variant gets well below it.
    extra = {"frozen": {"lr": 1e-8, "min_lr": 0.0}, "short": {"steps": 20, "warmup": 5}}
    target = math.log(len(set(verse_text))) - 0.05
    bench_speedrun(["frozen", "short"], [1], target=target, recipe="tiny", eval_every=10, text=verse_text, extra=extra)
    out = capsys.readouterr().out
    assert "warning: frozen missed the target with seed(s) [1]" in out
    assert "| short | 1/1 |" in out and out.rstrip().endswith("| - |")  # no ratio against a reference that missed
