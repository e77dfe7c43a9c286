"""Chapter 9's checkers accept answers computed another way, refuse the package's own heads, and reject
wrong answers a learner might write."""

import numpy as np
import torch

import attnbook.numpy as anp
from attnbook.exercises import check_head_circuits, check_mha_parameters


def circuits_by_loop(W_q, W_k, W_v, W_o, h, d_head=None):
    d_head = d_head or W_q.shape[1] // h
    A, B = [], []
    for i in range(h):
        c = slice(i * d_head, (i + 1) * d_head)
        A.append(W_q[:, c] @ W_k[:, c].T)
        B.append(W_v[:, c] @ W_o[c])
    return np.array([A, B])


def circuits_by_torch(W_q, W_k, W_v, W_o, h):
    Wq, Wk, Wv = (torch.tensor(W).unflatten(1, (h, -1)).transpose(0, 1) for W in (W_q, W_k, W_v))
    Wo = torch.tensor(W_o).unflatten(0, (h, -1))
    return torch.stack([Wq @ Wk.mT, Wv @ Wo]).numpy()


def count_by_torch(d_model, d_kv, h, d_head):
    layers = [torch.nn.Linear(d_model, h * d_head), torch.nn.Linear(d_kv, h * d_head),
              torch.nn.Linear(d_kv, h * d_head), torch.nn.Linear(h * d_head, d_model)]
    return sum(p.numel() for layer in layers for p in layer.parameters())


def test_answers_computed_another_way_pass():
    assert check_head_circuits(circuits_by_loop)


def test_answers_in_torch_are_refused_in_a_numpy_exercise():
    for verdict in (check_head_circuits(circuits_by_torch), check_mha_parameters(count_by_torch)):
        assert not verdict and "written in NumPy" in verdict.message, verdict.message


def test_delegating_to_the_package_is_refused_by_name():
    def through_split(W_q, W_k, W_v, W_o, h):
        Wq, Wk, Wv = (anp.split_heads(W, h) for W in (W_q, W_k, W_v))
        Wo = anp.split_heads(W_o.T, h).transpose(0, 2, 1)
        return np.stack([Wq @ Wk.transpose(0, 2, 1), Wv @ Wo])

    verdict = check_head_circuits(through_split)
    assert not verdict and "attnbook.numpy.multihead.split_heads" in verdict.message


def test_the_layer_s_products_for_every_head_are_refused():
    # What the chapter's split of the activations leaves in the weights: the whole layer's W_q W_k^T and W_v W_o.
    def whole_layer(W_q, W_k, W_v, W_o, h):
        return np.stack([np.stack([W_q @ W_k.T] * h), np.stack([W_v @ W_o] * h)])

    assert not check_head_circuits(whole_layer)


def test_heads_assumed_to_be_d_model_over_h_wide_fail():
    def width_from_d_model(W_q, W_k, W_v, W_o, h):
        # the chapter's usual width, d_model / h, where the exercise's projections may be wider or narrower
        return circuits_by_loop(W_q, W_k, W_v, W_o, h, d_head=W_q.shape[0] // h)

    verdict = check_head_circuits(width_from_d_model)
    assert not verdict and "h=2, d_head=1" in verdict.message and "not d_model / h" in verdict.message


def test_counting_mistakes_a_learner_makes_get_their_hint():
    def without_output_bias(d_model, d_kv, h, d_head):
        n = h * d_head
        return (d_model + 1) * n + 2 * (d_kv + 1) * n + n * d_model

    def keys_values_from_d_model(d_model, d_kv, h, d_head):
        n = h * d_head
        return 3 * (d_model + 1) * n + (n + 1) * d_model

    verdict = check_mha_parameters(without_output_bias)
    assert not verdict and "linear map with a bias too" in verdict.message, verdict.message
    verdict = check_mha_parameters(keys_values_from_d_model)
    assert not verdict and "width d_kv" in verdict.message, verdict.message


def test_heads_reshaped_to_d_model_over_h_get_the_hint_on_their_width():
    def reshaped_with_d_model_over_h(W_q, W_k, W_v, W_o, h):
        d_model = W_q.shape[0]
        Wq, Wk, Wv = (W.reshape(d_model, h, d_model // h).transpose(1, 0, 2) for W in (W_q, W_k, W_v))
        Wo = W_o.reshape(h, d_model // h, d_model)
        return np.stack([Wq @ Wk.transpose(0, 2, 1), Wv @ Wo])

    verdict = check_head_circuits(reshaped_with_d_model_over_h)
    assert not verdict and "not d_model / h" in verdict.message, verdict.message


def test_wrong_answers_not_among_the_listed_mistakes_fail():
    def without_the_output_projection(W_q, W_k, W_v, W_o, h):
        A = circuits_by_loop(W_q, W_k, W_v, W_o, h)[0]
        d_head = W_q.shape[1] // h
        B = [W_v[:, i * d_head:(i + 1) * d_head] @ W_v[:, i * d_head:(i + 1) * d_head].T for i in range(h)]
        return np.stack([A, np.stack(B)])

    assert not check_head_circuits(without_the_output_projection)
    assert not check_mha_parameters(lambda d_model, d_kv, h, d_head: 4 * (d_model * h * d_head + h * d_head))


def test_unattempted_exercises_say_so():
    def todo(*args):
        raise NotImplementedError

    assert not check_head_circuits(todo).attempted and not check_mha_parameters(todo).attempted
