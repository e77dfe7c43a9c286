"""The bibliography parses and every citation in the book names one of its entries.

A malformed entry (a missing brace) otherwise surfaces only when the site is built, after the whole test
run; these checks take a fraction of a second.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIB = ROOT / "book" / "references.bib"
CITE = re.compile(r"\{cite(?::[a-z]+)?\}`([^`]+)`")


def _cited_keys() -> dict[str, str]:
    """Every key cited in a notebook's markdown or a book page, with the first file that cites it."""
    keys: dict[str, str] = {}
    sources: list[tuple[str, str]] = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        sources.append((path.name, text))
    for path in sorted((ROOT / "book").glob("*.md")):
        sources.append((path.name, path.read_text()))
    for name, text in sources:
        for group in CITE.findall(text):
            for key in group.split(","):
                keys.setdefault(key.strip(), name)
    return keys


def test_the_bibliography_parses_strictly():
    # pybtex comes with sphinxcontrib-bibtex, which requirements.txt pins
    from pybtex import errors
    from pybtex.database import parse_file

    # strict mode turns a syntax error (a missing closing brace) into an exception naming the line
    errors.set_strict_mode(True)
    entries = parse_file(str(BIB)).entries
    assert len(entries) > 0


def test_every_citation_names_an_entry_and_keys_are_unique():
    text = BIB.read_text()
    keys = re.findall(r"^@\w+\{([^,\s]+),", text, flags=re.M)
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    assert not duplicates, f"references.bib defines these keys more than once: {duplicates}"
    # each entry opens with '@' at the start of a line and closes its braces before the next one
    for chunk in re.split(r"^(?=@)", text, flags=re.M):
        if chunk.startswith("@"):
            depth = chunk.count("{") - chunk.count("}")
            first = chunk.splitlines()[0]
            assert depth == 0, f"unbalanced braces ({depth:+d}) in the entry that starts {first!r}"
    cited = _cited_keys()
    assert cited, "no citations found: the pattern that finds them is wrong"
    missing = {k: f for k, f in cited.items() if k not in keys}
    assert not missing, f"cited but not in references.bib: {missing}"


def _texts() -> list[tuple[str, str]]:
    """(file name, text) of every notebook's markdown and every book page."""
    out = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        out.append((path.name, "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")))
    out += [(path.name, path.read_text()) for path in sorted((ROOT / "book").glob("*.md"))]
    return out


def test_every_cross_reference_names_a_label():
    # the site build fails on an undefined label (warnings are errors); this says so in a second
    texts = _texts()
    defined = set()
    for _, text in texts:
        defined |= set(re.findall(r"^:(?:label|name): *(\S+)", text, flags=re.M))
        defined |= set(re.findall(r"^\(([\w-]+)\)=", text, flags=re.M))
    missing = {}
    for name, text in texts:
        for target in re.findall(r"\{(?:ref|numref|eq|prf:ref)\}`(?:[^`<]*<)?([^`>]+)>?`", text):
            if target.strip() not in defined:
                missing.setdefault(target.strip(), name)
    assert defined, "no labels found: the pattern that finds them is wrong"
    assert not missing, f"referenced but never defined (label: first file): {missing}"
