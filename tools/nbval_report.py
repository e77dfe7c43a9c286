"""Count how nbval checks the chapters' cells: compared exactly, or by an assertion in the cell.

Usage: ``python -m tools.nbval_report``. ``make nbval`` prints it after the comparison. Cells with no
stored output are compared too (a fresh run must print nothing) and are counted apart.
"""

from __future__ import annotations

from collections import Counter

from tools.notebooks import chapter_notebooks, comparison, read


def counts() -> dict[str, Counter]:
    """Per chapter: how many code cells with output are checked each way, and how many print nothing."""
    table = {}
    for path in chapter_notebooks():
        tally = Counter()
        for cell in read(path).cells:
            if cell.cell_type == "code":
                kind = comparison(cell)
                tally["exact, no output" if kind == "exact" and not cell.outputs else kind] += 1
        table[path.stem] = tally
    return table


def main() -> None:
    table = counts()
    kinds = ("exact", "assertion", "widget", "exact, no output", "unchecked")
    total = sum(table.values(), Counter())
    print(f"{'chapter':<32}" + "".join(f"{k:>18}" for k in kinds))
    for name, tally in table.items():
        print(f"{name:<32}" + "".join(f"{tally[k]:>18}" for k in kinds))
    print(f"{'all chapters':<32}" + "".join(f"{total[k]:>18}" for k in kinds))
    with_output = total["exact"] + total["assertion"] + total["widget"]
    print(f"cells with output: {with_output}; compared exactly {total['exact']} "
          f"({total['exact'] / with_output:.0%}), checked by an assertion {total['assertion']}, "
          f"widgets (set-up asserted) {total['widget']}; unchecked {total['unchecked']}")


if __name__ == "__main__":
    main()
