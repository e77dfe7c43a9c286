"""Chapter 19's backward passes, each against PyTorch's autograd in float64 and against finite differences."""

from dataclasses import asdict
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnbook.numpy as anp
import attnbook.numpy.backprop as bp
import attnbook.torch as at

TOL = dict(rtol=1e-10, atol=1e-10)


def t(a, grad=True):
    return torch.tensor(a, dtype=torch.float64, requires_grad=grad)


def autograd(f, *arrays, dout):
    """Gradients of ``sum(f(*tensors) * dout)`` with respect to each array, by autograd."""
    tensors = [t(a) for a in arrays]
    (f(*tensors) * torch.from_numpy(dout)).sum().backward()
    return [x.grad.numpy() for x in tensors]


def fd_check(forward, backward_grad, x, dout, n=6, seed=0, tol=1e-7):
    """Central differences of ``sum(forward() * dout)`` at ``n`` random entries of ``x`` against the analytic one."""
    rng = np.random.default_rng(seed)
    flat = x.reshape(-1)
    for i in rng.choice(flat.size, size=min(n, flat.size), replace=False):
        old, eps = flat[i], 1e-6
        flat[i] = old + eps
        up = float((forward() * dout).sum())
        flat[i] = old - eps
        down = float((forward() * dout).sum())
        flat[i] = old
        assert abs((up - down) / (2 * eps) - backward_grad.reshape(-1)[i]) < tol


def test_linear_matches_autograd_and_finite_differences():
    rng = np.random.default_rng(0)
    x, W, b = rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 5)), rng.normal(size=5)
    y, cache = bp.linear_forward(x, W, b)
    dy = rng.normal(size=y.shape)
    dx, dW, db = bp.linear_backward(dy, cache)
    for ours, ref in zip((dx, dW, db), autograd(lambda x, W, b: x @ W + b, x, W, b, dout=dy), strict=True):
        np.testing.assert_allclose(ours, ref, **TOL)
    fd_check(lambda: bp.linear_forward(x, W, b)[0], dW, W, dy)
    fd_check(lambda: bp.linear_forward(x, W, b)[0], dx, x, dy)
    assert bp.linear_backward(dy, bp.linear_forward(x, W)[1])[2] is None
    with pytest.raises(ValueError, match="d_in"):
        bp.linear_forward(x, W.T)


def test_softmax_backward_is_the_jacobian_product():
    rng = np.random.default_rng(1)
    s, dp = rng.normal(size=(3, 7)), rng.normal(size=(3, 7))
    p = anp.softmax(s)
    by_jacobian = np.stack([anp.softmax_jacobian(p[i]).T @ dp[i] for i in range(3)])
    np.testing.assert_allclose(bp.softmax_backward(dp, p), by_jacobian, **TOL)
    (ref,) = autograd(lambda s: torch.softmax(s, -1), s, dout=dp)
    np.testing.assert_allclose(bp.softmax_backward(dp, p), ref, **TOL)
    # along another axis
    (ref0,) = autograd(lambda s: torch.softmax(s, 0), s, dout=dp)
    np.testing.assert_allclose(bp.softmax_backward(dp, anp.softmax(s, axis=0), axis=0), ref0, **TOL)


@pytest.mark.parametrize("masked", [False, True])
def test_attention_with_mask_matches_autograd_and_finite_differences(masked):
    rng = np.random.default_rng(2)
    Q, K, V = rng.normal(size=(2, 3, 5, 4)), rng.normal(size=(2, 3, 6, 4)), rng.normal(size=(2, 3, 6, 3))
    mask = None
    if masked:
        mask = rng.random((2, 1, 5, 6)) > 0.4
        mask[0, 0, 2] = False  # a query that sees nothing: zero output, zero gradient
    out, cache = bp.attention_forward(Q, K, V, mask=mask)
    np.testing.assert_allclose(out, anp.scaled_dot_product_attention(Q, K, V, mask=mask)[0], **TOL)
    dO = rng.normal(size=out.shape)
    ours = bp.attention_backward(dO, cache)
    m = None if mask is None else torch.from_numpy(mask)
    refs = autograd(lambda q, k, v: at.scaled_dot_product_attention(q, k, v, mask=m)[0], Q, K, V, dout=dO)
    for a, r in zip(ours, refs, strict=True):
        np.testing.assert_allclose(a, r, **TOL)
    for x, g in zip((Q, K, V), ours, strict=True):
        fd_check(lambda: bp.attention_forward(Q, K, V, mask=mask)[0], g, x, dO)
    if masked:
        assert np.all(ours[0][0, :, 2][0] == 0)


def test_multi_head_cross_and_self_attention_match_autograd():
    rng = np.random.default_rng(3)
    d_model, h = 8, 2
    params = anp.MultiHeadParams.init(d_model, d_kv=6, seed=3)
    X_q, X_kv = rng.normal(size=(2, 5, d_model)), rng.normal(size=(2, 4, 6))
    mask = rng.random((2, 5, 4)) > 0.3
    out, cache = bp.mha_forward(X_q, X_kv, params, h, mask=mask)
    np.testing.assert_allclose(out, anp.multi_head_attention(X_q, X_kv, params, h, mask=mask)[0], **TOL)
    dout = rng.normal(size=out.shape)
    dX_q, dX_kv, grads = bp.mha_backward(dout, cache)
    names = list(vars(params))
    weights = [vars(params)[n] for n in names]

    def f(xq, xkv, *ws):
        return at.multi_head_attention(xq, xkv, SimpleNamespace(**dict(zip(names, ws, strict=True))), h,
                                       mask=torch.from_numpy(mask))[0]

    refs = autograd(f, X_q, X_kv, *weights, dout=dout)
    np.testing.assert_allclose(dX_q, refs[0], **TOL)
    np.testing.assert_allclose(dX_kv, refs[1], **TOL)
    for n, r in zip(names, refs[2:], strict=True):
        np.testing.assert_allclose(getattr(grads, n), r, **TOL)
    fd_check(lambda: bp.mha_forward(X_q, X_kv, params, h, mask=mask)[0], grads.W_k, params.W_k, dout)
    # self-attention: one input used twice, its gradient is the sum
    X = rng.normal(size=(3, 5, d_model))
    params = anp.MultiHeadParams.init(d_model, seed=4)
    out, cache = bp.mha_forward(X, X, params, h, mask=anp.causal_mask(5))
    dout = rng.normal(size=out.shape)
    dq, dkv, _ = bp.mha_backward(dout, cache)
    (ref,) = autograd(lambda x: at.multi_head_attention(x, x, SimpleNamespace(**{
        n: torch.from_numpy(v) for n, v in vars(params).items()}), h, mask=torch.from_numpy(anp.causal_mask(5)))[0],
        X, dout=dout)
    np.testing.assert_allclose(dq + dkv, ref, **TOL)


@pytest.mark.parametrize("bias", [True, False])
def test_layer_norm_matches_autograd_and_finite_differences(bias):
    rng = np.random.default_rng(4)
    x, gamma, beta = rng.normal(size=(2, 3, 6)) * 2 + 1, rng.normal(size=6), rng.normal(size=6)
    y, cache = bp.layer_norm_forward(x, gamma, beta if bias else None)
    dy = rng.normal(size=y.shape)
    dx, dgamma, dbeta = bp.layer_norm_backward(dy, cache)
    if bias:
        refs = autograd(lambda x, g, b: F.layer_norm(x, (6,), g, b, 1e-5), x, gamma, beta, dout=dy)
        np.testing.assert_allclose(dbeta, refs[2], **TOL)
    else:
        refs = autograd(lambda x, g: F.layer_norm(x, (6,), g, None, 1e-5), x, gamma, dout=dy)
        assert dbeta is None
    np.testing.assert_allclose(y, F.layer_norm(torch.from_numpy(x), (6,), torch.from_numpy(gamma),
                                               torch.from_numpy(beta) if bias else None, 1e-5).numpy(), **TOL)
    np.testing.assert_allclose(dx, refs[0], **TOL)
    np.testing.assert_allclose(dgamma, refs[1], **TOL)
    fd_check(lambda: bp.layer_norm_forward(x, gamma, beta if bias else None)[0], dx, x, dy)


@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_gelu_matches_torch_in_both_forms(approximate):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 4, 5)) * 3
    y, cache = bp.gelu_forward(x, approximate)
    np.testing.assert_allclose(y, F.gelu(torch.from_numpy(x), approximate=approximate).numpy(), **TOL)
    dy = rng.normal(size=y.shape)
    (ref,) = autograd(lambda x: F.gelu(x, approximate=approximate), x, dout=dy)
    np.testing.assert_allclose(bp.gelu_backward(dy, cache), ref, **TOL)
    fd_check(lambda: bp.gelu_forward(x, approximate)[0], bp.gelu_backward(dy, cache), x, dy)
    with pytest.raises(ValueError, match="approximate"):
        bp.gelu_forward(x, "erf")


def test_embedding_scatter_adds_repeated_ids():
    rng = np.random.default_rng(6)
    E = rng.normal(size=(5, 3))
    ids = np.array([[1, 1, 4], [1, 0, 4]])  # id 1 three times, id 4 twice, ids 2 and 3 never
    out, cache = bp.embedding_forward(ids, E)
    dout = rng.normal(size=out.shape)
    dE = bp.embedding_backward(dout, cache)
    (ref,) = autograd(lambda E: F.embedding(torch.from_numpy(ids), E), E, dout=dout)
    np.testing.assert_allclose(dE, ref, **TOL)
    assert np.all(dE[[2, 3]] == 0)
    naive = np.zeros_like(E)
    naive[ids] += dout  # the bug np.add.at avoids: repeated ids keep one gradient
    assert not np.allclose(naive, dE)
    with pytest.raises(ValueError, match="lie in"):
        bp.embedding_forward(np.array([5]), E)


def test_cross_entropy_matches_torch_with_batch_dims():
    rng = np.random.default_rng(7)
    logits, targets = rng.normal(size=(2, 3, 6)) * 3, rng.integers(0, 6, size=(2, 3))
    loss, cache = bp.cross_entropy_forward(logits, targets)
    lt = t(logits)
    ref = F.cross_entropy(lt.reshape(-1, 6), torch.from_numpy(targets).reshape(-1))
    ref.backward()
    assert abs(loss - ref.item()) < 1e-12
    np.testing.assert_allclose(bp.cross_entropy_backward(cache), lt.grad.numpy(), **TOL)
    np.testing.assert_allclose(bp.cross_entropy_backward(cache, 2.0), 2 * lt.grad.numpy(), **TOL)
    g = bp.numerical_gradient(lambda: bp.cross_entropy_forward(logits, targets)[0], logits)
    np.testing.assert_allclose(g, lt.grad.numpy(), atol=1e-8)


def _block_model(p, d_model, h, d_ff):
    block = at.DecoderBlock(d_model, h, d_ff, norm_first=True, activation="gelu_tanh",
                            cross_attention=False).double()
    block.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in p.items()})
    return block


def test_prenorm_block_matches_the_torch_decoder_block():
    rng = np.random.default_rng(8)
    d_model, h, d_ff = 8, 2, 16
    p = bp.init_block_params(d_model, d_ff, rng, std=0.3)
    p = {k: v + rng.normal(0, 0.1, v.shape) for k, v in p.items()}  # nonzero biases, gammas away from 1
    x = rng.normal(size=(2, 5, d_model))
    y, cache = bp.block_forward(x, p, h)
    block = _block_model(p, d_model, h, d_ff)
    xt = t(x)
    yt = block(xt)
    np.testing.assert_allclose(y, yt.detach().numpy(), **TOL)
    dy = rng.normal(size=y.shape)
    (yt * torch.from_numpy(dy)).sum().backward()
    dx, grads = bp.block_backward(dy, cache)
    np.testing.assert_allclose(dx, xt.grad.numpy(), **TOL)
    for name, param in block.named_parameters():
        np.testing.assert_allclose(grads[name], param.grad.numpy(), **TOL, err_msg=name)
    fd_check(lambda: bp.block_forward(x, p, h)[0], grads["ff.fc1.W"], p["ff.fc1.W"], dy)


def _twins(seed=0, **sizes):
    cfg = bp.GPTConfig(**sizes)
    params = bp.init_gpt_params(cfg, seed)
    model = at.GPT(at.GPTConfig(**asdict(cfg))).double()
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in params.items()})
    return cfg, params, model


def test_gpt_gradients_match_autograd_and_finite_differences():
    cfg, params, model = _twins(vocab_size=11, block_size=8, n_layers=2, n_heads=2, d_model=8)
    assert params.keys() == model.state_dict().keys()
    rng = np.random.default_rng(9)
    ids, targets = rng.integers(0, 11, (3, 6)), rng.integers(0, 11, (3, 6))
    loss, grads, _ = bp.gpt_loss_and_grads(params, ids, targets, cfg)
    ref = F.cross_entropy(model(torch.from_numpy(ids)).reshape(-1, 11), torch.from_numpy(targets).reshape(-1))
    ref.backward()
    assert abs(loss - ref.item()) < 1e-12
    for name, param in model.named_parameters():
        np.testing.assert_allclose(grads[name], param.grad.numpy(), **TOL, err_msg=name)
    assert np.all(grads["pos.P"][6:] == 0)  # positions past T were not used
    num = bp.numerical_gradient(lambda: bp.gpt_loss_and_grads(params, ids, targets, cfg)[0], params["norm.gamma"])
    np.testing.assert_allclose(num, grads["norm.gamma"], atol=1e-8)


def test_adam_matches_torch_adam():
    rng = np.random.default_rng(10)
    params = {"w": rng.normal(size=(3, 4)), "b": rng.normal(size=4)}
    torch_params = [t(params["w"]), t(params["b"])]
    ours, theirs = bp.Adam(params, lr=0.05), torch.optim.Adam(torch_params, lr=0.05)
    for _ in range(20):
        grads = {"w": 2 * params["w"] + 1, "b": np.sin(params["b"])}
        ours.step(grads)
        theirs.zero_grad()
        (torch_params[0] ** 2 + torch_params[0]).sum().add(-torch.cos(torch_params[1]).sum()).backward()
        theirs.step()
    np.testing.assert_allclose(params["w"], torch_params[0].detach().numpy(), **TOL)
    np.testing.assert_allclose(params["b"], torch_params[1].detach().numpy(), **TOL)
    with pytest.raises(ValueError, match="keys"):
        ours.step({"w": params["w"]})


def test_numpy_training_follows_torch_training_step_for_step():
    cfg, params, model = _twins(vocab_size=13, block_size=8, n_layers=2, n_heads=2, d_model=16)
    opt_np, opt_t = bp.Adam(params, lr=3e-3), torch.optim.Adam(model.parameters(), lr=3e-3)
    rng = np.random.default_rng(11)
    for _ in range(8):
        ids, targets = rng.integers(0, 13, (4, 8)), rng.integers(0, 13, (4, 8))
        loss, grads, _ = bp.gpt_loss_and_grads(params, ids, targets, cfg)
        opt_np.step(grads)
        ref = F.cross_entropy(model(torch.from_numpy(ids)).reshape(-1, 13), torch.from_numpy(targets).reshape(-1))
        opt_t.zero_grad()
        ref.backward()
        opt_t.step()
        assert abs(loss - ref.item()) < 1e-9
    for name, param in model.named_parameters():
        np.testing.assert_allclose(params[name], param.detach().numpy(), atol=1e-9, err_msg=name)


def test_cache_holds_the_activations_the_formula_counts():
    B, T, d_model, h, d_ff = 2, 6, 8, 2, 32
    rng = np.random.default_rng(12)
    p = bp.init_block_params(d_model, d_ff, rng)
    _, cache = bp.block_forward(rng.normal(size=(B, T, d_model)), p, h)
    floats_per_token = 8 * d_model + 2 * d_ff + 2 + h * T
    assert bp.cache_nbytes(cache, exclude=p.values()) == B * T * floats_per_token * 8
    assert bp.cache_nbytes(cache) > bp.cache_nbytes(cache, exclude=p.values())


def test_numerical_gradient_of_a_known_function():
    x = np.array([0.3, -1.2, 2.0])
    np.testing.assert_allclose(bp.numerical_gradient(lambda: float(np.sum(np.sin(x))), x), np.cos(x), atol=1e-9)
    with pytest.raises(ValueError, match="floating"):
        bp.numerical_gradient(lambda: 0.0, np.arange(3))
