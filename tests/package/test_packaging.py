"""The package as a reader installs it: a wheel that builds without deprecated metadata and carries its licence,
one version written once (pyproject.toml), and a NumPy part (Part I) that imports without PyTorch."""

import importlib
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import version

import attnbook
import attnbook.exercises as exercises
from tools.notebooks import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_wheel_builds_without_deprecation_warnings_and_carries_the_licence(tmp_path):
    source = tmp_path / "source"  # a copy: the build writes build/ and *.egg-info beside the sources
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "LICENSE-PSF"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--verbose",
                           "--wheel-dir", str(tmp_path / "dist"), str(source)],
                          capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    for word in ("Deprecat", "deprecat"):  # SetuptoolsDeprecationWarning, "... is deprecated"
        assert word not in output, output[output.find(word) - 500: output.find(word) + 1000]
    (wheel,) = (tmp_path / "dist").glob("attnbook-*.whl")
    project = PYPROJECT["project"]
    dist_info = f"attnbook-{project['version']}.dist-info"
    with zipfile.ZipFile(wheel) as z:
        assert z.read(f"{dist_info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
        assert z.read(f"{dist_info}/licenses/LICENSE-PSF") == (ROOT / "LICENSE-PSF").read_bytes()
        metadata = z.read(f"{dist_info}/METADATA").decode()
        entry_points = z.read(f"{dist_info}/entry_points.txt").decode()
    assert f"Version: {project['version']}\n" in metadata
    assert "License-Expression: MIT AND PSF-2.0\n" in metadata and "License-File: LICENSE\n" in metadata
    assert "License-File: LICENSE-PSF\n" in metadata
    assert "attnbook = attnbook.__main__:main" in entry_points


def test_the_licence_is_mit_and_the_build_backend_understands_its_expression():
    assert PYPROJECT["project"]["license"] == "MIT AND PSF-2.0"  # the PSF's for the CPython text (below)
    assert PYPROJECT["project"]["license-files"] == ["LICENSE", "LICENSE-PSF"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "The attnbook authors" in text
    assert "setuptools>=77" in PYPROJECT["build-system"]["requires"]


def test_the_version_is_written_once():
    assert attnbook.__version__ == version("attnbook") == PYPROJECT["project"]["version"]
    assert PYPROJECT["project"]["version"] not in (ROOT / "src" / "attnbook" / "__init__.py").read_text()


# Run in a fresh interpreter in which every import of torch fails, as where PyTorch is not installed.
NO_TORCH = """
import importlib.abc, sys

class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError(f"{name} is blocked: PyTorch is not installed here")

sys.meta_path.insert(0, NoTorch())
"""


def run_without_torch(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", NO_TORCH + code], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)


def test_the_numpy_chapters_need_no_torch():
    """PyTorch is an extra (attnbook[torch]): the package, its NumPy twin, the data, plotting and widgets of
    Part I and the checkers of chapters 1 to 11 import and run without it."""
    part_one = sorted(name for chapter in range(1, 12)
                      for name in vars(importlib.import_module(f"attnbook.exercises.ch{chapter:02d}"))
                      if name in exercises.__all__)
    assert len(part_one) >= 11
    done = run_without_torch(f"""
import attnbook, attnbook.numpy, attnbook.plotting, attnbook.widgets
from attnbook.data import grades_and_salaries, toy_word_embeddings
from attnbook.exercises import {", ".join(part_one)}
import numpy as np
def softmax_rows(S):  # a learner's answer: the checker watches for PyTorch's softmax, and PyTorch is absent
    e = np.exp(S - S.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
print(check_softmax_rows(softmax_rows))
try:
    import torch
except ImportError:
    print("torch blocked")
assert not any(m == "torch" or m.startswith("torch.") for m in sys.modules), "torch was imported"
try:
    from attnbook.exercises import check_layer_norm
except ImportError as e:
    print("chapter 13's checker needs torch:", e)
""")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "torch blocked" in done.stdout and "chapter 13's checker needs torch" in done.stdout
    assert re.search(r"softmax_rows: all \d+ checks passed\.", done.stdout), done.stdout


def test_the_command_says_what_it_needs_without_torch():
    done = run_without_torch("from attnbook.__main__ import main; main([]); main(['--version'])")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "need PyTorch" in done.stdout and f"attnbook {attnbook.__version__}" in done.stdout


def test_the_exercises_package_exports_every_checker():
    # src/attnbook/exercises/__init__.py is written by tools/exercises_init.py from the chapters' modules
    result = subprocess.run(
        [sys.executable, "-m", "tools.exercises_init", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


# What a chapter's import names, as the distribution that provides it.
DISTRIBUTION = {"sklearn": "scikit-learn", "PIL": "pillow", "yaml": "PyYAML"}


def declared(extra: str | None = None) -> set[str]:
    """The distributions the package declares: its dependencies, or those of one extra (extras it names
    included), by name without version."""
    project = PYPROJECT["project"]
    specs = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    names = set()
    for spec in specs:
        name = re.match(r"[A-Za-z0-9_.-]+", spec).group(0)
        inner = re.search(r"\[(.+)\]", spec)
        names |= declared(inner.group(1)) if name == "attnbook" and inner else {name.lower()}
    return names


def imported_by_chapters() -> dict[str, set[str]]:
    """Every top-level module a chapter's code imports, with the chapters that import it."""
    import ast
    import json

    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            lines = "".join(cell["source"]).splitlines()
            # IPython's magics (%pip in the Colab setup cell) become pass, which keeps their block's indentation.
            code = [line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("%", "!")) else line
                    for line in lines]
            tree = ast.parse("\n".join(code))
            for node in ast.walk(tree):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
                for name in names:
                    found.setdefault(name.split(".")[0], set()).add(path.name[:2])
    return found


def test_the_book_extra_installs_what_every_chapter_imports():
    book = declared() | declared("book")
    imports = imported_by_chapters()
    assert {"torch", "transformers", "tokenizers"} <= set(imports)  # the scan reads the chapters
    # Chapter 26's digits come from scikit-learn through the package (attnbook.data.digits).
    needed = {m for m in imports if m not in sys.stdlib_module_names and m != "attnbook"} | {"sklearn"}
    missing = {DISTRIBUTION.get(m, m).lower() for m in needed} - book
    assert not missing, f"chapters import {sorted(missing)}, which attnbook[book] does not install"



def test_the_cpython_text_the_wheel_ships_is_declared_under_its_licence():
    shipped = (ROOT / "src/attnbook/data/python_stdlib.txt").read_text().splitlines()[:20]
    assert any("PSF License Agreement" in line for line in shipped)
    assert "PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2" in (ROOT / "LICENSE-PSF").read_text()
    assert "PSF-2.0" in PYPROJECT["project"]["license"]
