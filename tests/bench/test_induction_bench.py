"""``python -m attnbook.bench induction`` (chapter 28): the run stopped and resumed at each measuring point ends
with the model of an uninterrupted run, and each point's figures are those of the functions they come from."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnbook.bench.induction import bench_induction, context_positions
from attnbook.data import load_tinyshakespeare
from attnbook.data.repeats import repeated_segments
from attnbook.training.evaluate import loss_by_position
from attnbook.training.induction import copy_losses
from attnbook.training.lm import preset, split_text_ids, train_gpt


def test_context_positions_are_a_tenth_and_the_last():
    assert context_positions(64) == (6, 63) and context_positions(512) == (51, 511)


def test_a_staged_run_measures_the_uninterrupted_models(capsys):
    results = bench_induction("tiny", at=[10, 25], steps=30)
    assert [r["step"] for r in results] == [10, 25, 30]
    text = load_tinyshakespeare()
    whole = train_gpt(preset("tiny", progress=False, steps=30), text=text)  # the oracle: one run, no stops
    last = results[-1]
    assert last["val_loss"] == pytest.approx(whole.val_loss, abs=1e-6)
    _, val_ids = split_text_ids(text, whole.tokenizer)
    torch.testing.assert_close(last["by_position"], loss_by_position(whole.model, val_ids, 16, batch_size=64))
    early, late = context_positions(16)
    assert last["icl"] == pytest.approx(float(last["by_position"][late] - last["by_position"][early]))
    rows = repeated_segments(256, 8, 65, torch.Generator().manual_seed(7))
    first, second = copy_losses(whole.model, rows)
    assert last["first"] == pytest.approx(float(first.mean()), abs=1e-5)
    assert last["gap"].mean == pytest.approx(float((first - second).mean()), abs=1e-5)
    assert last["induction"].shape == (2, 2) and last["previous"].shape == (2, 2)
    out = capsys.readouterr().out
    assert "measured at steps [10, 25, 30]" in out and out.count("\n   ") >= 3


def test_the_benchmark_is_reached_from_the_command_line():
    out = subprocess.run([sys.executable, "-m", "attnbook.bench", "induction", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "python -m attnbook.bench induction" in out and "--at" in out


ROW = re.compile(r"^\s*(\d+)\s+([\d.]+)\s+[\d.]+\s+([\d.]+)\s+([\d.]+)\s+[+-][\d.]+\s+([\d.]+)\s+([\d.]+)\s+[+-][\d.]+ "
                 r"\[[^]]+\]\s+L\dh\d ([\d.]+)\s+L\dh\d ([\d.]+)$")


def test_chapter_28_types_in_the_committed_benchmark_output():
    """Chapter 28 types the recorded rows in (a notebook opened alone in Colab has no files beside it): they must
    be the ones printed in notebooks/bench/28_induction.txt, row for row."""
    root = Path(__file__).resolve().parents[2]
    recorded = {}
    for line in (root / "notebooks" / "bench" / "28_induction.txt").read_text().splitlines():
        m = ROW.match(line)
        if m:
            recorded[int(m[1])] = tuple(float(v) for v in m.groups()[1:])
    assert sorted(recorded) == [100, 200, 300, 400, 600, 800, 1000, 1500, 2000]
    cells = json.loads((root / "notebooks" / "28_induction_heads.ipynb").read_text())["cells"]
    sources = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]
    typed = [ast.literal_eval(node.value) for source in sources if source.startswith("recorded = {")
             for node in ast.parse(source).body
             if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "recorded"]
    assert typed == [recorded]
