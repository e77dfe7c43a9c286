"""A pytest plugin that prints how many seconds each test file (each notebook, for nbval) took in all.

Usage: ``pytest -p tools.durations_by_file ...``; ``make pytest`` and ``make nbval`` load it, so that a run
says where its time went (pytest's ``--durations`` lists single tests; a chapter is many cells).
"""

from __future__ import annotations

from collections import defaultdict

_seconds: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report) -> None:
    # setup, call and teardown all count: a notebook's kernel starts in the first cell's setup
    _seconds[report.nodeid.split("::")[0]] += report.duration


def pytest_terminal_summary(terminalreporter) -> None:
    if not _seconds:
        return
    total = sum(_seconds.values())
    terminalreporter.section("seconds per file (summed over its tests; with -n, workers overlap)")
    for name, seconds in sorted(_seconds.items(), key=lambda kv: -kv[1])[:30]:
        terminalreporter.write_line(f"{seconds:8.1f} s  {seconds / total:6.1%}  {name}")
    terminalreporter.write_line(f"{total:8.1f} s  in all, over {len(_seconds)} files")
