"""A Sphinx extension: sphinx-codeautolink (which links the names in code cells to the API reference) on pages
that hold exercises.

sphinx-codeautolink 0.20.0 keeps a stack of section titles while it reads a page, pushing at each title and
popping at the end of each section. sphinx-exercise 1.2.1 writes an exercise's and a solution's body as a
section without a title, so the stack is popped once too often and the build stops (IndexError: pop from empty
list). Here a section pops the stack only when it opens with a title, as each push came from one.
"""

from __future__ import annotations

from docutils import nodes
from sphinx_codeautolink.extension.block import CodeBlockAnalyser

_depart_section = CodeBlockAnalyser.depart_section


def depart_section(self, node: nodes.section) -> None:
    if node.children and isinstance(node.children[0], nodes.title):
        _depart_section(self, node)


def setup(app):
    app.setup_extension("sphinx_codeautolink")
    CodeBlockAnalyser.depart_section = depart_section
    return {"parallel_read_safe": True, "parallel_write_safe": True}
