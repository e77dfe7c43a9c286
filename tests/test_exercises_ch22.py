"""Chapter 22's checkers accept answers computed another way, refuse ready-made ones and likely wrong ones."""

import numpy as np
import torch

import attnbook.torch as at
from attnbook.exercises import check_rms_norm_backward, check_rms_norm_fp16


def fp16_in_numpy(x, gamma, eps):
    xf = x.numpy().astype(np.float32)
    out = xf / np.sqrt((xf**2).mean(axis=-1, keepdims=True) + eps) * gamma.numpy().astype(np.float32)
    return out  # a NumPy array is an accepted answer


def fp16_by_division(x, gamma, eps):
    xf, gf = x.to(torch.float32), gamma.to(torch.float32)
    return gf * xf / (xf.pow(2).sum(dim=-1, keepdim=True) / x.shape[-1] + eps).sqrt()


def backward_by_projection(x, gamma, eps, dy):
    # a learner's likely variant: the normalised vector n = x r, then dx = r (g - n mean(g n))
    r = 1 / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    n, g = x * r, dy * gamma
    return r * (g - n * (g * n).mean(dim=-1, keepdim=True))


def backward_by_jacobian(x, gamma, eps, dy):
    # the full d x d Jacobian per vector, then a vector-Jacobian product
    d = x.shape[-1]
    r = 1 / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    eye = torch.eye(d, dtype=x.dtype)
    J = gamma[:, None] * (r[..., None] * eye - (r**3)[..., None] * x[..., :, None] * x[..., None, :] / d)
    return torch.einsum("...i,...ij->...j", dy, J)


def test_answers_computed_another_way_pass():
    assert check_rms_norm_fp16(fp16_in_numpy)
    assert check_rms_norm_fp16(fp16_by_division)
    assert check_rms_norm_backward(backward_by_projection)
    assert check_rms_norm_backward(backward_by_jacobian)


def test_a_ready_made_rms_norm_is_refused_by_name():
    for answer, named in ((lambda x, g, e: at.rms_norm(x.float(), g.float(), e), "attnbook.torch"),
                          (lambda x, g, e: torch.nn.functional.rms_norm(x.float(), x.shape[-1:], g.float(), e),
                           "torch.nn.functional.rms_norm")):
        verdict = check_rms_norm_fp16(answer)
        assert not verdict and named in verdict.message, verdict.message


def test_autograd_is_refused_by_name():
    def by_autograd(x, gamma, eps, dy):
        x = x.clone().requires_grad_(True)
        (x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * gamma).backward(dy)
        return x.grad

    def by_grad(x, gamma, eps, dy):
        x = x.clone().requires_grad_(True)
        return torch.autograd.grad(at.rms_norm(x, gamma, eps), x, dy)[0]

    assert "torch.autograd" in check_rms_norm_backward(by_autograd).message
    assert "torch.autograd.grad" in check_rms_norm_backward(by_grad).message


def test_a_float32_accumulation_of_the_float16_squares_is_refused():
    # squaring in float16 and only then widening: the overflow has already happened
    def squares_in_half(x, gamma, eps):
        ms = (x * x).float().mean(dim=-1, keepdim=True)
        return x.float() * torch.rsqrt(ms + eps) * gamma.float()

    verdict = check_rms_norm_fp16(squares_in_half)
    assert not verdict and "scale 300" in verdict.message, verdict.message


def test_layer_norms_backward_is_refused():
    # LayerNorm's backward pass also subtracts the mean of the upstream gradient; RMSNorm's does not
    def layer_norm_like(x, gamma, eps, dy):
        r = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
        g = dy * gamma
        return r * (g - g.mean(dim=-1, keepdim=True) - x * r**2 * (g * x).mean(dim=-1, keepdim=True))

    verdict = check_rms_norm_backward(layer_norm_like)
    assert not verdict and verdict.attempted and "wrong value" in verdict.message


def test_an_unattempted_exercise_says_so():
    def todo(x, gamma, eps, dy):
        raise NotImplementedError

    verdict = check_rms_norm_backward(todo)
    assert not verdict and not verdict.attempted
