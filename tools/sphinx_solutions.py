"""A Sphinx extension: the site's solution cells without the markers that ``tools/student.py`` reads.

A chapter marks each solution inside a code cell with ``### BEGIN SOLUTION`` and ``### END SOLUTION`` and
gives its hints as ``### HINT:`` lines; ``tools/student.py`` turns them into the exercise's stub and a folded
hint. The committed chapters keep them, since the student versions are made from them, but on the site, where
the solution sits in a folded box under its exercise, they are noise: this removes those lines from the code
cells as the pages are read, before the code is highlighted and its names are linked.
"""

from __future__ import annotations

import re

from docutils import nodes

# A whole line holding one marker, as tools/student.py recognises them (its BEGIN, END and HINT).
MARKER_LINE = re.compile(r"^[ \t]*### (?:BEGIN SOLUTION|END SOLUTION|HINT:.*)[ \t]*$")


def strip_markers(source: str) -> str:
    """``source`` less its marker lines; every other line, and the text's end, as they were."""
    lines = source.split("\n")
    kept = [line for line in lines if not MARKER_LINE.match(line)]
    return source if len(kept) == len(lines) else "\n".join(kept)


def _strip_cells(app, doctree) -> None:
    for cell in doctree.findall(nodes.container):
        if cell.get("nb_element") != "cell_code_source":
            continue
        for block in cell.findall(nodes.literal_block):
            text = block.astext()
            stripped = strip_markers(text)
            if stripped != text:
                block[:] = [nodes.Text(stripped)]
                block.rawsource = stripped


def setup(app):
    # Before sphinx-codeautolink reads the code blocks (doctree-read at priority 490).
    app.connect("doctree-read", _strip_cells, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
