"""Tiny Shakespeare's loader and the character tokenizer. No test touches the network: downloads
are exercised with file:// addresses."""

import hashlib

import pytest
import torch

from attnbook.data import shakespeare
from attnbook.data.shakespeare import DataUnavailableError, tinyshakespeare_path
from attnbook.data.text import CharTokenizer, random_windows, sequential_windows, split

TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n"


@pytest.fixture
def places(tmp_path, monkeypatch):
    """An empty data folder and an empty cache, and a source file to 'download' from."""
    data, cache, source = tmp_path / "data", tmp_path / "cache", tmp_path / "source.txt"
    source.write_text(TEXT, encoding="utf-8")
    monkeypatch.setenv("ATTNBOOK_DATA_DIR", str(data))
    monkeypatch.setenv("ATTNBOOK_CACHE_DIR", str(cache))
    sha = hashlib.sha256(TEXT.encode()).hexdigest()
    return data, cache, source, sha


def test_data_dir_is_looked_in_first(places):
    data, cache, source, sha = places
    (data / "tinyshakespeare").mkdir(parents=True)
    (data / "tinyshakespeare" / "input.txt").write_text(TEXT, encoding="utf-8")
    assert tinyshakespeare_path(download=False, sha256=sha) == data / "tinyshakespeare" / "input.txt"
    assert not cache.exists()


def test_a_file_with_the_wrong_checksum_is_refused(places):
    data, cache, source, sha = places
    (data / "tinyshakespeare").mkdir(parents=True)
    (data / "tinyshakespeare" / "input.txt").write_text(TEXT + "extra", encoding="utf-8")
    with pytest.raises(DataUnavailableError, match="SHA-256"):
        tinyshakespeare_path(download=False, sha256=sha)


def test_download_is_checked_and_cached(places):
    data, cache, source, sha = places
    path = tinyshakespeare_path(url=source.as_uri(), sha256=sha)
    assert path == cache / "tinyshakespeare" / "input.txt"
    assert path.read_text(encoding="utf-8") == TEXT
    assert sorted(p.name for p in path.parent.iterdir()) == ["input.txt"]  # no partial file left behind
    source.unlink()  # the second call uses the cache
    assert tinyshakespeare_path(url=source.as_uri(), sha256=sha) == path


def test_a_corrupt_download_leaves_nothing_in_the_cache(places):
    data, cache, source, sha = places
    with pytest.raises(DataUnavailableError, match="SHA-256"):
        tinyshakespeare_path(url=source.as_uri(), sha256="0" * 64)
    assert list((cache / "tinyshakespeare").iterdir()) == []


def test_offline_without_the_file_says_where_to_put_it(places):
    data, cache, source, sha = places
    with pytest.raises(DataUnavailableError) as e:
        tinyshakespeare_path(url=(source.parent / "missing.txt").as_uri(), sha256=sha)
    message = str(e.value)
    assert "could not be downloaded" in message and str(cache / "tinyshakespeare" / "input.txt") in message
    assert "ATTNBOOK_DATA_DIR" in message
    with pytest.raises(DataUnavailableError, match="downloading is off"):
        tinyshakespeare_path(download=False, sha256=sha)


def test_the_checksum_is_the_published_files():
    """The constant against the file itself (ATTNBOOK_DATA_DIR, as in CI), not against a copy of the constant."""
    assert shakespeare.sha256_of(shakespeare.tinyshakespeare_path(download=False)) == shakespeare.SHA256


def test_tokenizer_round_trip_and_alphabet():
    tok = CharTokenizer.from_text(TEXT)
    assert tok.chars == "".join(sorted(set(TEXT)))
    ids = tok.encode(TEXT)
    assert ids.dtype == torch.long and ids.shape == (len(TEXT),)
    assert tok.decode(ids) == TEXT
    assert [tok.chars[i] for i in ids[:5]] == list(TEXT[:5])


def test_tokenizer_names_unknown_characters():
    tok = CharTokenizer.from_text(TEXT)
    with pytest.raises(ValueError, match=r"'QZ'"):
        tok.encode("Zounds, Quick")
    with pytest.raises(ValueError, match=r"\[0, "):
        tok.decode([0, tok.vocab_size])
    with pytest.raises(ValueError, match="repeat"):
        CharTokenizer("aab")


def test_split_is_ninety_ten_and_in_order():
    ids = torch.arange(1000)
    train, val = split(ids)
    assert len(train) == 900 and len(val) == 100
    assert torch.equal(torch.cat([train, val]), ids)
    with pytest.raises(ValueError, match="strictly between"):
        split(ids, 1.0)


def test_windows_targets_are_inputs_shifted_by_one():
    data = torch.arange(500)
    x, y = random_windows(data, 16, 8, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (8, 16)
    assert torch.equal(y[:, :-1], x[:, 1:]) and torch.equal(y[:, -1], x[:, -1] + 1)
    batches = list(sequential_windows(data, 16, 8))
    xs = torch.cat([b[0] for b in batches])
    assert xs.shape == ((500 - 1) // 16, 16)
    assert torch.equal(xs.flatten(), data[: xs.numel()])  # non-overlapping, in order, covering the split
    assert len(list(sequential_windows(data, 16, 8, max_batches=2))) == 2
    with pytest.raises(ValueError, match="block_size \\+ 1 = 17"):
        random_windows(torch.arange(10), 16, 2)

