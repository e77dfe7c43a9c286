"""Chapter 25 types in the per-seed figures of its recorded benchmarks (a notebook opened alone in Colab has
no files beside it); the benchmarks' whole printed output is committed in notebooks/bench/. The figures
the chapter computes from must be the ones printed there, line for line."""

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINE = re.compile(r"^\s+(?P<name>.+?) seed (?P<seed>\d+): (?:(?P<secs>[\d.]+) s at step (?P<step>\d+)|not reached|"
                  r"no target: (?P<steps>\d+) steps in (?P<tsecs>[\d.]+) s); whole-split loss (?P<loss>[\d.]+); "
                  r"(?P<ms>[\d.]+) ms/step")


def parse_speedrun(path: Path) -> dict[str, list[tuple]]:
    """Each variant's runs in seed order: (seconds, step, whole-split loss, ms per step); for a run without a
    target, its seconds and steps of training; for a run that missed its target, (None, None, ...)."""
    runs: dict[str, list[tuple]] = {}
    for line in path.read_text().splitlines():
        m = LINE.match(line)
        if not m:
            continue
        d = m.groupdict()
        secs = float(d["secs"] or d["tsecs"]) if (d["secs"] or d["tsecs"]) else None
        step = int(d["step"] or d["steps"]) if (d["step"] or d["steps"]) else None
        runs.setdefault(d["name"].strip(), []).append((secs, step, float(d["loss"]), float(d["ms"])))
    return runs


def typed_in(notebook: str, name: str) -> dict:
    """The dictionary literal assigned to ``name`` in a code cell of ``notebook``."""
    cells = json.loads((ROOT / "notebooks" / notebook).read_text())["cells"]
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and f"\n{name} = {{" in "\n" + source:
            tree = ast.parse(source)
            for node in tree.body:
                if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name:
                    return ast.literal_eval(node.value)
    raise AssertionError(f"no cell of {notebook} assigns a dictionary to {name}")


@pytest.mark.parametrize(("name", "output"), [("race", "25_race.txt"), ("levers", "25_levers.txt"),
                                             ("budget", "25_budget.txt")])
def test_chapter_25_computes_from_the_committed_benchmark_output(name, output):
    recorded = parse_speedrun(ROOT / "notebooks" / "bench" / output)
    assert recorded, f"no run lines in notebooks/bench/{output}"
    assert all(len(runs) == 3 for runs in recorded.values())  # three seeds per variant
    assert typed_in("25_training_faster.ipynb", name) == recorded
