"""The allocator part of ``python -m attnbook.bench attention`` (chapter 20): its page-fault count against the
number of pages a fresh mapping has, glibc keeping freed memory in a child process started for it, and the
recorded output that chapter 20 types in."""

import ast
import json
import mmap
import resource
from pathlib import Path

from attnbook.bench.attention import allocator_child, minor_faults

ROOT = Path(__file__).resolve().parents[2]


def test_minor_faults_counts_each_fresh_page_once():
    page, pages = resource.getpagesize(), 64  # 256 KiB: too small for a 2 MiB page, so one fault per page
    fresh = mmap.mmap(-1, pages * page)  # anonymous: no page is mapped until it is first written

    def touch():
        for p in range(pages):
            fresh[p * page] = 1

    first = minor_faults(touch)
    again = minor_faults(touch)  # the pages are mapped now
    fresh.close()
    assert pages <= first <= pages + 8  # a few more for the interpreter's own work
    assert again <= 8


def test_keeping_freed_memory_removes_plain_attentions_page_faults():
    default = allocator_child([512], keep=False, rounds=1)["512"]
    kept = allocator_child([512], keep=True, rounds=1)["512"]
    array_pages = 4 * 512 * 512 // resource.getpagesize()  # one float32 T x T array
    assert default["numpy plain"]["faults"] >= array_pages  # at least one fresh array's worth at every call
    assert default["numpy tiled"]["faults"] < array_pages / 10
    assert all(kernel["faults"] <= 2 for kernel in kept.values())  # a stray page of Python's own arenas at most
    assert all(len(kernel["seconds"]) == 1 for kernel in (*default.values(), *kept.values()))


def _typed_in(name: str):
    """The literal assigned to ``name`` in a code cell of chapter 20."""
    cells = json.loads((ROOT / "notebooks" / "20_attention_at_scale.ipynb").read_text())["cells"]
    for cell in cells:
        if cell["cell_type"] == "code" and f"\n{name} = " in "\n" + "".join(cell["source"]):
            for node in ast.parse("".join(cell["source"])).body:
                if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name:
                    return ast.literal_eval(node.value)
    raise AssertionError(f"no cell of chapter 20 assigns {name}")


def test_chapter_20_types_in_the_recorded_allocator_output():
    rows = {}
    for line in (ROOT / "notebooks" / "bench" / "20_allocator.txt").read_text().splitlines():
        cells = [c.split() for c in line.split("|")]
        if len(cells) == 7 and cells[0][-1] in ("default", "kept") and cells[0][0].isdigit():
            rows[int(cells[0][0]), cells[0][1]] = cells
    assert rows, "no table rows in notebooks/bench/20_allocator.txt"
    lengths = sorted({T for T, _ in rows})
    ratios = {T: tuple(tuple(float(r) for r in rows[T, s][4][0].split("/")) for s in ("default", "kept"))
              for T in lengths}
    assert _typed_in("recorded_ratio") == ratios
    faults = {"numpy plain": tuple(float(rows[T, "default"][1][1]) for T in lengths),
              "torch math": tuple(float(rows[T, "default"][3][1]) for T in lengths)}
    assert _typed_in("recorded_faults") == faults
    assert all(float(rows[T, "kept"][i][0]) == 0 for T in lengths for i in (1, 2, 3))  # none with memory kept
