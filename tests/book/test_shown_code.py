"""Every chapter from 12 on shows the package code it teaches, and what it shows is the package's code.

A cell that calls ``show(...)`` displays ``# attnbook/<file>.py: <name>`` and the source (``attnbook.show``);
nbval compares that output with the installed code every time the chapters are tested. This test adds the two
things nbval cannot: that no chapter from 12 to 28 is left without such a display, and that each display's
header still names a file of the package and an object in it (a display left from a renamed or moved object
would otherwise be compared only when the chapter runs).
"""

from __future__ import annotations

import importlib
import re

import pytest

from tools.notebooks import chapter_notebooks, read

ROOT_MODULE = "attnbook"
HEADER = re.compile(r"^# (attnbook/[\w/]+)\.py: ([\w.]+)$", re.MULTILINE)
FIRST_SHOWING = 12  # from chapter 12 on, the book teaches the package's modules

CHAPTERS = [p for p in chapter_notebooks() if int(p.name[:2]) >= FIRST_SHOWING]


def shown(path) -> list[tuple[str, str]]:
    """(file, qualified name) of each piece of package code the chapter's stored outputs display."""
    found = []
    for cell in read(path).cells:
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            text = output.get("data", {}).get("text/plain", "")
            found += HEADER.findall(text if isinstance(text, str) else "".join(text))
    return found


def test_chapters_from_12_on_are_found():
    assert len(CHAPTERS) == 17, [p.name for p in CHAPTERS]


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_shows_package_code_that_exists(path):
    pieces = shown(path)
    assert pieces, f"{path.name} shows none of the package's code (call attnbook.show where the prose teaches it)"
    for file, name in pieces:
        module = importlib.import_module(file.replace("/", ".").removesuffix(".__init__"))
        obj = module
        for part in name.split("."):
            assert hasattr(obj, part), f"{path.name} shows {name} from {file}.py, which no longer defines it"
            obj = getattr(obj, part)
