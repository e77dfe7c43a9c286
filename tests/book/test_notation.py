"""book/notation.md holds in every chapter: a reserved symbol used with another meaning is listed there.

The rules below recognise uses of a reserved symbol that carry another meaning, in the chapters' markdown
(inside ``$...$`` and ``$$...$$``) and in the comments of their code cells:

- ``w``: a subscripted or superscripted $w$ (``w_i``, ``w_{ij}``, ``w^\\text{topic}``). The book reserves $w$
  for the half-width of a local window, a single number that is never indexed; attention weights are
  $\\alpha$.
- ``L``: $\\partial L$, a derivative of $L$. $L$ counts the blocks of a stack; the loss is $\\mathcal{L}$.
- ``W_q``: $q\\,W_q$ or $k\\,W_k$, a projection applied to a query or key. $W_q$ and $W_k$ project the
  tokens $X$ and the context $Z$ into queries and keys; a matrix that acts on a query is something else.
- ``s``: ``s = <number>`` in code. $s$ and ``scores`` are scores, an array; a number called ``s`` is
  something else.
- a comment token shaped like a size, ``T_x`` or ``d_x``, names a size: it must be a name notation.md gives in
  its "in code" column outside parentheses (the book-wide names), a name the chapter's code binds, or a
  symbol the chapter's markdown writes in math (``$d_i$``, ``$T_\\text{out}$``). ``T_z`` in a chapter whose
  code has no ``T_z`` names nothing.

A use a rule finds is allowed only where notation.md's table "Where a chapter uses a symbol otherwise" lists
its chapter and key, and every row of that table must still be found, so the table says exactly what holds.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager

from tools.notebooks import ROOT, chapter_notebooks, read

NOTATION = ROOT / "book" / "notation.md"
EXCEPTIONS_HEADING = "## Where a chapter uses a symbol otherwise"

MATH = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$", re.DOTALL)
INDEXED_W = re.compile(r"(?<![\\A-Za-z])w\s*[_^]")
DERIVATIVE_OF_L = re.compile(r"\\partial\s*\{?\s*L(?![A-Za-z_])")
PROJECTION_OF_QUERY = re.compile(r"(?<![\\A-Za-z0-9_{])(q|k)(_\{[^}]*\}|_[A-Za-z0-9])?\s*(\\,|\\;|\\ )?\s*W_\{?(q|k)\b")
NUMBER_CALLED_S = re.compile(r"^\s*s\s*=\s*[-+]?(\d|\.\d)", re.MULTILINE)
SIZE_TOKEN = re.compile(r"(?<![A-Za-z0-9_])([Td]_[A-Za-z][A-Za-z0-9]*)\b")
MATH_SIZE = re.compile(r"(?<![\\A-Za-z])([Td])_(?:\{\\(?:text|mathrm)\{([A-Za-z0-9]+)\}\}"
                       r"|\\(?:text|mathrm)\{([A-Za-z0-9]+)\}|\{([A-Za-z0-9]+)\}|([A-Za-z0-9]))")


def math_segments(markdown: str) -> list[str]:
    """The LaTeX of a markdown cell: what stands between ``$$...$$`` or ``$...$``, code spans left out."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.DOTALL)
    text = re.sub(r"`[^`\n]*`", " ", text)
    return [a or b for a, b in MATH.findall(text)]


def code_of(cell) -> str:
    return TransformerManager().transform_cell(cell.source)


def comments(source: str) -> list[str]:
    try:
        return [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline)
                if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return [line.split("#", 1)[1] for line in source.splitlines() if "#" in line]


def bound_names(nb) -> set[str]:
    """Every name the chapter's code binds or refers to: variables, parameters, keywords, attributes."""
    names: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(code_of(cell))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.keyword) and node.arg:
                names.add(node.arg)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
    return names


def math_sizes(nb) -> set[str]:
    """The sizes the chapter's markdown writes in math, as code would spell them: $T_\\text{out}$ is T_out."""
    found: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for segment in math_segments(cell.source):
                for m in MATH_SIZE.finditer(segment):
                    found.add(f"{m.group(1)}_{next(g for g in m.groups()[1:] if g)}")
    return found


def book_wide_names(notation: str) -> set[str]:
    """The names in notation.md's "in code" columns outside parentheses: the sizes every chapter may use."""
    names: set[str] = set()
    for line in notation.split(EXCEPTIONS_HEADING, 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and "`" in cells[1]:
            outside = re.sub(r"\([^)]*\)", " ", cells[1])
            names.update(re.findall(r"`([^`]+)`", outside))
    return names


def listed_exceptions(notation: str) -> set[tuple[int, str]]:
    """The (chapter, key) pairs of notation.md's table of other uses: chapter number, key in code font."""
    assert EXCEPTIONS_HEADING in notation, f"notation.md has no section {EXCEPTIONS_HEADING!r}"
    section = notation.split(EXCEPTIONS_HEADING, 1)[1].split("\n## ", 1)[0]
    pairs: set[tuple[int, str]] = set()
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].isdigit():
            key = re.match(r"`([^`]+)`", cells[1])
            assert key, f"row {line!r}: the symbol column must start with its key in code font"
            pairs.add((int(cells[0]), key.group(1)))
    return pairs


def misuses(nb, book_wide: set[str]) -> list[tuple[str, int, str]]:
    """``(key, cell index, excerpt)`` for every use the rules recognise in one chapter."""
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            for segment in math_segments(cell.source):
                for key, rule in (("w", INDEXED_W), ("L", DERIVATIVE_OF_L), ("W_q", PROJECTION_OF_QUERY)):
                    found += [(key, i, segment[max(0, m.start() - 20):m.end() + 20]) for m in rule.finditer(segment)]
        elif cell.cell_type == "code":
            source = code_of(cell)
            found += [("s", i, m.group(0).strip()) for m in NUMBER_CALLED_S.finditer(source)]
    known = book_wide | bound_names(nb) | math_sizes(nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            for comment in comments(code_of(cell)):
                found += [(m.group(1), i, comment.strip()) for m in SIZE_TOKEN.finditer(comment)
                          if m.group(1) not in known]
    return found


def chapter_number(path: Path) -> int:
    return int(path.name[:2])


CHAPTERS = chapter_notebooks()


def test_notation_names_its_book_wide_sizes():
    names = book_wide_names(NOTATION.read_text())
    assert {"T", "T_q", "T_k", "d_model", "d_head", "d_k", "d_v"} <= names
    assert "T_z" not in names and "d_attn" not in names  # chapter names, given in parentheses


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_reserved_symbols_keep_their_meaning(path):
    notation = NOTATION.read_text()
    listed = listed_exceptions(notation)
    chapter = chapter_number(path)
    unlisted = [(key, i, text) for key, i, text in misuses(read(path), book_wide_names(notation))
                if (chapter, key) not in listed]
    assert not unlisted, (
        f"chapter {chapter} uses reserved symbols with another meaning, not listed in book/notation.md: "
        + "; ".join(f"{key!r} in cell {i}: {text!r}" for key, i, text in unlisted))


def test_every_listed_exception_is_still_used():
    notation = NOTATION.read_text()
    book_wide = book_wide_names(notation)
    found = {(chapter_number(p), key) for p in CHAPTERS for key, _, _ in misuses(read(p), book_wide)}
    stale = sorted(listed_exceptions(notation) - found)
    assert not stale, f"book/notation.md lists uses no chapter makes any more (chapter, key): {stale}"


# The rules must be able to fail: each planted misuse below is found, and its correct spelling is not.

def notebook(markdown: str = "", code: str = "") -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(markdown), nbformat.v4.new_code_cell(code)]
    return nb


@pytest.mark.parametrize(("planted", "fixed", "key"), [
    (notebook(r"weights $w_{ij} = e^{s_{ij}} / Z$"), notebook(r"weights $\alpha_{ij} = e^{s_{ij}} / Z$"), "w"),
    (notebook(r"$$A = \sum_j w^\text{topic}_j$$"), notebook(r"$$A = \sum_j \alpha^\text{topic}_j$$"), "w"),
    (notebook(r"the gradient $\partial L / \partial q$"), notebook(r"the gradient $\partial \mathcal{L} / \partial q$"),
     "L"),
    (notebook(r"$$\frac{\partial L}{\partial s_j}$$"), notebook(r"$$\frac{\partial \mathcal{L}}{\partial s_j}$$"), "L"),
    (notebook(r"$v \cdot \tanh(q W_q + k W_k + b)$"), notebook(r"$u \cdot \tanh(q W_1 + k W_2 + b)$"), "W_q"),
    (notebook(code="s = 4.0\nW = s * W"), notebook(code="c = 4.0\ns = Q @ K.T"), "s"),
    (notebook(code="T = 3\nX = Z.T  # (d_z, T_z)"), notebook(code="T = 3\nX = Z.T  # (d_z, T)"), "T_z"),
    (notebook("the length $T_\\text{out}$", "J = f(x)  # (T_in, T_out)"),
     notebook("the lengths $T_\\text{out}$ and $T_\\text{in}$", "J = f(x)  # (T_in, T_out)"), "T_in"),
])
def test_a_planted_misuse_is_found(planted, fixed, key):
    book_wide = book_wide_names(NOTATION.read_text())
    assert key in {k for k, _, _ in misuses(planted, book_wide)}
    assert key not in {k for k, _, _ in misuses(fixed, book_wide)}


def test_a_misuse_planted_in_a_chapter_fails_it():
    """Chapter 5 passes as it is; with a phantom T_z in a comment, or a loss written L, it does not."""
    path = next(p for p in CHAPTERS if chapter_number(p) == 5)
    notation = NOTATION.read_text()
    listed, book_wide = listed_exceptions(notation), book_wide_names(notation)

    def unlisted(nb):
        return {key for key, _, _ in misuses(nb, book_wide) if (5, key) not in listed}

    nb = read(path)
    assert not unlisted(nb)
    code = next(c for c in nb.cells if c.cell_type == "code" and "X.T" in c.source)
    code.source += "\nZ_col = Z.T  # (d_z, T_z)"
    markdown = next(c for c in nb.cells if c.cell_type == "markdown" and "$" in c.source)
    markdown.source += r" The gradient $\partial L / \partial W_v$."
    assert unlisted(nb) == {"T_z", "L"}
