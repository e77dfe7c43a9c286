"""The speedrun's variants (chapter 25): each is a valid recipe, and each combined variant is exactly the union
of the single changes it names, so that the ablation table compares like with like."""

from dataclasses import replace

import pytest

from attnbook.bench_speedrun import VARIANTS
from attnbook.training.lm import preset


def test_every_variant_is_a_valid_recipe_that_sets_its_fields():
    base = preset("cpu-small")
    for name, fields in VARIANTS.items():
        config = replace(base, **fields)  # GPTRunConfig checks every field on construction
        assert all(getattr(config, field) == value for field, value in fields.items()), name


def test_combined_variants_are_the_union_of_the_single_changes():
    muon, rotary, short = VARIANTS["muon 4x"], VARIANTS["rotary"], VARIANTS["1000 steps"]
    assert VARIANTS["muon rotary"] == {**muon, **rotary}
    assert VARIANTS["muon rotary, 1000 steps"] == {**muon, **rotary, **short}
    assert VARIANTS["muon rotary bf16"] == {**muon, **rotary, "muon_precision": "bf16"}
    assert VARIANTS["muon rotary swiglu, 1000 steps"] == {**muon, **rotary, **short, **VARIANTS["swiglu"]}
    assert VARIANTS["muon rotary qk norm, 1000 steps"] == {**muon, **rotary, **short, **VARIANTS["qk norm"]}
    # twice the batch for half the steps: the same number of training tokens as the recipe
    base, batch = preset("cpu-small"), replace(preset("cpu-small"), **VARIANTS["batch 24"])
    assert batch.batch_size * batch.steps == base.batch_size * base.steps


def test_each_lever_is_the_bfloat16_muon_recipe_with_one_change():
    kept = VARIANTS["muon rotary bf16, 1000 steps"]
    assert kept == {**VARIANTS["muon rotary, 1000 steps"], "muon_precision": "bf16"}
    levers = {name: fields for name, fields in VARIANTS.items() if name.startswith("bf16")}
    assert len(levers) == 8
    for name, fields in levers.items():
        changed = {k: v for k, v in fields.items() if kept.get(k, "absent") != v}
        assert kept.items() <= fields.items(), name  # the kept recipe, every field of it
        # one lever each: a single field, or AdamW's rate with its betas
        assert len(changed) == 1 or set(changed) == {"embed_lr", "beta1", "beta2"}, (name, changed)
    # the AdamW arms have what the Muon arms have but Muon: rotary positions and the 1,000-step schedule
    for rate in (2, 3, 4):
        arm = VARIANTS[f"adamw rotary {rate}x, 1000 steps"]
        assert arm == {"lr": pytest.approx(rate * 1e-3), "positions": "rotary", "steps": kept["steps"],
                       "warmup": kept["warmup"]}
