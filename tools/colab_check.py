"""Execute every chapter in an environment shaped like Google Colab's (see ``make colab-check``).

Colab ships ipywidgets 7.7, matplotlib 3.10 and numpy 2.1; ``make colab-check`` installs those into
``.venv-colab`` with the package, and this script runs each chapter notebook top to bottom there in a
fresh kernel, reporting any error. It only executes: outputs are compared by nbval in ``make test``.
"""

from __future__ import annotations

import sys
import time
from importlib.metadata import version

from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from tools.notebooks import NOTEBOOKS, chapter_notebooks, read


def main() -> None:
    print("colab check:", ", ".join(f"{p} {version(p)}" for p in ("ipywidgets", "matplotlib", "numpy", "torch")))
    if not version("ipywidgets").startswith("7."):
        sys.exit("colab check: this environment should have ipywidgets 7 (as Colab does)")
    failures = 0
    for path in chapter_notebooks():
        nb = read(path)
        start = time.perf_counter()
        try:
            NotebookClient(nb, timeout=300, kernel_name="python3",
                           resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
            print(f"ok   {path.name} ({time.perf_counter() - start:.0f} s)")
        except CellExecutionError as exc:
            failures += 1
            print(f"FAIL {path.name}: {str(exc).strip().splitlines()[-1][:300]}")
    print(f"colab check: {len(chapter_notebooks()) - failures} passed, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
