"""Write ``src/attnbook/exercises/__init__.py`` from the checker modules (``chNN.py``).

Usage: ``python -m tools.exercises_init`` (rewrites the file) or ``--check`` (exits 1 if it is out of date).
Every ``check_*`` defined at the top level of a chapter's module is exported. A module that imports without
PyTorch is imported directly; the others are imported on first use, so that the NumPy chapters' checkers
work where PyTorch is not installed. Which is which is found by importing each module with PyTorch blocked.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "attnbook" / "exercises"
TARGET = PACKAGE / "__init__.py"
CHECKER = re.compile(r"^(check_\w+)\s*=", flags=re.M)

HEADER = '''"""Checkers for the book's coding exercises.

Each ``check_*`` is a ``Checker``: call it with the learner's function (``check_softmax_rows(softmax_rows)``)
and it runs that function on fixed and random cases against the package's own implementation, and
returns a ``Verdict`` that reads as a short sentence in the notebook. Its docstring is the exercise's
contract, so ``help(check_softmax_rows)`` or ``check_softmax_rows?`` says what the function must take and
return.
"""
'''

# Run in a fresh interpreter: torch set to None in sys.modules makes any import of it fail at once.
# The package's own __init__.py is bypassed (an empty package stands in for it), so that the probe works while
# that file is out of date or holds a merge conflict.
_PROBE = """
import importlib, json, sys, types
sys.modules["torch"] = None
ok = {}
for name in sys.argv[2:]:
    package = types.ModuleType("attnbook.exercises")
    package.__path__ = [sys.argv[1]]
    sys.modules["attnbook.exercises"] = package
    try:
        importlib.import_module("attnbook.exercises." + name)
        ok[name] = True
    except ImportError:
        ok[name] = False
    for key in [k for k in sys.modules if k.startswith("attnbook")]:
        del sys.modules[key]
print(json.dumps(ok))
"""


def checkers() -> dict[str, list[str]]:
    """Module name (``ch01``) -> the checkers it defines, in file order."""
    found = {}
    for path in sorted(PACKAGE.glob("ch[0-9][0-9].py")):
        names = CHECKER.findall(path.read_text())
        if names:
            found[path.stem] = names
    return found


def torch_free(modules: list[str]) -> dict[str, bool]:
    """Which modules import with PyTorch blocked (probed in a subprocess that imports from ``src``)."""
    env_path = str(ROOT / "src")
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(PACKAGE), *modules],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": env_path, "PATH": ""},
    )
    if done.returncode != 0:
        sys.exit(f"importing the checker modules failed:\n{done.stderr}")
    return json.loads(done.stdout)


def render() -> str:
    found = checkers()
    free = torch_free(list(found))
    lines = [HEADER, "from attnbook._lazy import lazy_exports", "from attnbook.exercises._harness import Verdict"]
    for module, names in found.items():
        if free[module]:
            line = f"from attnbook.exercises.{module} import {', '.join(sorted(names))}"
            if len(line) > 120:  # wrapped as ruff's import sorting wraps a line past the length limit
                line = "\n".join([f"from attnbook.exercises.{module} import ("]
                                  + [f"    {name}," for name in sorted(names)] + [")"])
            lines.append(line)
    lines += [
        "",
        "# The checkers of the chapters whose modules need PyTorch: imported on first use, so that the NumPy",
        "# chapters' checkers work where PyTorch is not installed.",
        "_NEED_TORCH = {",
    ]
    for module, names in found.items():
        if not free[module]:
            lines += [f'    "{name}": "{module}",' for name in sorted(names)]
    lines += ["}", "__getattr__, __dir__ = lazy_exports(__name__, _NEED_TORCH)", "", "__all__ = ["]
    exported = sorted(["Verdict"] + [n for names in found.values() for n in names])
    lines += [f'    "{name}",' for name in exported]
    lines += ["]", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is out of date")
    args = parser.parse_args()
    text = render()
    if args.check:
        if TARGET.read_text() != text:
            sys.exit(f"{TARGET.relative_to(ROOT)} is out of date: run python -m tools.exercises_init")
        print(f"{TARGET.relative_to(ROOT)} is up to date")
        return
    TARGET.write_text(text)
    print(f"wrote {TARGET.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
