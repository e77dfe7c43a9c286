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


def markdown_of(notebook: str) -> str:
    """Every markdown cell of ``notebook``, joined."""
    cells = json.loads((ROOT / "notebooks" / notebook).read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def test_chapter_17_quotes_the_recipe_losses_of_the_committed_output():
    """Chapter 17's table of the cpu-small recipe is chapter 22's GPT-2 arm, seed by seed, as
    notebooks/bench/22_modern.txt prints it."""
    recorded = dict(re.findall(r"^\s+gpt2 seed (\d+): val loss ([\d.]+),", (ROOT / "notebooks" / "bench" /
                                                                          "22_modern.txt").read_text(), re.M))
    assert set(recorded) == {"1337", "1", "2"}
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| seed (\d+)[^|]*\| \**([\d.]+)\** \|",
                                                           markdown_of("17_training_gpt.ipynb"), re.M)}
    assert rows == recorded


def test_chapter_16_quotes_the_committed_seq2seq_output():
    """Chapter 16's table of the three tasks is notebooks/bench/16_seq2seq.txt's rows: steps, exact matches and
    parameters, task by task."""
    recorded = {m.group(1): (f"{int(m.group(2)):,}", m.group(3), m.group(4), m.group(5)) for m in re.finditer(
        r"^\s*(reverse|sort|add)\s+\S+\s+(\d+)\s+[\d.]+\s+\S+\s+([\d.]+%)\s+([\d.]+%)\s+([\d,]+)",
        (ROOT / "notebooks" / "bench" / "16_seq2seq.txt").read_text(), re.M)}
    assert recorded, "no task rows in notebooks/bench/16_seq2seq.txt"
    quoted = {m.group(1): m.groups()[1:] for m in re.finditer(
        r"^\| (reverse|sort|add) \| [^|]+ \| ([\d,]+) \| ([\d.]+%) \| ([\d.]+%) \| ([\d,]+) \|$",
        markdown_of("16_training_seq2seq.ipynb"), re.M)}
    assert quoted == recorded
