"""Masked language modelling (chapter 24): BERT's masking, the loss on chosen positions, the tokenizer with
a mask token, the evaluation set, the baselines and the training entry point."""

import math
from collections import Counter

import pytest
import torch
import torch.nn.functional as F

from attnbook.data import CharTokenizer, MaskedCharTokenizer
from attnbook.torch.transformer import GPT, GPTConfig
from attnbook.training.mlm import (
    MaskedEvalSet,
    baseline_guesses,
    gpt_logits,
    make_eval_set,
    mask_tokens,
    masked_lm_loss,
    preset,
    score,
    train_mlm,
)


def within_binomial(count: int, n: int, p: float, sigmas: float = 5.0) -> bool:
    """``count`` successes of ``n`` trials lies within ``sigmas`` standard deviations of ``n p``."""
    return abs(count - n * p) <= sigmas * math.sqrt(n * p * (1 - p))


V, MASK = 11, 10  # ten token ids and the mask, last


def corpus(shape=(200, 500), seed=0, vocab=V - 1):
    return torch.randint(vocab, shape, generator=torch.Generator().manual_seed(seed))


def test_proportions_follow_bert():
    ids = corpus()
    inputs, chosen = mask_tokens(ids, MASK, V, generator=torch.Generator().manual_seed(1))
    n, k = ids.numel(), int(chosen.sum())
    assert within_binomial(k, n, 0.15)
    assert torch.equal(inputs[~chosen], ids[~chosen])  # positions not chosen are never touched
    masked = int((inputs[chosen] == MASK).sum())
    # A random replacement equals the original with probability 1 / (V - 1): it then looks kept.
    same = int((inputs[chosen] == ids[chosen]).sum())
    changed = k - masked - same
    assert within_binomial(masked, k, 0.8)
    assert within_binomial(changed, k, 0.1 * (1 - 1 / (V - 1)))
    assert within_binomial(same, k, 0.1 + 0.1 / (V - 1))


@pytest.mark.parametrize("mask_id", [0, 4, 10])
def test_random_replacements_are_uniform_and_never_the_mask(mask_id):
    others = torch.tensor([i for i in range(V) if i != mask_id])
    ids = others[corpus(seed=2)]  # text ids never include the mask id
    inputs, chosen = mask_tokens(ids, mask_id, V, rate=1.0, mask_prob=0.0, random_prob=1.0,
                                 generator=torch.Generator().manual_seed(3))
    assert bool(chosen.all())
    assert not bool((inputs == mask_id).any())
    counts = torch.bincount(inputs.flatten(), minlength=V)
    assert counts[mask_id] == 0
    assert all(within_binomial(int(counts[i]), ids.numel(), 1 / (V - 1)) for i in others)


def test_only_mask_when_asked_and_rate_one_chooses_all():
    ids = corpus((20, 30))
    inputs, chosen = mask_tokens(ids, MASK, V, rate=1.0, mask_prob=1.0, random_prob=0.0)
    assert bool(chosen.all()) and bool((inputs == MASK).all())
    inputs, chosen = mask_tokens(ids, MASK, V, rate=1.0, mask_prob=0.0, random_prob=0.0)
    assert torch.equal(inputs, ids)


def test_masking_is_deterministic_with_a_seed():
    ids = corpus((8, 64))
    a = mask_tokens(ids, MASK, V, generator=torch.Generator().manual_seed(7))
    b = mask_tokens(ids, MASK, V, generator=torch.Generator().manual_seed(7))
    c = mask_tokens(ids, MASK, V, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])
    assert torch.equal(ids, corpus((8, 64)))  # the input is not changed in place


@pytest.mark.parametrize("kwargs, message", [
    ({"rate": 0.0}, "rate must lie in"),
    ({"rate": 1.5}, "rate must lie in"),
    ({"mask_prob": -0.1}, "mask_prob must lie in"),
    ({"random_prob": 1.1}, "random_prob must lie in"),
    ({"mask_prob": 0.8, "random_prob": 0.3}, "mask_prob \\+ random_prob"),
    ({"mask_id": 11}, "mask_id must lie in"),
    ({"vocab_size": 5, "mask_id": 4}, "ids must lie in"),
])
def test_bad_settings_raise(kwargs, message):
    args = {"mask_id": MASK, "vocab_size": V} | kwargs
    with pytest.raises(ValueError, match=message):
        mask_tokens(corpus((2, 5)), **args)


def test_bad_ids_raise():
    with pytest.raises(ValueError, match="integer token ids"):
        mask_tokens(torch.zeros(2, 3), MASK, V)
    with pytest.raises(ValueError, match="already contain the mask id"):
        mask_tokens(torch.tensor([[1, MASK]]), MASK, V)


def test_loss_is_cross_entropy_over_the_chosen_positions_only():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 9, V, generator=g, requires_grad=True)
    targets = corpus((4, 9), seed=4)
    chosen = torch.rand(4, 9, generator=g) < 0.3
    rows, cols = chosen.nonzero(as_tuple=True)
    direct = F.cross_entropy(logits[rows, cols], targets[rows, cols])
    loss = masked_lm_loss(logits, targets, chosen)
    torch.testing.assert_close(loss, direct, rtol=0, atol=0)
    by_ignore = F.cross_entropy(logits.flatten(0, 1), targets.masked_fill(~chosen, -100).flatten(), ignore_index=-100)
    torch.testing.assert_close(loss, by_ignore, rtol=1e-6, atol=1e-6)  # the other common spelling

    changed = logits.detach().clone()
    changed[~chosen] = torch.randn(int((~chosen).sum()), V, generator=g) * 10
    assert torch.equal(masked_lm_loss(changed, targets, chosen), loss.detach())
    changed[rows[0], cols[0]] += torch.randn(V, generator=g)
    assert not torch.equal(masked_lm_loss(changed, targets, chosen), loss.detach())

    loss.backward()
    assert bool((logits.grad[~chosen] == 0).all()) and bool((logits.grad[chosen] != 0).any())


def test_loss_rejects_bad_shapes_and_masks():
    logits, targets = torch.randn(2, 5, V), corpus((2, 5))
    chosen = torch.ones(2, 5, dtype=torch.bool)
    with pytest.raises(ValueError, match="logits must have shape"):
        masked_lm_loss(logits[:, :4], targets, chosen)
    with pytest.raises(ValueError, match="chosen must have the shape"):
        masked_lm_loss(logits, targets, chosen[:, :4])
    with pytest.raises(ValueError, match="boolean"):
        masked_lm_loss(logits, targets, chosen.long())
    with pytest.raises(ValueError, match="no position is chosen"):
        masked_lm_loss(logits, targets, ~chosen)


def test_tokenizer_adds_one_id_and_changes_no_other():
    text = "To be, or not to be: that is the question."
    plain, masked = CharTokenizer.from_text(text), MaskedCharTokenizer.from_text(text)
    assert masked.vocab_size == plain.vocab_size + 1 and masked.mask_id == plain.vocab_size
    assert torch.equal(masked.encode(text), plain.encode(text))
    blanked = "To b_, or _ot"
    ids = masked.encode(blanked)
    assert ids[4] == masked.mask_id and ids[10] == masked.mask_id
    assert masked.decode(ids) == blanked
    with pytest.raises(ValueError, match="is one of the characters"):
        MaskedCharTokenizer.from_text(text, mask_symbol="e")
    with pytest.raises(ValueError, match="not in the tokenizer's alphabet"):
        masked.encode("Zebra")
    with pytest.raises(ValueError, match="ids must lie in"):
        masked.decode([masked.vocab_size])


def test_eval_set_hides_every_chosen_position_and_never_the_first():
    ids = corpus((1, 10 * 32), seed=5)[0]
    es = make_eval_set(ids, 32, MASK, rate=0.3, seed=1)
    assert es.windows.shape == (10, 32) and torch.equal(es.windows.flatten(), ids)
    assert not bool(es.chosen[:, 0].any()) and bool(es.chosen.any())
    assert bool((es.inputs[es.chosen] == MASK).all()) and torch.equal(es.inputs[~es.chosen], es.windows[~es.chosen])
    assert torch.equal(make_eval_set(ids, 32, MASK, rate=0.3, seed=1).chosen, es.chosen)
    with pytest.raises(ValueError, match="n_windows must lie in"):
        make_eval_set(ids, 32, MASK, n_windows=11)


def test_gpt_logits_row_t_sees_only_the_prefix():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=V - 1, block_size=8, n_layers=1, n_heads=2, d_model=16)).eval()
    windows = corpus((3, 8), seed=6)
    aligned = gpt_logits(model, windows, batch_size=2)
    assert aligned.shape == (3, 8, V - 1) and bool(aligned[:, 0].isnan().all())
    with torch.no_grad():
        for t in range(1, 8):
            torch.testing.assert_close(aligned[:, t], model(windows[:, :t])[:, -1])


def test_score_matches_a_direct_computation():
    es = make_eval_set(corpus((1, 6 * 16), seed=7)[0], 16, MASK, rate=0.4)
    logits = torch.randn(6, 16, V, generator=torch.Generator().manual_seed(8))
    got = score(logits, es)
    rows, cols = es.chosen.nonzero(as_tuple=True)
    assert got["loss"] == pytest.approx(F.cross_entropy(logits[rows, cols], es.windows[rows, cols]).item(), rel=1e-6)
    assert got["accuracy"] == pytest.approx((logits[rows, cols].argmax(-1) == es.windows[rows, cols]).double().mean())


def test_baselines_agree_with_counting_by_hand():
    text_ids = corpus((1, 3000), seed=9, vocab=5)[0]
    train, val = text_ids[:2500], text_ids[2500:]
    es = make_eval_set(val, 20, 5, rate=0.3, seed=2)
    guesses = baseline_guesses(train, es, 5)
    t = train.tolist()
    uni, bi, tri = Counter(t), Counter(zip(t, t[1:], strict=False)), Counter(zip(t, t[1:], t[2:], strict=False))

    def best(score_of):  # the id with the largest count; ties to the smaller id
        return max(range(5), key=lambda c: (score_of(c), -c))

    expected = {"most frequent": [], "left neighbour": [], "both neighbours": []}
    for r, c in es.chosen.nonzero().tolist():
        w = es.windows[r].tolist()
        expected["most frequent"].append(best(lambda x: uni[x]))
        left = best(lambda x, w=w, c=c: bi[(w[c - 1], x)])
        expected["left neighbour"].append(left)
        if c + 1 < len(w) and any(tri[(w[c - 1], x, w[c + 1])] for x in range(5)):
            expected["both neighbours"].append(best(lambda x, w=w, c=c: tri[(w[c - 1], x, w[c + 1])]))
        else:
            expected["both neighbours"].append(left)
    for name, values in expected.items():
        assert guesses[name].tolist() == values, name


def test_training_runs_repeats_exactly_and_pairs_with_the_gpt():
    tiny_text = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n" * 40
    config = preset("tiny", progress=False, steps=12, eval_every=6)
    a, b = train_mlm(config, tiny_text), train_mlm(config, tiny_text)
    assert [e["step"] for e in a.log] == list(range(1, 13)) and "val_accuracy" in a.log[5]
    assert a.log == b.log
    assert all(torch.equal(p, q) for p, q in zip(a.model.state_dict().values(), b.model.state_dict().values(),
                                                 strict=True))
    assert a.model.unembed.W_u.shape == (config.d_model, a.tokenizer.vocab_size)  # the mask id has a logit too
    gpt = config.gpt_config()
    assert (gpt.n_layers, gpt.d_model, gpt.block_size, gpt.steps, gpt.batch_size, gpt.seed) == (
        config.n_layers, config.d_model, config.block_size, config.steps, config.batch_size, config.seed)
    assert isinstance(a.eval_set, MaskedEvalSet)
