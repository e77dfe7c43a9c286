"""Run every chapter and every student version in Google Colab's environment (see ``make colab-check``).

``tools/colab-versions.txt`` lists Colab's Python and the exact releases it ships. ``make colab-check``
creates a fresh virtual environment with that Python, installs exactly those releases, then installs
the package from a wheel built from the checkout, as Colab's setup cell installs a release. This script
then runs, in fresh kernels there:

- a probe that reports the kernel's Python and package versions and fails if they differ from the file,
  or if ``attnbook`` is not the installed wheel;
- every chapter and its student version, in one kernel: first the student version top to bottom (no
  cell may fail, and every checker reports "not attempted yet": the exercise stubs raise
  ``NotImplementedError`` only when called, and their checkers catch it), then, in the same kernel, the
  chapter's own code from its first cell that the student version changed or removed to its end (the
  solutions and the checks after them): no cell may fail except one tagged ``raises-exception``.

A student version is the chapter with its solutions removed, so the two share every cell before the
exercises; run separately, every teaching cell (the training runs included) ran twice. Run this way it runs
once, and both versions are still run to their ends: the student version whole, from a fresh kernel, and
then every cell of the chapter that differs from it, after the cells they share.

It only executes: outputs are compared by nbval in ``make test``. Usage:
``python -m tools.colab_check [--jobs N] [notebooks/NN_name.ipynb ...]``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError

from tools.kernel import notebook_client
from tools.notebooks import NOTEBOOKS, ROOT, chapter_notebooks, read, student_path

VERSIONS = ROOT / "tools" / "colab-versions.txt"
PYTHON_LINE = re.compile(r"^#\s*Python\s+(\d+\.\d+)\s*$", re.MULTILINE)
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==(\S+)\s*$", re.MULTILINE)
CHECK_CALL = re.compile(r"^check_\w+\(", re.MULTILINE)
# Seconds per cell: several times the slowest cell of any chapter (the training cells take a minute or two
# with the kernels torch picks). The client polls in slices (tools/kernel.py), so a missed wake-up
# costs a second, not this whole limit.
TIMEOUT = 600


def colab_versions(text: str | None = None) -> tuple[str, dict[str, str]]:
    """``(python, {package: version})`` as ``tools/colab-versions.txt`` gives them."""
    text = VERSIONS.read_text() if text is None else text
    python = PYTHON_LINE.search(text)
    if python is None:
        raise ValueError(f"{VERSIONS.name}: no '# Python X.Y' line")
    return python.group(1), {name.lower(): version for name, version in PIN.findall(text)}


PROBE = """
import json, sys
from importlib.metadata import version
import attnbook
names = {names!r}
print(json.dumps({{"python": "%d.%d.%d" % sys.version_info[:3], "attnbook_file": attnbook.__file__,
                  "attnbook": version("attnbook"), **{{n: version(n) for n in names}}}}))
"""


def _client(nb: nbformat.NotebookNode) -> NotebookClient:
    return notebook_client(nb, TIMEOUT, str(NOTEBOOKS))


def probe() -> dict[str, str]:
    """The Python and package versions a fresh kernel sees."""
    python, pins = colab_versions()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PROBE.format(names=sorted(pins)))])
    _client(nb).execute()
    return json.loads(nb.cells[0].outputs[0]["text"])


def check_environment(seen: dict[str, str]) -> list[str]:
    """What differs between the kernel's environment and Colab's, as lines to print."""
    python, pins = colab_versions()
    problems = []
    if not seen["python"].startswith(python + "."):
        problems.append(f"the kernel runs Python {seen['python']}, Colab runs {python}")
    problems += [f"{name} {seen[name]} in the kernel, {want} in Colab" for name, want in pins.items()
                 if seen[name] != want]
    if "site-packages" not in seen["attnbook_file"]:
        problems.append(f"attnbook is imported from {seen['attnbook_file']}, not from the installed wheel")
    return problems


def _problem(exc: Exception) -> str:
    """One line saying what went wrong: the error a cell raised, a timeout, a kernel that died."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()] or [""]
    if isinstance(exc, CellTimeoutError):  # the message ends with the cell's source between dashes
        source = lines[lines.index("-------------------") + 1] if "-------------------" in lines else ""
        return f"a cell ran past {TIMEOUT} s: {source[:200]}"
    return f"{type(exc).__name__}: {lines[-1][:300]}"


def chapter_tail(chapter: nbformat.NotebookNode, student: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """The chapter's code cells from the first one its student version changed or removed, to the end."""
    ours = [c for c in chapter.cells if c.cell_type == "code"]
    theirs = [c for c in student.cells if c.cell_type == "code"]
    pairs = zip(ours, theirs, strict=False)  # the chapter has the longer tail: its solutions
    first = next((i for i, (a, b) in enumerate(pairs) if a.source.rstrip() != b.source.rstrip()),
                 min(len(ours), len(theirs)))
    return ours[first:]


def run_both(chapter_path: Path) -> tuple[str | None, str | None]:
    """:func:`run_pair` on a chapter and its student version."""
    return run_pair(read(chapter_path), read(student_path(chapter_path)))


def run_pair(chapter: nbformat.NotebookNode, student: nbformat.NotebookNode) -> tuple[str | None, str | None]:
    """Execute a student version, then the chapter's differing tail in the same kernel.

    Returns what went wrong with each (the student version, the chapter), or None for each that passed.
    """
    n_student = len(student.cells)
    tail = copy.deepcopy(chapter_tail(chapter, student))
    for i, cell in enumerate(tail):  # a cell never reached must not show the chapter's stored outputs
        cell.outputs, cell.execution_count = [], None
        if "id" in cell:
            cell["id"] = f"chapter-tail-{i}"  # the student version holds the same ids: keep them unique
    nb = nbformat.v4.new_notebook(cells=student.cells + tail, metadata=student.metadata)
    try:
        _client(nb).execute()  # cells tagged raises-exception may raise; nothing else may
    except Exception as exc:  # a failing cell, a timeout or a dead kernel: all are failures
        problem = _problem(exc)
        failed_in_chapter = any(o.get("output_type") == "error" for c in nb.cells[n_student:]
                                for o in c.get("outputs", []))
        return (None, problem) if failed_in_chapter else (problem, "not reached: its student version failed")
    checks = [c for c in nb.cells[:n_student] if c.cell_type == "code" and CHECK_CALL.search(c.source)]
    if not checks:
        return "no exercise checker", None
    for cell in checks:
        text = "".join(o.get("data", {}).get("text/plain", "") + o.get("text", "") for o in cell.outputs)
        if "not attempted yet" not in text:
            first = cell.source.splitlines()[0]
            return f"checker did not report 'not attempted yet': {first} -> {text[:200]!r}", None
    return None, None


def two_thread(path: Path) -> bool:
    """Whether a chapter sets torch to two threads (it then runs alone: see ``main``)."""
    return "set_num_threads(2)" in path.read_text()


def _run(path: Path, one_thread: bool = False) -> tuple[Path, str | None, str | None, float]:
    # a kernel inherits this process's environment: run side by side, each kernel gets one thread
    if one_thread:
        os.environ["OMP_NUM_THREADS"] = "1"
    start = time.perf_counter()
    student, chapter = run_both(path)
    return path, student, chapter, time.perf_counter() - start


def _run_one_thread(path: Path) -> tuple[Path, str | None, str | None, float]:
    return _run(path, one_thread=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    # The chapters run JOBS at a time with one thread each, latest first (they take longest); the chapters
    # that set torch to two threads (17, 18, 20 and 25) run after them one at a time: two such kernels sharing
    # two cores slow each other several times over (chapters 17 and 18 side by side: 208 s and 368 s, against
    # about 55 s and 110 s alone).
    parser.add_argument("--jobs", type=int, default=2, help="chapters run at once, one thread each (default 2)")
    parser.add_argument("paths", nargs="*", help="chapters (default: all); their student versions run too")
    args = parser.parse_args(argv)
    chapters = [Path(p).resolve() for p in args.paths] or chapter_notebooks()
    # ipykernel 6's debugger warns at every kernel start on Python 3.12+ that frozen modules may hide
    # breakpoints; no debugger runs here, so the warning is noise in the report.
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")

    start = time.perf_counter()
    seen = probe()
    print("colab check: Python " + seen["python"] + ", "
          + ", ".join(f"{k} {v}" for k, v in seen.items() if k not in ("python", "attnbook_file")), flush=True)
    problems = check_environment(seen)
    for line in problems:
        print(f"colab check: {line}")
    if problems:
        print(f"colab check: this is not Colab's environment ({VERSIONS.relative_to(ROOT)}); run `make colab-check`")
        return 1

    failed = {"chapter": 0, "student": 0}
    side_by_side = sorted((p for p in chapters if not two_thread(p)), reverse=True)
    alone = [p for p in chapters if two_thread(p)]

    def report(path: Path, student: str | None, chapter: str | None, seconds: float) -> None:
        name = path.relative_to(NOTEBOOKS)
        if student is None and chapter is None:
            print(f"ok   {name} and its student version ({seconds:.0f} s)", flush=True)
        for kind, problem in (("student", student), ("chapter", chapter)):
            if problem is not None:
                failed[kind] += 1
                label = student_path(path).relative_to(NOTEBOOKS) if kind == "student" else name
                print(f"FAIL {label} ({seconds:.0f} s): {problem}", flush=True)

    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for result in pool.map(_run_one_thread, side_by_side):
            report(*result)
    with ProcessPoolExecutor(max_workers=1) as pool:  # a fresh process: this one's environment untouched
        for result in pool.map(_run, alone):
            report(*result)
    n = m = len(chapters)
    print(f"colab check: chapters {n - failed['chapter']} passed, {failed['chapter']} failed; "
          f"student versions {m - failed['student']} passed, {failed['student']} failed "
          f"({time.perf_counter() - start:.0f} s)")
    return 1 if any(failed.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
