"""The speedrun's variants (chapter 25): each is a valid recipe, and each lever changes the kept recipe in one
place, so that the ablation table compares like with like. (Combined variants are unions of their parts by
construction, in ``attnbook.bench.speedrun``.)"""

import shlex
from dataclasses import replace
from pathlib import Path

from attnbook.bench.speedrun import SUITES, VARIANTS
from attnbook.training.lm import preset

BENCH = Path(__file__).resolve().parents[2] / "notebooks" / "bench"


def test_every_variant_is_a_valid_recipe_that_sets_its_fields():
    base = preset("cpu-small")
    for name, fields in VARIANTS.items():
        config = replace(base, **fields)  # GPTRunConfig checks every field on construction
        assert all(getattr(config, field) == value for field, value in fields.items()), name


def test_each_suite_reproduces_its_recorded_file_and_every_variant_is_recorded():
    """A suite's variants are those of the command its recorded file (notebooks/bench/25_NAME.txt) ran, in its
    order; no variant is in no suite."""
    for name, variants in SUITES.items():
        command = next(line for line in (BENCH / f"25_{name}.txt").read_text().splitlines() if line.startswith("$ "))
        recorded = shlex.split(command.split("--variants", 1)[1])
        assert recorded == variants, name
    assert {v for variants in SUITES.values() for v in variants} == set(VARIANTS)


def test_a_suite_is_run_by_name(monkeypatch):
    from attnbook import bench

    ran = []
    monkeypatch.setattr(bench, "bench_speedrun", lambda variants, *a, **k: ran.append(variants))
    bench.main(["speedrun", "--suite", "budget"])
    assert ran == [SUITES["budget"]]


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
