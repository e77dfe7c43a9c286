"""Install the pinned PyTorch before the rest of the environment: on Linux, PyTorch's CPU build.

PyPI's torch for Linux is the CUDA build: a 527 MB wheel that pulls 2.2 GB of NVIDIA libraries and Triton (2.7
GB in all for Python 3.11 on x86-64), for a course that runs on a CPU. PyTorch's own CPU index serves the same
release built for the CPU alone (192 MB for Python 3.11 on x86-64). ``make`` runs this before ``pip install -r
requirements.txt``, which then finds the pin (``torch==X``) satisfied by ``X+cpu`` and installs nothing more
for it.

``TORCH=cuda make book`` (any value but ``cpu``) skips this step, so pip takes PyPI's default build, the CUDA
one on Linux. macOS and Windows get a CPU build from PyPI anyway, so there is nothing to do there.

Where the CPU index cannot be reached (a network that allows only PyPI, say), this says so within seconds and
leaves torch to PyPI: pip itself, pointed at an unreachable index, retries for minutes.

Usage: ``python -m tools.install_torch [--torch cpu|cuda] [--requirements requirements.txt]``.

"""

from __future__ import annotations

import argparse
import platform
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PROBE_SECONDS = 5.0  # how long the index may take to answer before the install goes on without it


def torch_pin(requirements: str) -> str:
    """The ``torch==X`` line of a requirements file's text."""
    match = re.search(r"^torch==(\S+)\s*$", requirements, re.MULTILINE)
    if match is None:
        raise ValueError("requirements: no 'torch==X' pin")
    return match.group(1)


def reachable(url: str, timeout: float = PROBE_SECONDS) -> bool:
    """Whether ``url`` answers an HTTP request within ``timeout`` seconds."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True  # it answered, if only to refuse the HEAD request
    except (OSError, ValueError):
        return False


def plan(flavour: str, system: str, version: str, index_up: bool | None) -> tuple[list[str] | None, str]:
    """The pip arguments that install torch (``None``: leave it to requirements.txt), and why.

    ``index_up`` is whether the CPU index answered (``None`` when it was not asked).
    """
    if flavour != "cpu":
        return None, f"TORCH={flavour}: torch {version} comes from the default index (on Linux, the CUDA build)"
    if system != "Linux":
        return None, f"{system}: the default index's torch {version} is already a CPU build"
    if not index_up:
        return None, (f"PyTorch's CPU index ({CPU_INDEX}) did not answer within {PROBE_SECONDS:g} s; torch "
                      f"{version} comes from the default index instead (on Linux, the CUDA build: about 2.7 GB)")
    return (["install", "--quiet", "--no-deps", "--index-url", CPU_INDEX, f"torch=={version}"],
            f"torch {version}, CPU build, from {CPU_INDEX}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--torch", default="cpu", help="cpu (default): PyTorch's CPU build on Linux; "
                        "anything else: the default index's build (CUDA on Linux)")
    parser.add_argument("--requirements", type=Path, default=Path("requirements.txt"))
    parser.add_argument("--dry-run", action="store_true", help="say what would be installed, install nothing")
    args = parser.parse_args(argv)
    version = torch_pin(args.requirements.read_text())
    system = platform.system()
    index_up = reachable(CPU_INDEX + "/torch/") if args.torch == "cpu" and system == "Linux" else None
    pip_args, why = plan(args.torch, system, version, index_up)
    print(f"install_torch: {why}", flush=True)
    if pip_args is None or args.dry_run:
        return 0
    return subprocess.call([sys.executable, "-m", "pip", *pip_args])


if __name__ == "__main__":
    sys.exit(main())
