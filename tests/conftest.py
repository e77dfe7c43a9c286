"""Shared test set-up: a non-interactive Matplotlib backend, and the repository root on sys.path."""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the authoring tools in tools/ are tested too
