"""The environment a reader installs: PyTorch's CPU build on Linux unless TORCH says otherwise, a fallback
that costs seconds where PyTorch's index cannot be reached, and the README's commands present in .venv."""

import http.server
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from tools import install_torch

ROOT = Path(__file__).resolve().parents[2]


def test_the_pin_is_read_from_requirements_and_is_the_torch_installed():
    pin = install_torch.torch_pin((ROOT / "requirements.txt").read_text())
    assert pin == torch.__version__.split("+")[0]
    with pytest.raises(ValueError, match="torch==X"):
        install_torch.torch_pin("numpy==2.2.6\n")


def test_linux_with_the_index_up_takes_the_cpu_build_alone():
    args, why = install_torch.plan("cpu", "Linux", "2.13.0", index_up=True)
    assert args[-1] == "torch==2.13.0" and "--no-deps" in args
    assert args[args.index("--index-url") + 1] == install_torch.CPU_INDEX
    assert "CPU build" in why


@pytest.mark.parametrize("flavour, system, up, said", [
    ("cuda", "Linux", None, "TORCH=cuda"),
    ("cpu", "Darwin", None, "already a CPU build"),
    ("cpu", "Windows", None, "already a CPU build"),
    ("cpu", "Linux", False, "did not answer"),
])
def test_otherwise_torch_is_left_to_the_default_index_and_the_reason_said(flavour, system, up, said):
    args, why = install_torch.plan(flavour, system, "2.13.0", index_up=up)
    assert args is None and said in why


def test_an_index_that_cannot_be_reached_is_given_up_on_within_seconds():
    with __import__("socket").socket() as s:  # a loopback port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    assert not install_torch.reachable(f"http://127.0.0.1:{port}/whl/cpu/torch/", timeout=2)
    assert not install_torch.reachable("http://[::1", timeout=2)  # not even a URL
    assert time.monotonic() - start < 5


def test_an_index_that_answers_is_reachable():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert install_torch.reachable(f"http://127.0.0.1:{server.server_address[1]}/nowhere/", timeout=5)
    finally:
        server.shutdown()


@pytest.mark.parametrize("value", ["cpu", "cuda"])
def test_make_passes_TORCH_to_the_install(value):
    out = subprocess.run(["make", "-n", "-W", "requirements.txt", ".venv/.installed", f"TORCH={value}"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    install = out.index(f"tools.install_torch --torch {value}")
    assert install < out.index("--requirement requirements.txt")  # torch first, then the rest


def test_install_torch_dry_run_says_what_it_would_do():
    done = subprocess.run([sys.executable, "-m", "tools.install_torch", "--torch", "cuda", "--dry-run"], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    assert done.stdout.startswith("install_torch: TORCH=cuda")


def test_the_readme_commands_exist_in_the_environment():
    readme = (ROOT / "README.md").read_text()
    commands = set(re.findall(r"\.venv/bin/([\w.-]+)", readme))
    assert {"jupyter", "python"} <= commands
    for name in commands:
        path = Path(sys.executable).parent / name
        assert path.exists(), f"README runs .venv/bin/{name}, which the environment does not have"
    lab = subprocess.run([str(Path(sys.executable).parent / "jupyter"), "lab", "--version"], capture_output=True,
                         text=True)
    assert lab.returncode == 0 and re.match(r"\d+\.\d+", lab.stdout), lab.stderr[-500:]
