"""The speedrun's variants (chapter 25): each is a valid recipe, and each lever changes the kept recipe in one
place, so that the ablation table compares like with like. (Combined variants are unions of their parts by
construction, in ``attnbook.bench.speedrun``.)"""

from dataclasses import replace

from attnbook.bench.speedrun import VARIANTS
from attnbook.training.lm import preset


def test_every_variant_is_a_valid_recipe_that_sets_its_fields():
    base = preset("cpu-small")
    for name, fields in VARIANTS.items():
        config = replace(base, **fields)  # GPTRunConfig checks every field on construction
        assert all(getattr(config, field) == value for field, value in fields.items()), name


def test_twice_the_batch_for_half_the_steps_trains_on_as_many_tokens():
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
