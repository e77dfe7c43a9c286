"""Re-execute chapter notebooks in place, top to bottom, in a fresh kernel.

Widget state is stored in the notebook so the site can show the widgets; cells time out after the
``execute.timeout`` of ``_config.yml``. Usage: ``python -m tools.execute [notebooks/NN_name.ipynb ...]``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tools.kernel import notebook_client
from tools.notebooks import NOTEBOOKS, chapter_notebooks, config, read, write


def execute(chapter: Path) -> float:
    """Execute ``chapter`` in place; return the seconds it took."""
    nb = read(chapter)
    client = notebook_client(
        nb,
        int(config()["execute"]["timeout"]),
        str(NOTEBOOKS),
        store_widget_state=True,
        record_timing=False,  # timestamps would make every re-run a diff
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    write(nb, chapter)
    return seconds


def main(paths: list[str]) -> None:
    chapters = [Path(p).resolve() for p in paths] or chapter_notebooks()
    for chapter in chapters:
        print(f"execute: {chapter.name} ... ", end="", flush=True)
        print(f"{execute(chapter):.1f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
