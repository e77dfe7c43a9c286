"""A Sphinx extension: sphinx-codeautolink (which links the names in code cells to the API reference) on pages
that hold exercises.

sphinx-codeautolink 0.20.0 keeps a stack of section titles while it reads a page, pushing at each title and
popping at the end of each section. sphinx-exercise 1.2.1 writes an exercise's and a solution's body as a
section without a title, so the stack is popped once too often and the build stops (IndexError: pop from empty
list). Here a section pops the stack only when it opens with a title, as each push came from one.

It also keeps, between builds, what it found in the pages that a build does not read again (those unchanged):
its cache keeps only the pages whose source is a ``.rst`` file, so after a build that reread a few pages the
chapters (``.ipynb``) and the other pages (``.md``) lost every link. Here a page is kept when its source exists
with any suffix.
"""

from __future__ import annotations

import json

from docutils import nodes
from sphinx_codeautolink.extension.block import CodeBlockAnalyser, CodeExample, Name, SourceTransform
from sphinx_codeautolink.extension.cache import DataCache

_depart_section = CodeBlockAnalyser.depart_section


def depart_section(self, node: nodes.section) -> None:
    if node.children and isinstance(node.children[0], nodes.title):
        _depart_section(self, node)


def read_cache(self: DataCache) -> None:
    """``DataCache.read``, keeping each page whose source exists, whatever its suffix."""
    cache = self.cache_dir / self.cache_filename
    if not cache.exists():
        return
    for file, transforms in json.loads(cache.read_text("utf-8")).items():
        if not any(self.src_dir.glob(f"{file}.*")):
            continue
        self.transforms[file] = [
            SourceTransform(**{**t, "example": CodeExample(**t["example"]), "names": [Name(**n) for n in t["names"]]})
            for t in transforms]


def setup(app):
    app.setup_extension("sphinx_codeautolink")
    CodeBlockAnalyser.depart_section = depart_section
    DataCache.read = read_cache
    return {"parallel_read_safe": True, "parallel_write_safe": True}
