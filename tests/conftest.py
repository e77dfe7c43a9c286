"""Shared test set-up: a non-interactive Matplotlib backend that is emptied after every test, and the
repository root on sys.path."""

import os
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
