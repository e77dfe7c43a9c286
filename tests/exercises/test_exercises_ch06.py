"""Chapter 6's checkers accept answers computed another way, refuse the package's own functions and
autograd, and reject wrong answers a learner might write."""

import math

import numpy as np
import torch

import attnbook.numpy as anp
from attnbook.exercises import check_correlated_scale, check_temperature_gradient


def temperature_gradient_by_jacobians(s, g, tau):
    # Row by row through an explicit Jacobian, written out here (the package's own is refused):
    # dL/dtau = sum over rows of (J^T g) . d(s / tau)/dtau, with d(s / tau)/dtau = -s / tau^2.
    p = anp.softmax(np.asarray(s) / tau, axis=-1)
    flat_s, flat_p = np.asarray(s).reshape(-1, p.shape[-1]), p.reshape(-1, p.shape[-1])
    flat_g = np.asarray(g).reshape(-1, p.shape[-1])
    return sum(float(((np.diag(r) - np.outer(r, r)).T @ gr) @ (-sr / tau**2))
               for r, gr, sr in zip(flat_p, flat_g, flat_s, strict=True))


def temperature_gradient_as_covariance(s, g, tau):
    # -1/tau^2 times the covariance of s and g under the weights p, added over the rows.
    p = anp.softmax(np.asarray(s) / tau, axis=-1)
    mean = lambda x: np.sum(p * x, axis=-1)  # noqa: E731
    return float(-np.sum(mean(s * g) - mean(s) * mean(g)) / tau**2)


def scale_by_simulation_formula(d, var_q, var_k, rho):
    # E[(q k)^2] - E[q k]^2 per entry, from the moments of jointly Gaussian variables, summed over d.
    second = var_q * var_k + 2 * (rho * math.sqrt(var_q * var_k)) ** 2
    mean = rho * math.sqrt(var_q * var_k)
    return (d * (second - mean**2)) ** -0.5


def test_answers_computed_another_way_pass():
    assert check_temperature_gradient(temperature_gradient_by_jacobians)
    assert check_temperature_gradient(temperature_gradient_as_covariance)
    assert check_correlated_scale(scale_by_simulation_formula)


def test_the_reference_agrees_with_central_differences():
    for case in check_temperature_gradient.cases:
        s, g, tau = case.args

        def loss(t, s=s, g=g):
            return float(np.sum(g * anp.softmax(s / t, axis=-1)))

        fd = (loss(tau + 1e-6) - loss(tau - 1e-6)) / 2e-6
        assert math.isclose(fd, check_temperature_gradient.reference(*case.args), rel_tol=1e-5, abs_tol=1e-7)


def test_delegating_to_the_package_or_autograd_is_refused_by_name():
    def through_package(s, g, tau):
        p = anp.softmax(np.asarray(s) / tau, axis=-1)
        flat_p, flat_g = p.reshape(-1, p.shape[-1]), np.asarray(g).reshape(-1, p.shape[-1])
        rows = [anp.softmax_jacobian(r) @ gr for r, gr in zip(flat_p, flat_g, strict=True)]
        return float(np.sum(np.stack(rows).reshape(p.shape) * -np.asarray(s) / tau**2))

    def through_backward(s, g, tau):
        t = torch.tensor(float(tau), dtype=torch.float64, requires_grad=True)
        torch.softmax(torch.tensor(s) / t, dim=-1).backward(torch.tensor(g))
        return t.grad.item()

    def through_func(s, g, tau):
        loss = lambda t: (torch.softmax(torch.tensor(s) / t, dim=-1) * torch.tensor(g)).sum()  # noqa: E731
        return torch.func.grad(loss)(torch.tensor(float(tau), dtype=torch.float64)).item()

    def through_softmax_backward(s, g, tau):
        from attnbook.numpy.backprop.softmax import softmax_backward

        p = anp.softmax(np.asarray(s) / tau, axis=-1)
        return float(np.sum(softmax_backward(np.asarray(g), p) * -np.asarray(s) / tau**2))

    verdict = check_temperature_gradient(through_package)
    assert not verdict and "attnbook.numpy.softmax.softmax_jacobian" in verdict.message
    verdict = check_temperature_gradient(through_backward)
    assert not verdict and "torch.autograd" in verdict.message and "backward" in verdict.message
    verdict = check_temperature_gradient(through_func)
    assert not verdict and "torch.func" in verdict.message
    verdict = check_temperature_gradient(through_softmax_backward)
    assert not verdict and "softmax_backward" in verdict.message


def test_the_listed_mistakes_give_their_hints():
    verdict = check_temperature_gradient(lambda s, g, tau: -temperature_gradient_as_covariance(s, g, tau))
    assert not verdict and "minus sign" in verdict.message
    verdict = check_temperature_gradient(lambda s, g, tau: -temperature_gradient_as_covariance(s, g, tau) * tau**2)
    assert not verdict and "1 / tau" in verdict.message


def test_wrong_answers_not_among_the_listed_mistakes_fail():
    def weights_of_raw_scores(s, g, tau):
        # The weights taken from s rather than s / tau.
        p = anp.softmax(np.asarray(s), axis=-1)
        mean = lambda x: np.sum(p * x, axis=-1)  # noqa: E731
        return float(-np.sum(mean(s * g) - mean(s) * mean(g)) / tau**2)

    def scaled_scores_in_place_of_raw(s, g, tau):
        # s / tau where the derivative needs s: one more factor 1 / tau.
        return temperature_gradient_as_covariance(s, g, tau) / tau

    assert not check_temperature_gradient(weights_of_raw_scores)
    assert not check_temperature_gradient(scaled_scores_in_place_of_raw)
    # Forgetting the square root of the whole variance: dividing by the variance of q . k, not its deviation.
    assert not check_correlated_scale(lambda d, vq, vk, r: 1 / (d * vq * vk * (1 + r * r)))


def test_unattempted_exercises_say_so():
    def todo(*args):
        raise NotImplementedError

    assert not check_temperature_gradient(todo).attempted and not check_correlated_scale(todo).attempted
