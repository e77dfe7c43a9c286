"""Chapter 26's checkers: the references pass, each typical mistake is named, and answers that hand the work
to the package or to PyTorch are refused."""

import numpy as np
import torch
import torch.nn.functional as F

from attnbook.exercises import check_grid_encoding, check_patches_to_images
from attnbook.exercises.ch26 import _grid_cases, _patch_cases
from attnbook.numpy.positional import sinusoidal_encoding
from attnbook.torch.vit import patchify, sinusoidal_2d, unpatchify


def by_loops(patches, patch_size, height, width):
    """A learner's answer with loops: each patch's pixels, listed channels last, written back into its square."""
    p = patch_size
    B, N, D = patches.shape
    C, gw = D // (p * p), width // p
    out = torch.zeros(B, C, height, width, dtype=patches.dtype)
    for n in range(N):
        i, j = divmod(n, gw)
        for k in range(D):
            r, rest = divmod(k, p * C)  # row in the patch, then (column, channel)
            s, c = divmod(rest, C)
            out[:, c, i * p + r, j * p + s] = patches[:, n, k]
    return out


def through_patchify(patches, patch_size, height, width):
    """The trick the statement allows: patchify an image of indices to learn where each number goes, in
    patchify's channel-first order, and reorder each patch to channels last by hand."""
    p = patch_size
    B, N, D = patches.shape
    C = D // (p * p)
    index = torch.arange(C * height * width).reshape(1, C, height, width)
    first = patchify(index, p)[0]  # (N, C p^2): the pixel each number of a channel-first patch comes from
    last = first.reshape(N, C, p, p).permute(0, 2, 3, 1).reshape(N, D)  # the same pixels, channels last
    out = torch.zeros(B, C * height * width, dtype=patches.dtype)
    out[:, last.reshape(-1)] = patches.reshape(B, -1)
    return out.reshape(B, C, height, width)


def with_numpy(grid_h, grid_w, d_model):
    """A learner's answer that computes the sines and cosines itself, in NumPy, patch by patch."""
    half = d_model // 2
    omega = 10000.0 ** (-np.arange(0, half, 2) / half)
    out = np.zeros((grid_h * grid_w, d_model))
    for n in range(grid_h * grid_w):
        i, j = divmod(n, grid_w)
        out[n, 0:half:2], out[n, 1:half:2] = np.sin(i * omega), np.cos(i * omega)
        out[n, half::2], out[n, half + 1::2] = np.sin(j * omega), np.cos(j * omega)
    return out


def test_correct_answers_pass():
    assert check_patches_to_images(by_loops)
    assert check_patches_to_images(through_patchify)  # patchify is allowed, and does not do the exercise alone
    assert check_grid_encoding(with_numpy)
    assert check_grid_encoding(lambda gh, gw, d: torch.tensor(with_numpy(gh, gw, d), dtype=torch.float32))


def test_the_cases_cover_channels_and_grids_that_are_not_square():
    assert any(c.args[0].shape[2] > c.args[1] ** 2 for c in _patch_cases())  # several channels
    assert any(c.args[2] != c.args[3] for c in _patch_cases())
    assert any(c.args[0] != c.args[1] for c in _grid_cases())


def test_delegating_answers_are_refused_by_name():
    verdict = check_patches_to_images(lambda P, p, H, W: unpatchify(P, p, H, W))
    assert not verdict and "unpatchify" in verdict.message

    def folded(P, p, H, W):
        return F.fold(P.transpose(1, 2), (H, W), kernel_size=p, stride=p)

    verdict = check_patches_to_images(folded)
    assert not verdict and "fold" in verdict.message
    verdict = check_grid_encoding(lambda gh, gw, d: sinusoidal_2d(gh, gw, d))
    assert not verdict and "sinusoidal_2d" in verdict.message


def test_patch_mistakes_are_named():
    def by_columns(patches, p, H, W):
        B, N, D = patches.shape
        C, gh = D // (p * p), H // p
        out = torch.zeros(B, C, H, W, dtype=patches.dtype)
        for n in range(N):
            j, i = divmod(n, gh)  # column by column
            out[:, :, i * p:(i + 1) * p, j * p:(j + 1) * p] = patches[:, n].reshape(B, p, p, C).permute(0, 3, 1, 2)
        return out

    verdict = check_patches_to_images(by_columns)
    assert not verdict and "row by row" in verdict.message

    def channels_first(patches, p, H, W):  # the page's layout: the inverse of patchify copied from its cell
        B, N, D = patches.shape
        C, gw = D // (p * p), W // p
        out = torch.zeros(B, C, H, W, dtype=patches.dtype)
        for n in range(N):
            i, j = divmod(n, gw)
            out[:, :, i * p:(i + 1) * p, j * p:(j + 1) * p] = patches[:, n].reshape(B, C, p, p)
        return out

    verdict = check_patches_to_images(channels_first)
    assert not verdict and "channels last" in verdict.message, verdict.message

    def rows_and_columns_swapped(patches, p, H, W):
        return by_loops(patches, p, H, W).reshape(patches.shape[0], -1, H // p, p, W // p, p).transpose(3, 5) \
            .reshape(patches.shape[0], -1, H, W)

    verdict = check_patches_to_images(rows_and_columns_swapped)
    assert not verdict and "column by column" in verdict.message, verdict.message
    verdict = check_patches_to_images(lambda P, p, H, W: P.reshape(P.shape[0], -1, H, W))
    assert not verdict and "permuted" in verdict.message


def test_an_answer_of_my_own_that_drops_the_batch_is_refused():
    verdict = check_patches_to_images(lambda P, p, H, W: by_loops(P, p, H, W)[0])
    assert not verdict and "shape" in verdict.message


def test_grid_mistakes_are_named():
    verdict = check_grid_encoding(lambda gh, gw, d: sinusoidal_encoding(gh * gw, d))
    assert not verdict and "1-D encoding of the patch number" in verdict.message
    verdict = check_grid_encoding(lambda gh, gw, d: with_numpy(gh, gw, d)[:, np.r_[d // 2:d, 0:d // 2]])
    assert not verdict and "row index goes in the first half" in verdict.message

    def full_width(gh, gw, d):
        rows = sinusoidal_encoding(gh, d)[:, :d // 2]
        cols = sinusoidal_encoding(gw, d)[:, :d // 2]
        return np.concatenate([np.repeat(rows, gw, axis=0), np.tile(cols, (gh, 1))], axis=1)

    verdict = check_grid_encoding(full_width)
    assert not verdict and "fastest frequencies" in verdict.message


def test_an_encoding_that_counts_from_one_is_refused():
    verdict = check_grid_encoding(lambda gh, gw, d: with_numpy(gh + 1, gw + 1, d).reshape(gh + 1, gw + 1, d)[1:, 1:]
                                  .reshape(gh * gw, d))
    assert not verdict
