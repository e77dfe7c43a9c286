"""Chapter 27's second text: the standard-library source shipped with the package, and its mapping onto
Shakespeare's alphabet."""

import hashlib
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from attnbook.data import DataUnavailableError, load_python_source, to_alphabet
from attnbook.data import python_source as ps
from tools.notebooks import ROOT

SHAKESPEARE = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def test_the_text_is_the_named_files_in_order_and_checked_by_its_hash():
    text = load_python_source()
    assert hashlib.sha256(text.encode()).hexdigest() == ps.SHA256
    headings = [line[len("# file: "):] for line in text.splitlines() if line.startswith("# file: ")]
    assert headings == list(ps.PYTHON_SOURCE_FILES)
    assert 150_000 < len(text) < 400_000


def test_the_header_names_the_files_the_version_and_the_licence():
    raw = (Path(ps.__file__).parent / ps.FILE_NAME).read_text(encoding="utf-8")
    header = raw.split(ps.END_OF_HEADER)[0]
    assert f"CPython {ps.PYTHON_VERSION}" in header
    assert ", ".join(ps.PYTHON_SOURCE_FILES) in " ".join(header.replace("# ", "").split())
    assert "PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2" in header and "Python Software Foundation" in header


def test_each_file_is_cpython_3_11_7_s_source_unchanged():
    # against the files' hashes as CPython 3.11.7 ships them, on any Python; and against the running
    # Python's own library too when it is that release
    lib = Path(sysconfig.get_paths()["stdlib"])
    parts = load_python_source().split("# file: ")[1:]
    assert set(ps.FILE_SHA256) == set(ps.PYTHON_SOURCE_FILES)
    for name, part in zip(ps.PYTHON_SOURCE_FILES, parts, strict=True):
        assert part.startswith(f"{name}\n")
        assert hashlib.sha256(part[len(name) + 1:].encode("utf-8")).hexdigest() == ps.FILE_SHA256[name], name
        if sys.version.split()[0] == ps.PYTHON_VERSION:
            assert part == f"{name}\n" + (lib / name).read_text(encoding="utf-8")


def test_a_changed_file_is_refused(monkeypatch, tmp_path):
    package = tmp_path / "attnbook_data_copy"
    package.mkdir()
    raw = (Path(ps.__file__).parent / ps.FILE_NAME).read_text(encoding="utf-8")
    (package / ps.FILE_NAME).write_text(raw.replace("import re", "import os", 1), encoding="utf-8")

    class Files:
        def joinpath(self, name):
            return package / name

    monkeypatch.setattr(ps.resources, "files", lambda _: Files())
    with pytest.raises(DataUnavailableError, match="not the text the book was written with"):
        load_python_source()
    (package / ps.FILE_NAME).unlink()
    with pytest.raises(DataUnavailableError, match="missing from the installed attnbook.data package"):
        load_python_source()


def test_to_alphabet_keeps_known_characters_and_replaces_the_others():
    code = 'x_1 = "it\'s" + str(42)\t# é\n'
    mapped = to_alphabet(code, SHAKESPEARE)
    assert len(mapped) == len(code) and set(mapped) <= set(SHAKESPEARE)
    assert mapped == "x$3 $ 'it's' $ str$33$$$ $\n"
    # a character by character comparison with the rule, over the whole text
    text = load_python_source()
    mapped = to_alphabet(text, SHAKESPEARE)
    for c, m in zip(text, mapped, strict=True):
        expected = c if c in SHAKESPEARE else "'" if c == '"' else "3" if c in "0123456789" else "$"
        assert m == expected
    assert to_alphabet("abc", "abc$") == "abc"  # nothing to replace: the substitutes are not needed


def test_to_alphabet_refuses_replacements_outside_the_alphabet():
    with pytest.raises(ValueError, match="other must be one character of the alphabet; got '#'"):
        to_alphabet("a#", "ab", other="#")
    with pytest.raises(ValueError, match="every substitute must be one character of the alphabet"):
        to_alphabet("a1", "ab$", substitutes={"1": "7"})


def test_the_wheel_carries_the_text(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--wheel-dir", str(tmp_path / "dist"), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (wheel,) = (tmp_path / "dist").glob("attnbook-*.whl")
    with zipfile.ZipFile(wheel) as z:
        assert z.read(f"attnbook/data/{ps.FILE_NAME}") == (Path(ps.__file__).parent / ps.FILE_NAME).read_bytes()
