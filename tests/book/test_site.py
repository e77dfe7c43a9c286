"""The site's own Sphinx extensions and its API reference: the solution markers leave the rendered code cells,
each name of the package is documented once and found by both of its names, and every public module's names
are on a page of the API reference that the table of contents lists."""

import importlib
import inspect
import pkgutil
import re
import textwrap
from pathlib import Path

import pytest
import yaml
from docutils import nodes
from docutils.utils import new_document

import attnbook
from tools import sphinx_api, student
from tools.notebooks import chapter_notebooks, read
from tools.sphinx_solutions import MARKER_LINE, _strip_cells, strip_markers

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "book" / "api"
AUTOMODULE = re.compile(r"^\.\. automodule:: (\S+)$", re.MULTILINE)


# The solution markers, as tools/student.py reads them, leave the site's code cells.

SOLUTION_CELL = """def softmax_rows(S):
    ### BEGIN SOLUTION
    ### HINT: subtract one constant per row.
    ### HINT: keep the reduced axis.
    e = np.exp(S - S.max(axis=1, keepdims=True))  # ### HINT: in a comment stays
    return e / e.sum(axis=1, keepdims=True)
    ### END SOLUTION
print("### END SOLUTION")"""


def test_strip_markers_removes_exactly_the_marker_lines():
    assert strip_markers(SOLUTION_CELL) == textwrap.dedent("""\
        def softmax_rows(S):
            e = np.exp(S - S.max(axis=1, keepdims=True))  # ### HINT: in a comment stays
            return e / e.sum(axis=1, keepdims=True)
        print("### END SOLUTION")""")
    plain = "x = 1\n\ny = 2\n"
    assert strip_markers(plain) is plain


def test_marker_lines_are_the_ones_student_versions_read():
    # Every line tools/student.py treats as a marker is one that the site strips, and the reverse.
    for line in SOLUTION_CELL.splitlines():
        stripped = line.strip()
        is_marker = stripped in (student.BEGIN, student.END) or stripped.startswith(student.HINT)
        assert bool(MARKER_LINE.match(line)) == is_marker, line


def _doctree(*cells: tuple[str, str]) -> nodes.document:
    """A doctree holding one container per (nb_element, code) pair, each with a literal block of the code."""
    doctree = new_document("test")
    for element, code in cells:
        container = nodes.container(nb_element=element)
        container += nodes.literal_block(code, code)
        doctree += container
    return doctree


def test_only_code_cells_lose_their_markers():
    doctree = _doctree(("cell_code_source", SOLUTION_CELL), ("cell_code_output", SOLUTION_CELL))
    _strip_cells(None, doctree)
    source, output = doctree.findall(nodes.literal_block)
    assert source.astext() == source.rawsource == strip_markers(SOLUTION_CELL)
    assert output.astext() == SOLUTION_CELL  # an output that prints a marker is what the cell printed


# The hints of the student versions read as sentences.

@pytest.mark.parametrize("text, expected", [
    ("subtract one constant. keep the axis.", "Subtract one constant. Keep the axis."),
    ("a softmax ignores it? the rows differ!", "A softmax ignores it? The rows differ!"),
    ("x is used twice. np.argsort sorts. in_proj_weight holds. p(1) is. d/du of c.",
     "x is used twice. np.argsort sorts. in_proj_weight holds. p(1) is. d/du of c."),
    ("arctan2 gives it. grid_h rows. (Eckart and Young).", "arctan2 gives it. grid_h rows. (Eckart and Young)."),
    ("compare 0.5 with x.max(). tap j reads.", "Compare 0.5 with x.max(). Tap j reads."),
])
def test_capitalise_sentences(text, expected):
    assert student.capitalise_sentences(text) == expected


def test_hints_of_every_chapter_open_with_a_capital_or_a_name_from_the_code():
    for chapter in chapter_notebooks():
        for cell in read(chapter).cells:
            for hint in student.solution_hints(cell.source) if cell.cell_type == "code" else []:
                first = hint.split()[0]
                assert first[0].isupper() or not re.fullmatch(r"[a-z]{2,}[,:;]?", first), (chapter.name, hint)


# The API reference covers the package.

def _public_modules() -> list[str]:
    found = ["attnbook"] + [m.name for m in pkgutil.walk_packages(attnbook.__path__, "attnbook.")]
    return [m for m in found if not any(part.startswith("_") for part in m.split("."))]


def _own_documented_names(module_name: str) -> list[str]:
    """The names autodoc documents for a module on the API reference: its ``__all__`` (or, without one, what it
    defines) that has a docstring and that no package above it exports."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, obj in vars(module).items()
                 if not n.startswith("_") and getattr(obj, "__module__", None) == module_name]
    return [n for n in names if inspect.getdoc(getattr(module, n)) and not inspect.ismodule(getattr(module, n))
            and not sphinx_api.exported_above(module_name, n, getattr(module, n))]


def _documented_modules() -> dict[str, str]:
    return {m: page.name for page in API.glob("*.md") for m in AUTOMODULE.findall(page.read_text())}


def test_every_public_module_with_names_of_its_own_is_on_an_api_page():
    documented = _documented_modules()
    missing = [m for m in _public_modules() if _own_documented_names(m) and m not in documented]
    assert not missing, f"add these modules to a page of book/api/: {missing}"


def test_api_pages_name_existing_modules_once():
    pages = [m for page in API.glob("*.md") for m in AUTOMODULE.findall(page.read_text())]
    assert len(pages) == len(set(pages))
    for module in pages:
        importlib.import_module(module)


def test_the_table_of_contents_lists_every_api_page():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    appendix = next(part for part in toc["parts"] if part["caption"] == "Appendix: API reference")
    listed = [ch["file"] for ch in appendix["chapters"]]
    assert listed[0] == "book/api/index"
    assert sorted(listed) == sorted(f"book/api/{p.stem}" for p in API.glob("*.md"))


def test_a_name_a_package_exports_is_skipped_in_its_module():
    import attnbook.torch
    from attnbook.torch import blocks, decoding

    assert sphinx_api.exported_above("attnbook.torch.blocks", "EncoderBlock", blocks.EncoderBlock)
    assert sphinx_api.exported_above("attnbook.torch.decoding", "generate", decoding.generate)
    # Not in the package itself, nor for a name the package does not export, nor for another object.
    assert not sphinx_api.exported_above("attnbook.torch", "EncoderBlock", attnbook.torch.EncoderBlock)
    assert "next_token_distribution" not in attnbook.torch.__all__
    assert not sphinx_api.exported_above("attnbook.torch.decoding", "next_token_distribution",
                                         decoding.next_token_distribution)
    assert not sphinx_api.exported_above("attnbook.torch.blocks", "EncoderBlock", blocks.DecoderBlock)


# The extensions at work, on a package made for the test: built with Sphinx as the book is.

PACKAGE = {
    "__init__.py": '''"""A package."""
from tpkg.mod import Thing, make, check_it
__all__ = ["Thing", "make", "check_it"]
''',
    "mod.py": '''"""A module."""


class _Checker:
    """The checkers' class."""

    def __init__(self, doc):
        self.__doc__ = doc

    def __call__(self, fn):
        return fn


class Thing:
    """A thing."""


def make():
    """Make a thing."""
    return Thing()


def helper():
    """Only here."""


check_it = _Checker("Check ``fn``: the contract.")
''',
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from sphinx.application import Sphinx

    root = tmp_path_factory.mktemp("site")
    (root / "tpkg").mkdir()
    for name, text in PACKAGE.items():
        (root / "tpkg" / name).write_text(text)
    (root / "conf.py").write_text(textwrap.dedent(f"""\
        import sys
        sys.path[:0] = [{str(root)!r}, {str(ROOT)!r}]
        extensions = ["sphinx.ext.autodoc", "sphinx.ext.viewcode", "tools.sphinx_api"]
        nitpicky = True
        """))
    (root / "index.rst").write_text("API\n===\n\n.. automodule:: tpkg\n   :members:\n\n"
                                    ".. automodule:: tpkg.mod\n   :members:\n")
    warnings = root / "warnings.txt"
    with warnings.open("w") as stream:
        app = Sphinx(root, root, root / "_build", root / "_doctrees", "html", status=None, warning=stream,
                     freshenv=True)
        app.build()
    import sys
    sys.modules.pop("tpkg", None)
    sys.modules.pop("tpkg.mod", None)
    return app, (root / "_build" / "index.html").read_text(), warnings.read_text()


def test_each_name_documented_once_under_its_package(built):
    app, page, warnings = built
    assert warnings == ""
    for name in ("tpkg.Thing", "tpkg.make", "tpkg.check_it", "tpkg.mod.helper"):
        assert f'id="{name}"' in page, name
    for name in ("tpkg.mod.Thing", "tpkg.mod.make", "tpkg.mod.check_it"):
        assert f'id="{name}"' not in page, name
    assert "the contract." in page  # the checker's own docstring, not its class's


def test_module_names_find_the_package_entries(built):
    app, page, warnings = built
    objects = app.env.domains["py"].objects
    assert objects["tpkg.mod.Thing"].node_id == "tpkg.Thing"  # autodoc's canonical name for a class
    assert objects["tpkg.mod.make"].node_id == "tpkg.make"  # and the same for a function
    assert objects["tpkg.mod.helper"].node_id == "tpkg.mod.helper"


# The site check's reading of a built page.

def test_site_check_reports_markers_in_code_not_in_prose():
    from bs4 import BeautifulSoup

    from tools.site_check import solution_markers

    page = BeautifulSoup("<p>between <code>### BEGIN SOLUTION</code> and its end</p>"
                         "<pre>def f(x):\n    ### HINT: square it.\n    return x * x</pre>"
                         "<pre>print('### END SOLUTION')</pre>", "html.parser")
    assert solution_markers(page) == ["### HINT: square it."]


def test_site_check_reports_imported_names_without_their_link():
    from bs4 import BeautifulSoup

    from tools.site_check import unlinked_names

    cell = ('<div class="cell_input"><pre>from attnbook.torch import '
            '<a class="sphinx-codeautolink-a" href="#">EncoderBlock</a>, GPT, no_entry\n'
            'from attnbook.widgets import (  # the figures\n'
            '    <a class="sphinx-codeautolink-a" href="#">controls</a>,\n    mask_explorer,\n)\n'
            'import attnbook.torch as at</pre></div>')
    entries = frozenset({"attnbook.torch.EncoderBlock", "attnbook.torch.GPT", "attnbook.widgets.controls",
                         "attnbook.widgets.mask_explorer"})
    assert unlinked_names(BeautifulSoup(cell, "html.parser"), entries) == [
        "attnbook.torch.GPT", "attnbook.widgets.mask_explorer"]


def test_code_links_of_unread_pages_survive_a_build(tmp_path):
    from sphinx_codeautolink.extension.block import CodeExample, Name, SourceTransform
    from sphinx_codeautolink.extension.cache import DataCache

    from tools.sphinx_codelinks import read_cache

    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "13_encoder_block.ipynb").write_text("{}")
    name = Name(["attnbook", "torch", "EncoderBlock"], "at.EncoderBlock", 3, 3,
                resolved_location="attnbook.torch.EncoderBlock")
    transform = SourceTransform("block = at.EncoderBlock(8, 2, 32)", [name],
                                CodeExample("notebooks/13_encoder_block", "a-block", ["A block"]), 3)
    written = DataCache(str(tmp_path), str(tmp_path))
    written.transforms = {"notebooks/13_encoder_block": [transform], "gone": [transform]}
    written.write()
    cache = DataCache(str(tmp_path), str(tmp_path))
    read_cache(cache)
    assert cache.transforms == {"notebooks/13_encoder_block": [transform]}  # a page whose source is gone is not

