"""The package's floors: a module imports from its own floor or the floors below, never from above.

A lower floor that reached up (``attnbook.torch`` importing ``attnbook.interop``, say) would tie the layers a
learner reads first to the ones built on them, and would invite import cycles."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "attnbook"
FLOORS = {
    # checks and helpers that know nothing of attention
    0: {"_validate", "_fields", "_files", "_lazy", "_cli", "_show"},
    1: {"numpy", "data"},  # Part I's NumPy, the data sets and chapter 16's toy tasks
    2: {"torch"},  # Part II on: the PyTorch twins and the models
    3: {"training", "plotting", "interop"},  # what trains, draws and converts the models
    4: {"widgets", "exercises", "bench", "train", "__main__", "__init__"},  # what the chapters and the CLI use
}


def floor_of(name: str) -> int:
    for floor, names in FLOORS.items():
        if name in names:
            return floor
    raise AssertionError(f"attnbook.{name} has no floor: add it to FLOORS in {Path(__file__).name}")


def imports(path: Path) -> set[str]:
    """The ``attnbook`` subpackages or modules a file imports, at its top or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else \
            [a.name for a in node.names] if isinstance(node, ast.Import) else []
        found |= {n.split(".")[1] for n in names if n.startswith("attnbook.")}
    return found


FILES = sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(SRC)) for p in FILES])
def test_imports_run_down_the_floors(path):
    here = path.relative_to(SRC).parts[0].removesuffix(".py")
    upward = sorted(name for name in imports(path) if floor_of(name) > floor_of(here))
    assert not upward, f"attnbook.{here} (floor {floor_of(here)}) imports from a floor above it: {upward}"


def test_the_check_sees_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from attnbook.interop import copy_norm\n")
    assert imports(bad) == {"interop"} and floor_of("interop") > floor_of("torch")
