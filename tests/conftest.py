"""Shared test set-up: a non-interactive Matplotlib backend that is emptied after every test, the
repository root on sys.path, and the small corpora the training tests share (as fixtures).

The tests mirror the package: ``tests/numpy``, ``tests/torch``, ``tests/training``, ``tests/data``,
``tests/bench``, ``tests/widgets`` and ``tests/exercises`` test the subpackages of those names;
``tests/package`` the package as a whole (its imports, errors, command line and installation) and
``tests/book`` the chapters, the site and Colab.
"""

import os
import random
import sys
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the authoring tools in tools/ are tested too


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: minutes of work (make test-slow runs these; make test leaves them out)")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # make test runs one worker per core; each worker's PyTorch would start a thread per core as well, and
        # twice as many threads as cores wait on each other (the training tests ran about three times slower).
        import torch

        torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def close_figures():
    """Close every figure a test drew, so figures do not pile up across tests."""
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.fixture
def float64():
    """Make float64 the default dtype for one test, and restore the previous default afterwards."""
    import torch

    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


# The small corpora are made once per session: a run on them trains in a second, not Tiny Shakespeare's minutes.
WORDS = "the king queen crown sword night day love death speak hear my lord good sir".split()


@pytest.fixture(scope="session")
def word_text() -> str:
    """600 lines of eight words drawn (seeded) from a 15-word Shakespearean vocabulary: 22,000 characters."""
    rng = random.Random(0)
    return "\n".join(" ".join(rng.choice(WORDS) for _ in range(8)) + "." for _ in range(600))


@pytest.fixture(scope="session")
def verse_text() -> str:
    """Eight short lines repeated 60 times: a text a tiny model learns within tens of steps."""
    return "\n".join(f"the {w} of the {v}." for w in ("king", "queen", "crown", "night") for v in ("day", "sword")) * 60


@pytest.fixture
def text_file(tmp_path, word_text) -> Path:
    """``word_text`` written to a UTF-8 file, for the command line's ``--text-file``."""
    path = tmp_path / "text.txt"
    path.write_text(word_text, encoding="utf-8")
    return path
