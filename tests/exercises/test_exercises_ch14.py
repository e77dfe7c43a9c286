"""Chapter 14's checkers accept answers written another way, refuse one that asks for the whole Jacobian, and
reject wrong answers a learner would plausibly write."""

import torch

from attnbook.exercises import check_influence_by_rows, check_packed_self_mask
from attnbook.torch import causal_mask


def packed_by_loops(lengths, T):
    out = torch.zeros(len(lengths), T, T, dtype=torch.bool)
    for b, row in enumerate(lengths):
        start = 0
        for n in row:  # each document sees itself causally, nothing else
            for i in range(start, start + n):
                out[b, i, start:i + 1] = True
            start += n
    return out


def doc_ids_of(lengths, T):
    ids = torch.full((len(lengths), T), -1)
    for b, row in enumerate(lengths):
        ids[b, :sum(row)] = torch.repeat_interleave(torch.arange(len(row)), torch.tensor(row))
    return ids


def influence_by_backward(f, x, clear=True):
    # .backward(), one output row and coordinate at a time, with the gradient cleared between passes
    x = x.detach().requires_grad_(True)
    y = f(x)
    rows = []
    for t in range(y.shape[1]):
        total = torch.zeros(x.shape[1], dtype=x.dtype)
        for k in range(y.shape[2]):
            if clear:
                x.grad = None
            y[0, t, k].backward(retain_graph=True)
            total += x.grad[0].pow(2).sum(-1)
        rows.append(total.sqrt())
    return torch.stack(rows)


def test_answers_written_another_way_pass():
    assert check_packed_self_mask(packed_by_loops)
    assert check_influence_by_rows(influence_by_backward)


def test_the_whole_jacobian_is_refused_by_name():
    def by_jacobian(f, x):
        J = torch.autograd.functional.jacobian(f, x)
        return J[0, :, :, 0].pow(2).sum(dim=(1, 3)).sqrt()

    verdict = check_influence_by_rows(by_jacobian)
    assert not verdict and "torch.autograd.functional.jacobian" in verdict.message


def test_gradients_that_pile_up_between_passes_are_refused():
    # .backward() adds into x.grad: forgetting to clear it makes every row carry the ones before it
    def accumulating(f, x):
        return influence_by_backward(f, x, clear=False)

    verdict = check_influence_by_rows(accumulating)
    assert not verdict and "x.grad" in verdict.message  # named, not only values


def test_one_backward_pass_per_row_of_its_summed_features_is_named():
    def by_row_sums(f, x):
        x = x.detach().requires_grad_(True)
        y = f(x)
        rows = []
        for t in range(y.shape[1]):
            (grad,) = torch.autograd.grad(y[0, t].sum(), x, retain_graph=True)
            rows.append(grad[0].pow(2).sum(-1).sqrt())
        return torch.stack(rows)

    verdict = check_influence_by_rows(by_row_sums)
    assert not verdict and "norm of a sum" in verdict.message


def test_a_mask_that_only_separates_documents_at_their_first_token_is_refused():
    # a learner who lets every document see the previous one, except across the very first boundary
    def packed_from_padding_only(lengths, T):
        real = torch.arange(T)[None, :] < torch.tensor([sum(row) for row in lengths])[:, None]
        return torch.tril(torch.ones(T, T, dtype=torch.bool))[None] & real[:, None, :]

    verdict = check_packed_self_mask(packed_from_padding_only)
    assert not verdict and "another document" in verdict.message


def test_a_mask_that_lets_pads_attend_to_themselves_is_refused():
    def pads_see_themselves(lengths, T):
        doc_ids = doc_ids_of(lengths, T)
        same = doc_ids[:, :, None] == doc_ids[:, None, :]
        eye = torch.eye(T, dtype=torch.bool)
        return causal_mask(T) & same & ((doc_ids >= 0)[:, None, :] | eye)

    assert not check_packed_self_mask(pads_see_themselves)


def test_a_boundary_one_position_early_is_refused_with_its_hint():
    # cumulative sums used as the first position of the *current* document: each last token joins the next one
    def early(lengths, T):
        ids = torch.full((len(lengths), T), -1)
        for b, row in enumerate(lengths):
            last = torch.tensor(row).cumsum(0) - 1  # taken as the start of the next document
            ids[b, :sum(row)] = torch.bucketize(torch.arange(sum(row)), last, right=True)
        same = ids[:, :, None] == ids[:, None, :]
        return causal_mask(T) & same & (ids >= 0)[:, None, :]

    verdict = check_packed_self_mask(early)
    assert not verdict and "still belongs to it" in verdict.message
