"""``python -m attnbook.bench vit`` (chapter 26): its recipe is the chapter's, each printed run is the model
trained and scored again independently, and the chapter's typed-in figures are the recorded output's."""

import ast
import json
import re
from pathlib import Path

import pytest
import torch

from attnbook import bench
from attnbook.bench.vit import bench_vit, build, train_recipe, vit_recipe
from attnbook.training.classify import accuracy, train_classifier

ROOT = Path(__file__).resolve().parents[2]
RUN = re.compile(r"^\s+n\s+(?P<n>\d+) seed (?P<seed>\d+)\s+(?P<arm>.+?): (?P<right>\d+) of 360 test digits")


def runs_printed(text: str) -> dict[tuple[str, int], list[int]]:
    """(arm, n) to the test digits right, in seed order, from the per-run lines of the benchmark's output."""
    runs: dict[tuple[str, int], list[int]] = {}
    for line in text.splitlines():
        m = RUN.match(line)
        if m:
            runs.setdefault((m["arm"], int(m["n"])), []).append(int(m["right"]))
    return runs


def test_each_printed_run_is_the_model_trained_and_scored_again(capsys):
    from attnbook.data.digits import load_digits_split

    bench_vit(steps=3, seeds=[1], sizes=[40], class_token_sizes=[])
    printed = runs_printed(capsys.readouterr().out)
    assert set(printed) == {("ViT, mean", 40), ("CNN", 40)}  # no class-token ViT at this size
    data = load_digits_split(scale=2)
    for arm in ("ViT, mean", "CNN"):
        torch.manual_seed(123)  # build seeds the model itself
        model = build(arm, 1)
        train_classifier(model, data.X_train[:40], data.y_train[:40], train_recipe(3, 1))
        assert printed[(arm, 40)] == [round(accuracy(model, data.X_test, data.y_test) * 360)]


def test_the_recipe_is_the_chapters_shape():
    c = vit_recipe()
    shape = (c.image_size, c.patch_size, c.grid, c.n_layers, c.n_heads, c.d_model, c.pool)
    assert shape == (16, 2, 8, 3, 4, 32, "mean")
    assert vit_recipe("cls").n_tokens == 65
    t = train_recipe(600, 2)
    assert (t.steps, t.warmup, t.batch_size, t.lr, t.seed) == (600, 60, 64, 3e-3, 2)


def test_the_command_line_refuses_a_size_of_zero(capsys):
    with pytest.raises(SystemExit) as done:
        bench.main(["vit", "--sizes", "0"])
    assert done.value.code == 2 and "usage:" in capsys.readouterr().err


def test_chapter_26_types_in_the_recorded_output():
    recorded = runs_printed((ROOT / "notebooks" / "bench" / "26_vit.txt").read_text())
    assert recorded and all(len(right) == 3 for right in recorded.values())  # three seeds per arm and size
    cells = json.loads((ROOT / "notebooks" / "26_vision_transformer.ipynb").read_text())["cells"]
    typed = None
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and "\nrecorded = {" in "\n" + source:
            for node in ast.parse(source).body:
                if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "recorded":
                    typed = ast.literal_eval(node.value)
    assert typed is not None, "no cell of chapter 26 assigns a dictionary to recorded"
    assert typed == recorded
