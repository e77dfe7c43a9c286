"""Answers of chapters 15 to 28 that a checker used to accept although they are wrong, delegate the work or
break a rule the statement sets: each is now refused with a sentence naming the reason, and a right answer
still passes."""

from __future__ import annotations

import numpy as np
import torch
from test_exercises_ch15 import ANSWER, load

from attnbook.exercises import check_gpt_forward, check_normalised_entropy
from attnbook.exercises._harness import Outcome


def _wrong(verdict, *words, outcome=None):
    assert not verdict, verdict.message
    assert verdict.attempted, verdict.message
    if outcome is not None:
        assert verdict.outcome is outcome, verdict.message
    for word in words:
        assert word in verdict.message, verdict.message


# --- chapter 15 -------------------------------------------------------------------------------------------

def test_blocks_loaded_in_string_order_are_named_as_such():
    assert check_gpt_forward(ANSWER)

    def string_order(model, hf):
        n = len(model.blocks)
        order = sorted(range(n), key=str)  # "10" before "2": block i gets another block's weights
        renamed = {}
        for key, value in hf.items():
            if key.startswith("transformer.h."):
                i, rest = key.removeprefix("transformer.h.").split(".", 1)
                key = f"transformer.h.{order.index(int(i))}.{rest}"
            renamed[key] = value
        load(model, renamed)

    _wrong(check_gpt_forward({**ANSWER, "load_gpt2": string_order}), "block 2", "h.10",
           "loaded in the wrong order")


def _count(V, block_size, d, n_layers, d_ff, tied, norms_per_block=2):
    block = 4 * (d * d + d) + (d * d_ff + d_ff) + (d_ff * d + d) + norms_per_block * 2 * d
    return n_layers * block + V * d + block_size * d + 2 * d + (0 if tied else d * V)


def test_a_count_that_builds_modules_is_refused():
    from torch import nn

    from attnbook.exercises import check_gpt_parameters

    def by_modules(V, block_size, d, n_layers, d_ff, tied):
        layers = [nn.Linear(d, d) for _ in range(4)] + [nn.Linear(d, d_ff), nn.Linear(d_ff, d)]
        layers += [nn.LayerNorm(d), nn.LayerNorm(d)]
        block = sum(p.numel() for m in layers for p in m.parameters())
        return n_layers * block + V * d + block_size * d + 2 * d + (0 if tied else d * V)

    assert check_gpt_parameters(_count)
    verdict = check_gpt_parameters(by_modules)
    assert not verdict and verdict.outcome is Outcome.REFUSED, verdict.message
    assert "Module.__init__" in verdict.message and "without building a model" in verdict.message


def test_a_count_with_one_norm_per_block_gets_its_hint():
    from attnbook.exercises import check_gpt_parameters

    verdict = check_gpt_parameters(lambda *args: _count(*args, norms_per_block=1))
    _wrong(verdict, "each block has two layer norms", outcome=Outcome.WRONG_VALUE)


# --- chapter 18 -------------------------------------------------------------------------------------------

def _entropies(w):
    return -(w * w.clamp_min(1e-300).log()).sum(-1)


def test_a_ceiling_from_the_keys_given_weight_is_refused():
    def right(w):
        T = w.shape[-1]
        return (_entropies(w)[..., 1:] / torch.arange(2, T + 1, dtype=w.dtype).log()).mean(-1)

    def nonzero(w):
        return torch.nan_to_num(_entropies(w)[..., 1:] / (w > 0).sum(-1).double().log()[..., 1:]).mean(-1)

    assert check_normalised_entropy(right)
    _wrong(check_normalised_entropy(nonzero), "exactly 0", "ln(t + 1)", outcome=Outcome.WRONG_VALUE)


# --- chapter 25 -------------------------------------------------------------------------------------------

def test_the_polar_iteration_through_a_pseudo_inverse_is_refused_as_an_svd():
    from attnbook.exercises import check_polar_from_gram

    def newton_polar(G):  # X <- (X + X^-T) / 2 converges to U V^T, with pinv's SVD inside
        X = G / torch.linalg.matrix_norm(G)
        for _ in range(60):
            X = (X + torch.linalg.pinv(X).mT) / 2
        return X

    def by_eigh(G):
        wide = G.shape[0] < G.shape[1]
        M = G.T if wide else G
        w, V = torch.linalg.eigh(M.T @ M)
        P = M @ V @ torch.diag(w**-0.5) @ V.T
        return P.T if wide else P

    assert check_polar_from_gram(by_eigh)
    verdict = check_polar_from_gram(newton_polar)
    assert not verdict and verdict.outcome is Outcome.REFUSED, verdict.message
    assert "pinv" in verdict.message and "singular value decomposition" in verdict.message, verdict.message


def test_the_cost_answer_is_watched_and_its_messages_give_no_direction():
    import attnbook.exercises.ch25 as ch25
    from attnbook.exercises.ch25 import check_muon_cost

    ns, training, batch = 3.0e9, 2.0e10, 12
    windows, width = ch25._smallest_windows(ns, training, batch), ch25._smallest_width(batch)
    assert check_muon_cost(lambda: (windows, width), ns, training, batch)
    verdict = check_muon_cost(lambda: (ch25._smallest_windows(ns, training, batch), ch25._smallest_width(batch)),
                              ns, training, batch)
    assert not verdict and verdict.outcome is Outcome.REFUSED and "_smallest_windows" in verdict.message
    verdict = check_muon_cost(lambda: (check_muon_cost(lambda: (1, 8), ns, training, batch) and 1, 8),
                              ns, training, batch)
    assert not verdict and verdict.outcome is Outcome.REFUSED and "check_muon_cost" in verdict.message
    # a wrong batch is told its side, never the share it gives, from which the answer follows in one step
    verdict = check_muon_cost(lambda: (1, width), ns, training, batch)
    assert not verdict and "more than 10%" in verdict.message and "%)" not in verdict.message, verdict.message
    assert not any(ch.isdigit() for ch in verdict.message.split("adds")[1].split("%")[0].replace("10", ""))


# --- chapter 28 -------------------------------------------------------------------------------------------

def test_a_table_sized_by_chapter_17s_vocabulary_is_refused():
    from attnbook.exercises import check_induction_targets_by_hand

    def by_table(ids):
        latest = torch.full((65,), -1)  # chapter 17's 65 characters
        targets = []
        for t, token in enumerate(ids.tolist()):
            targets.append(int(latest[token]))
            latest[token] = t + 1
        return torch.tensor(targets)

    def by_dict(ids):
        latest, targets = {}, []
        for t, token in enumerate(ids.tolist()):
            targets.append(latest.get(token, -1))
            latest[token] = t + 1
        return torch.tensor(targets)

    assert check_induction_targets_by_hand(by_dict)
    verdict = check_induction_targets_by_hand(by_table)
    assert not verdict and verdict.outcome is Outcome.ERROR, verdict.message
    assert "50,000" in verdict.message and "beyond the chapter's vocabulary" in verdict.message, verdict.message


# --- chapter 17 -------------------------------------------------------------------------------------------

def test_one_key_too_many_per_cached_step_is_named():
    from attnbook.exercises import check_attention_scores

    def scores(p, n, use_cache, extra=0):
        if not use_cache:
            return sum((p + s) * (p + s + 1) // 2 for s in range(n))
        return p * (p + 1) // 2 + sum(p + s + extra for s in range(1, n))

    assert check_attention_scores(scores)
    verdict = check_attention_scores(lambda p, n, c: scores(p, n, c, extra=1))  # p + s + 1 keys
    _wrong(verdict, "not p + s + 1", outcome=Outcome.WRONG_VALUE)
    assert "L squared" not in verdict.message


def test_adding_one_to_the_bigram_denominators_is_named():
    from attnbook.exercises import check_bigram_loss

    def bigram(train, val, V, below=None):
        counts = torch.zeros(V, V, dtype=torch.float64)
        for a, b in zip(train[:-1].tolist(), train[1:].tolist(), strict=True):
            counts[a, b] += 1
        p = (counts + 1) / (counts.sum(1, keepdim=True) + (V if below is None else below))
        return float(-p.log()[val[:-1], val[1:]].mean())

    assert check_bigram_loss(bigram)
    _wrong(check_bigram_loss(lambda t, v, V: bigram(t, v, V, below=1)), "grows by V, not by 1",
           outcome=Outcome.WRONG_VALUE)


def test_the_training_capstone_requires_its_parts_and_names_clipping_at_zero():
    from test_exercises_ch17 import PARTS, loop

    from attnbook.exercises import check_train_loop_by_hand

    _wrong(check_train_loop_by_hand(loop), "the dict of your parts", "go unchecked", outcome=Outcome.WRONG_FORM)
    _wrong(check_train_loop_by_hand(PARTS), "has no 'GPT'", outcome=Outcome.WRONG_FORM)
    _wrong(check_train_loop_by_hand({"train_loop_by_hand": loop, "GPT": object}),
           "has no 'lr_with_floor' or 'draw_batch'", outcome=Outcome.WRONG_FORM)

    def clipped_at_zero(*args):
        return loop(*args, update=_update_clipping_always)

    _wrong(check_train_loop_by_hand({**PARTS, "train_loop_by_hand": clipped_at_zero, "GPT": object}),
           "grad_clip = 0 means no clipping")


def _update_clipping_always(model, opt, loss, grad_clip):
    opt.zero_grad(set_to_none=False)
    loss.backward()
    norm = torch.sqrt(sum((p.grad**2).sum() for p in model.parameters()))
    for p in model.parameters():
        p.grad.mul_(min(1.0, grad_clip / (float(norm) + 1e-6)))  # even when grad_clip is 0
    opt.step()


# --- chapter 22 -------------------------------------------------------------------------------------------

def _attention_copying_the_heads(q, k, v):
    h, h_kv, d = q.shape[-3], k.shape[-3], q.shape[-1]
    kv_of = np.arange(h) // (h // h_kv)
    K, V = np.take(k, kv_of, axis=-3), np.take(v, kv_of, axis=-3)  # one copy of the cache per query head
    s = q @ np.swapaxes(K, -1, -2) / np.sqrt(d)
    T_q, T_k = s.shape[-2:]
    s = np.where(np.arange(T_k)[None, :] <= np.arange(T_q)[:, None] + T_k - T_q, s, -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    return (w / w.sum(axis=-1, keepdims=True)) @ V


def test_a_block_step_that_copies_the_key_value_heads_is_refused_alone_and_in_parts():
    from test_exercises_ch22 import make_step, rebase_rotary

    from attnbook.exercises import check_llama_block_step

    assert check_llama_block_step(make_step())
    copying = make_step(attend=_attention_copying_the_heads)
    for answer in (copying, {"rebase_rotary": rebase_rotary, "llama_block_step": copying}):
        verdict = check_llama_block_step(answer)
        _wrong(verdict, "copies the key-value heads", "MiB", outcome=Outcome.WRONG_VALUE)


# --- chapter 24 -------------------------------------------------------------------------------------------

def _bert(ids, mask_id, vocab_size, seed, rate, mask_prob, random_prob, choose=None, replace=None):
    """BERT's corruption from uniform draws, with the choice of positions or of the random ids changed."""
    g = torch.Generator().manual_seed(seed)
    chosen = torch.rand(ids.shape, generator=g) < rate if choose is None else choose(ids, rate, g)
    kind = torch.rand(ids.shape, generator=g)
    if replace is None:
        other = torch.randint(vocab_size - 1, ids.shape, generator=g)
        other = other + (other >= mask_id).long()
    else:
        other = replace(ids, g)
    inputs = torch.where(chosen & (kind < mask_prob), torch.full_like(ids, mask_id), ids)
    to_random = chosen & (kind >= mask_prob) & (kind < mask_prob + random_prob)
    return torch.where(to_random, other.to(ids.dtype), inputs), chosen


def _exactly_round_rate_n(ids, rate, g):
    n = ids.numel()
    chosen = torch.zeros(n, dtype=torch.bool)
    chosen[torch.randperm(n, generator=g)[: round(rate * n)]] = True
    return chosen.reshape(ids.shape)


def _in_pairs(ids, rate, g):
    n = ids.numel()
    first = torch.rand((n + 1) // 2, generator=g) < rate
    return first.repeat_interleave(2)[:n].reshape(ids.shape)  # positions 2j and 2j + 1 chosen together


def _from_the_data(ids, g):
    flat = ids.reshape(-1)
    return flat[torch.randint(0, flat.numel(), ids.shape, generator=g)]


def test_corruptions_wrong_in_distribution_are_refused():
    from attnbook.exercises import check_mask_tokens_by_hand

    assert check_mask_tokens_by_hand(_bert)
    verdict = check_mask_tokens_by_hand(lambda *a: _bert(*a, replace=_from_the_data))
    _wrong(verdict, "not from the ids of the sequence", outcome=Outcome.WRONG_VALUE)
    verdict = check_mask_tokens_by_hand(lambda *a: _bert(*a, choose=_exactly_round_rate_n))
    _wrong(verdict, "was always 100", "randperm", outcome=Outcome.WRONG_VALUE)
    verdict = check_mask_tokens_by_hand(lambda *a: _bert(*a, choose=_in_pairs))
    _wrong(verdict, "neighbouring positions both chosen", "its own draw", outcome=Outcome.WRONG_VALUE)


# --- chapter 23 -------------------------------------------------------------------------------------------

def _merged(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _add_pairs(ids, counts, weight):
    for pair in zip(ids, ids[1:], strict=False):
        counts[pair] = counts.get(pair, 0) + weight
        if counts[pair] == 0:
            del counts[pair]


def _recount_every_step(chunks, n_merges):
    """The chapter's naive_bpe with two helpers of its own: every chunk counted again at every merge."""
    words = {tuple(chunk): n for chunk, n in chunks.items()}
    merges = []
    for k in range(n_merges):
        counts = {}
        for ids, n in words.items():
            _add_pairs(list(ids), counts, n)
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        merges.append(best)
        words = {tuple(_merged(list(ids), best, 256 + k)): n for ids, n in words.items()}
    return merges


def _kept_up_to_date(chunks, n_merges, only_the_merged_pair=False):
    words, weights = [list(chunk) for chunk in chunks], list(chunks.values())
    counts, where = {}, {}
    for i, w in enumerate(words):
        _add_pairs(w, counts, weights[i])
        for pair in zip(w, w[1:], strict=False):
            where.setdefault(pair, set()).add(i)
    merges = []
    while len(merges) < n_merges and counts:
        best = min(counts, key=lambda p: (-counts[p], p))
        new_id = 256 + len(merges)
        if only_the_merged_pair:
            del counts[best]
        for i in sorted(where.pop(best, ())):
            new = _merged(words[i], best, new_id)
            if not only_the_merged_pair:
                _add_pairs(words[i], counts, -weights[i])
                _add_pairs(new, counts, weights[i])
            words[i] = new
            for pair in zip(new, new[1:], strict=False):
                where.setdefault(pair, set()).add(i)
        merges.append(best)
    return merges


def test_training_that_recounts_every_chunk_at_every_merge_is_refused():
    from attnbook.exercises import check_learn_merges_incremental

    assert check_learn_merges_incremental(_kept_up_to_date)
    verdict = check_learn_merges_incremental(_recount_every_step)
    _wrong(verdict, "the merges are right", "recounting every chunk at every merge", outcome=Outcome.WRONG_VALUE)


def test_counts_from_which_only_the_merged_pair_is_removed_get_their_hint():
    from attnbook.exercises import check_learn_merges_incremental

    verdict = check_learn_merges_incremental(lambda chunks, n: _kept_up_to_date(chunks, n, only_the_merged_pair=True))
    _wrong(verdict, "the counts change beyond the merged pair", outcome=Outcome.WRONG_VALUE)


def test_a_stacked_mask_with_its_rows_interleaved_gets_its_hint():
    from attnbook.exercises import check_gqa_by_groups

    def stacked(q, k, v, spread=np.tile):
        *lead, h, T_q, d = q.shape
        h_kv, T_k = k.shape[-3], k.shape[-2]
        g = h // h_kv
        scores = q.reshape(*lead, h_kv, g * T_q, d) @ np.swapaxes(k, -1, -2) / np.sqrt(d)
        mask = np.tril(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q)
        rows = np.tile(mask, (g, 1)) if spread is np.tile else np.kron(mask, np.ones((g, 1), dtype=bool))
        scores = np.where(rows, scores, -np.inf)
        w = np.exp(scores - scores.max(axis=-1, keepdims=True))
        return (w / w.sum(axis=-1, keepdims=True) @ v).reshape(q.shape)

    assert check_gqa_by_groups(stacked)
    _wrong(check_gqa_by_groups(lambda q, k, v: stacked(q, k, v, spread=np.kron)), "np.tile", "np.kron",
           outcome=Outcome.WRONG_VALUE)
