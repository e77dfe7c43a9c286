"""Byte-level BPE (chapter 23): round trips, a naive trainer and encoder as oracles, Hugging Face
``tokenizers`` trained on the same corpus, and bits per character of a GPT on BPE tokens.

A made-up corpus stands in for Tiny Shakespeare so that no test needs the data file.
"""

import json
import math
import random
import re

import pytest
import torch
import torch.nn.functional as F
from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

from attnbook.data import BPETokenizer, CharTokenizer
from attnbook.data.bpe import (
    GPT2_SPLIT_PATTERN,
    SPLIT_PATTERN,
    chunk_counts,
    gpt2_byte_to_unicode,
    learn_merges,
    merge_pair,
    pair_counts,
)
from attnbook.torch import GPT
from attnbook.training.lm import bits_per_character, load_gpt, preset, split_text_ids, train_gpt

_rng = random.Random(0)
_WORDS = ("the king queen crown sword night day love death speak hear my lord good sir thee thou art "
          "hath doth o'er ne'er i'll we're they've it's 1599 42 --").split()
_WEIGHTS = [1 / (r + 1) for r in range(len(_WORDS))]  # Zipf-like: a few words common, most rare


def _line() -> str:
    words = _rng.choices(_WORDS, _WEIGHTS, k=_rng.randint(3, 9))
    if _rng.random() < 0.3:
        words[0] = words[0].upper() + ":"
    return " ".join(words) + _rng.choice([".", ",", "!", "?", ";", ""])


TEXT = "\n".join(_line() for _ in range(1500)) + "\n\n  indented   line\ttab\n"
UNICODE = "Héllo wörld! Привет, мир 123 __init__ 東京 can't I'M  \t\n\n  done 🙂👍🏽 ½ naïve café"


# --- oracles: a trainer that recounts every pair at every step, and an encoder that applies merges in order


def naive_merges(text: str, n_merges: int) -> list[tuple[int, int]]:
    chunks = [list(c.encode("utf-8")) for c in re.findall(SPLIT_PATTERN, text)]  # every occurrence, no table
    vocab = [bytes([b]) for b in range(256)]
    merges = []
    for _ in range(n_merges):
        counts = {}
        for ids in chunks:
            for pair in zip(ids, ids[1:], strict=False):
                counts[pair] = counts.get(pair, 0) + 1
        if not counts:
            break
        top = max(counts.values())
        best = min(p for p, c in counts.items() if c == top)  # the documented tie-break
        merged = vocab[best[0]] + vocab[best[1]]
        new_id = vocab.index(merged) if merged in vocab else len(vocab)
        if new_id == len(vocab):
            vocab.append(merged)
        merges.append(best)
        chunks = [merge_pair(ids, best, new_id) for ids in chunks]
    return merges


def naive_encode(tok: BPETokenizer, text: str) -> list[int]:
    out = []
    for chunk in re.findall(tok.pattern, text):
        ids = list(chunk.encode("utf-8", "surrogatepass"))
        for pair in tok.merges:  # every merge in rank order, over the whole chunk
            ids = merge_pair(ids, pair, tok.ranks[pair][1])
        out += ids
    return out


@pytest.fixture(scope="module")
def tok() -> BPETokenizer:
    return BPETokenizer.from_text(TEXT, n_merges=150)


# --- the two steps


def test_pair_counts_counts_every_position_overlaps_included():
    ids = [1, 1, 1, 2, 1, 1]
    want = {}
    for i in range(len(ids) - 1):
        want[(ids[i], ids[i + 1])] = want.get((ids[i], ids[i + 1]), 0) + 1
    assert pair_counts(ids) == want
    assert pair_counts(ids, {(1, 1): 10}, weight=2) == {k: v * 2 + (10 if k == (1, 1) else 0) for k, v in want.items()}


def test_merge_pair_goes_left_to_right_without_overlaps():
    s = "aaabaa"
    ids = list(s.encode())
    got = merge_pair(ids, (97, 97), 256)
    want = [256 if p == "aa" else ord(p) for p in re.findall("aa|.", s)]  # the regex engine scans the same way
    assert got == want


# --- training


@pytest.mark.parametrize("text", [TEXT[:4000], UNICODE * 3])
def test_merges_equal_the_naive_trainer(text):
    assert learn_merges(chunk_counts(text), n_merges=120) == naive_merges(text, 120)


def test_vocab_size_and_n_merges_stop_training(tok):
    assert len(tok.merges) == 150 and tok.vocab_size == 256 + len({tok.vocab[i] for i in range(256, tok.vocab_size)})
    by_size = BPETokenizer.from_text(TEXT, vocab_size=300)
    assert by_size.vocab_size == 300 and by_size.merges == tok.merges[:len(by_size.merges)]
    few_pairs = BPETokenizer.from_text("abab", n_merges=50)  # runs out of pairs
    assert few_pairs.merges == naive_merges("abab", 50)
    assert BPETokenizer.from_text(TEXT, vocab_size=256).merges == []


def test_every_token_is_the_bytes_of_its_two_parts(tok):
    for pair, (rank, new_id) in tok.ranks.items():
        assert tok.merges[rank] == pair and tok.vocab[new_id] == tok.vocab[pair[0]] + tok.vocab[pair[1]]
    assert BPETokenizer(tok.merges).vocab == tok.vocab


# --- encoding and decoding


def test_encoding_equals_applying_merges_in_order(tok):
    for text in (TEXT[-3000:], UNICODE, "the kingthe queen's sword, 15990042"):
        assert tok.encode_list(text) == naive_encode(tok, text)


def test_round_trip_on_random_bytes_and_unicode(tok):
    g = random.Random(1)
    texts = [UNICODE, "", " ", "\n\n\n", TEXT[:500]]
    texts.append(bytes(g.randrange(256) for _ in range(2000)).decode("latin-1"))  # every byte value
    texts.append("".join(chr(g.randrange(0x110000)) for _ in range(2000)))  # any code point, surrogates too
    texts.append(bytes(g.randrange(256) for _ in range(500)).decode("utf-8", "surrogateescape"))
    for text in texts:
        ids = tok.encode(text)
        assert ids.dtype == torch.long and tok.decode(ids) == text and tok.decode(ids.tolist()) == text
    assert tok.encode("unknown: ⁂").tolist()[-3:] == list("⁂".encode())  # unseen characters fall back to bytes


def test_encoding_shortens_the_training_text(tok):
    assert len(tok.encode(TEXT)) < len(TEXT.encode()) / 2


def test_decode_of_a_cut_character_shows_a_replacement(tok):
    ids = list("é".encode())  # two bytes, each a token of its own
    assert tok.decode(ids[:1]) == "\ufffd"


def test_char_counts_count_characters_not_bytes(tok):
    for text in (UNICODE, TEXT[:300]):
        assert int(tok.char_counts()[tok.encode(text)].sum()) == len(text)


# --- bad input


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"vocab_size": 255}, "at least 256"),
    ({"vocab_size": 300.0}, "vocab_size must be an int"),
    ({"n_merges": -1}, "n_merges must be an int"),
    ({}, "exactly one of"),
    ({"vocab_size": 300, "n_merges": 3}, "exactly one of"),
])
def test_bad_training_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BPETokenizer.from_text("some text", **kwargs)


def test_non_str_input_and_bad_ids(tok):
    for bad in (b"bytes", 12, None, ["a"]):
        with pytest.raises(ValueError, match="text must be a str"):
            BPETokenizer.from_text(bad, vocab_size=300)
        with pytest.raises(ValueError, match="text must be a str"):
            tok.encode(bad)
    with pytest.raises(ValueError, match=r"ids must be ints in \[0, "):
        tok.decode([0, tok.vocab_size])
    with pytest.raises(ValueError, match="does not exist yet"):
        BPETokenizer([(0, 256)])
    with pytest.raises(ValueError, match="repeats an earlier merge"):
        BPETokenizer([(1, 2), (1, 2)])


# --- Hugging Face tokenizers on the same corpus


def _hf_merges(tk: Tokenizer, to_byte: dict[str, int]) -> list[tuple[bytes, bytes]]:
    merges = json.loads(tk.to_str())["model"]["merges"]
    merges = [m.split(" ") if isinstance(m, str) else m for m in merges]
    return [tuple(bytes(to_byte[c] for c in part) for part in m) for m in merges]


def _ours(tok: BPETokenizer) -> list[tuple[bytes, bytes]]:
    return [(tok.vocab[a], tok.vocab[b]) for a, b in tok.merges]


def test_same_merges_and_ids_as_tokenizers_with_the_same_split():
    # On ASCII text with the split as a Split pre-tokenizer, tokenizers' initial ids are the characters in
    # code-point order, i.e. byte order, so its tie-break (smallest pair of ids) is ours: same merges.
    n = 150
    ours = BPETokenizer.from_text(TEXT, n_merges=n)
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.Split(Regex(GPT2_SPLIT_PATTERN), behavior="isolated")
    alphabet = sorted(set(TEXT))
    tk.train_from_iterator([TEXT], trainers.BpeTrainer(vocab_size=len(alphabet) + n, show_progress=False))
    assert _hf_merges(tk, {chr(b): b for b in range(128)}) == _ours(ours)
    check = "\n".join(_line() for _ in range(200))  # text the tokenizers were not trained on
    theirs = [tk.id_to_token(i).encode() for i in tk.encode(check).ids]
    assert theirs == ours.pieces(check)


def test_same_merge_set_and_token_count_as_tokenizers_byte_level():
    # With GPT-2's ByteLevel pre-tokenizer, tokenizers' initial ids follow the printable stand-ins (the
    # space becomes "Ġ", U+0120, after every letter), so ties are broken in another order: the set of
    # merges and the encodings agree here, the order of tied merges need not.
    n = 150
    ours = BPETokenizer.from_text(TEXT, n_merges=n)
    to_byte = {c: b for b, c in gpt2_byte_to_unicode().items()}
    assert set(to_byte) == set(pre_tokenizers.ByteLevel.alphabet())
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.train_from_iterator([TEXT], trainers.BpeTrainer(vocab_size=256 + n, show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    theirs = _hf_merges(tk, to_byte)
    assert len(theirs) == n and set(theirs) == set(_ours(ours))
    check = "\n".join(_line() for _ in range(200))
    pieces = [bytes(to_byte[c] for c in tk.id_to_token(i)) for i in tk.encode(check).ids]
    assert pieces == ours.pieces(check)


def test_split_matches_gpt2_byte_level_pre_tokenizer():
    table = gpt2_byte_to_unicode()
    for text in (TEXT, UNICODE):
        theirs = [s for s, _ in pre_tokenizers.ByteLevel(add_prefix_space=False).pre_tokenize_str(text)]
        ours = ["".join(table[b] for b in c.encode()) for c in re.findall(SPLIT_PATTERN, text)]
        assert ours == theirs


# --- bits per character of a language model on BPE tokens


def test_bits_per_character_is_total_nats_over_characters(tok):
    torch.manual_seed(0)
    text = TEXT[:3000]
    for tokenizer in (tok, CharTokenizer.from_text(TEXT)):
        ids = tokenizer.encode(text)
        model = GPT(preset("tiny").model_config(tokenizer.vocab_size)).eval()
        T = model.config.block_size
        nats = 0.0
        with torch.no_grad():
            for s in range(0, len(ids) - 1, T):  # one window at a time, the last one shorter
                window = ids[s:s + T + 1]
                nats += F.cross_entropy(model(window[None, :-1])[0], window[1:], reduction="sum").item()
        first = len(tokenizer.decode(ids[:1]))  # the first token is never predicted
        want = nats / (len(text) - first) / math.log(2)
        assert bits_per_character(model, ids, tokenizer, batch_size=7) == pytest.approx(want, rel=1e-6)


def test_train_gpt_on_bpe_tokens_and_resume_from_its_checkpoint(tok, tmp_path):
    config = preset("tiny", steps=30, progress=False, out_dir=str(tmp_path))
    run = train_gpt(config, text=TEXT, tokenizer=tok)
    assert run.model.config.vocab_size == tok.vocab_size and run.val_loss < math.log(tok.vocab_size)
    train_ids, val_ids = split_text_ids(TEXT, tok)
    n = int(0.9 * len(TEXT))
    assert tok.decode(train_ids) == TEXT[:n] and tok.decode(val_ids) == TEXT[n:]
    model, loaded = load_gpt(tmp_path / "ckpt.pt")
    assert isinstance(loaded, BPETokenizer) and loaded.merges == tok.merges
    with pytest.raises(ValueError, match="another tokenizer"):
        train_gpt(config, text=TEXT, tokenizer=BPETokenizer.from_text(TEXT, n_merges=10), resume=True)


def test_split_text_ids_equals_split_for_characters():
    from attnbook.data import split

    chars = CharTokenizer.from_text(TEXT)
    for a, b in zip(split_text_ids(TEXT, chars), split(chars.encode(TEXT)), strict=True):
        assert torch.equal(a, b)
