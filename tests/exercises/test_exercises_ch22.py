"""Chapter 22's checkers accept answers computed another way, refuse ready-made ones and likely wrong ones."""

import numpy as np
import torch

import attnbook.numpy as an
import attnbook.torch as at
from attnbook.exercises import (
    check_gqa_by_groups,
    check_llama_block_step,
    check_rms_norm_backward,
    check_rms_norm_fp16,
)


def fp16_by_vector_norm(x, gamma, eps):
    # another float16 answer: the norm of x / m, with m its largest entry, and eps scaled by 1 / m^2
    m = x.abs().amax(dim=-1, keepdim=True)
    m = torch.where(m > 2**-10, m, torch.full_like(m, 2**-10))  # tiny rows: eps / m^2 stays finite
    y = x / m
    rms = torch.linalg.vector_norm(y, dim=-1, keepdim=True) / x.shape[-1] ** 0.5
    return gamma * y / torch.sqrt(rms * rms + eps / m / m)


def fp16_by_max(x, gamma, eps):
    m = x.abs().amax(dim=-1, keepdim=True).clamp_min(2**-8)
    y = x / m
    return y * torch.rsqrt((y * y).mean(dim=-1, keepdim=True) + (eps / m) / m) * gamma


def backward_from_x(x_hat, inv_rms, gamma, dy):
    # a learner's likely variant: back to x = x_hat / r, then the formula in x and r
    x, g = x_hat / inv_rms, dy * gamma
    return inv_rms * g - inv_rms**3 * x * (g * x).mean(dim=-1, keepdim=True)


def backward_by_jacobian(x_hat, inv_rms, gamma, dy):
    # the full d x d Jacobian per vector (in x_hat and r), then a vector-Jacobian product
    d = x_hat.shape[-1]
    eye = torch.eye(d, dtype=x_hat.dtype)
    J = gamma[:, None] * inv_rms[..., None] * (eye - x_hat[..., :, None] * x_hat[..., None, :] / d)
    return torch.einsum("...i,...ij->...j", dy, J)


def test_answers_computed_another_way_pass():
    assert check_rms_norm_fp16(fp16_by_vector_norm)
    assert check_rms_norm_fp16(fp16_by_max)
    assert check_rms_norm_backward(backward_from_x)
    assert check_rms_norm_backward(backward_by_jacobian)


def test_a_ready_made_rms_norm_is_refused_by_name():
    for answer, named in ((lambda x, g, e: at.rms_norm(x, g, e), "attnbook.torch"),
                          (lambda x, g, e: torch.nn.functional.rms_norm(x, x.shape[-1:], g, e),
                           "torch.nn.functional.rms_norm")):
        verdict = check_rms_norm_fp16(answer)
        assert not verdict and named in verdict.message, verdict.message


def test_leaving_float16_is_refused():
    def in_float32(x, gamma, eps):  # the easy way out: widen, normalise, narrow
        xf = x.float()
        return (xf * torch.rsqrt((xf * xf).mean(dim=-1, keepdim=True) + eps) * gamma.float()).half()

    def mean_in_float32(x, gamma, eps):
        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True, dtype=torch.float32) + eps).half() * gamma

    def in_numpy(x, gamma, eps):
        a = x.numpy().astype(np.float64)
        return torch.from_numpy(a / np.sqrt((a * a).mean(axis=-1, keepdims=True) + eps)).half()

    def by_items(x, gamma, eps):
        rows = [[v.item() for v in row] for row in x.reshape(-1, x.shape[-1])]
        return x * 0 + sum(v * v for v in rows[0])


    for answer in (in_float32, mean_in_float32, in_numpy, by_items):
        verdict = check_rms_norm_fp16(answer)
        assert not verdict and verdict.attempted and "float16 only" in verdict.message, verdict.message


def test_the_float16_mistakes_are_named():
    def over_root_d(x, gamma, eps):  # dividing by sqrt(d) first, then the squares: overflows near 65504
        y = x / x.shape[-1] ** 0.5
        return gamma * x / (y * y).sum(dim=-1, keepdim=True).add(eps).sqrt()

    def eps_unscaled(x, gamma, eps):
        m = x.abs().amax(dim=-1, keepdim=True)
        y = x / torch.where(m > 0, m, torch.ones_like(m))
        return y * torch.rsqrt((y * y).mean(dim=-1, keepdim=True) + eps) * gamma

    def unfloored(x, gamma, eps):  # right except for tiny rows, where eps / m / m overflows
        m = x.abs().amax(dim=-1, keepdim=True)
        m = torch.where(m > 0, m, torch.ones_like(m))
        y = x / m
        return y * torch.rsqrt((y * y).mean(dim=-1, keepdim=True) + (eps / m) / m) * gamma

    assert "256 sqrt(d)" in check_rms_norm_fp16(over_root_d).message
    assert "eps / m^2" in check_rms_norm_fp16(eps_unscaled).message
    verdict = check_rms_norm_fp16(unfloored)
    assert not verdict and "Hold m at a floor" in verdict.message, verdict.message


def test_autograd_is_refused_by_name():
    def by_autograd(x_hat, inv_rms, gamma, dy):
        x = (x_hat / inv_rms).clone().requires_grad_(True)
        eps = (inv_rms**-2 - x.detach().pow(2).mean(dim=-1, keepdim=True))
        (x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * gamma).backward(dy)
        return x.grad

    def by_grad(x_hat, inv_rms, gamma, dy):
        x = (x_hat / inv_rms).clone().requires_grad_(True)
        return torch.autograd.grad(at.rms_norm(x, gamma, 1e-5), x, dy)[0]

    assert "torch.autograd" in check_rms_norm_backward(by_autograd).message
    assert "attnbook.torch.rmsnorm.rms_norm" in check_rms_norm_backward(by_grad).message


def test_a_clamped_input_is_refused():
    # clamping the entries so that their squares fit: finite, but the wrong vector is normalised
    def clamped(x, gamma, eps):
        y = x.clamp(-255, 255)
        return y * torch.rsqrt((y * y).mean(dim=-1, keepdim=True) + eps) * gamma

    verdict = check_rms_norm_fp16(clamped)
    assert not verdict and verdict.attempted and "wrong value" in verdict.message, verdict.message


def test_a_row_of_zeros_must_not_give_nan():
    def no_guard(x, gamma, eps):  # 0 / 0 for a row of zeros
        m = x.abs().amax(dim=-1, keepdim=True)
        y = x / m
        return y * torch.rsqrt((y * y).mean(dim=-1, keepdim=True) + eps / m / m) * gamma

    verdict = check_rms_norm_fp16(no_guard)
    assert not verdict and "zeros" in verdict.message, verdict.message


def test_layer_norms_backward_is_refused():
    # LayerNorm's backward pass also subtracts the mean of the upstream gradient; RMSNorm's does not
    def layer_norm_like(x_hat, inv_rms, gamma, dy):
        g = dy * gamma
        return inv_rms * (g - g.mean(dim=-1, keepdim=True) - x_hat * (g * x_hat).mean(dim=-1, keepdim=True))

    verdict = check_rms_norm_backward(layer_norm_like)
    assert not verdict and verdict.attempted and "wrong value" in verdict.message


def test_an_unattempted_exercise_says_so():
    def todo(x_hat, inv_rms, gamma, dy):
        raise NotImplementedError

    verdict = check_rms_norm_backward(todo)
    assert not verdict and not verdict.attempted


# --- grouped-query attention by groups ---------------------------------------------------------------------


def gqa_by_loops(q, k, v):
    # one query head at a time, its key-value head picked by index (no copies)
    h, h_kv, T_q, T_k = q.shape[-3], k.shape[-3], q.shape[-2], k.shape[-2]
    out = np.empty_like(q)
    for i in range(h):
        kv = i // (h // h_kv)
        s = q[..., i, :, :] @ np.swapaxes(k[..., kv, :, :], -1, -2) / np.sqrt(q.shape[-1])
        s = np.where(np.arange(T_k)[None, :] <= np.arange(T_q)[:, None] + T_k - T_q, s, -np.inf)
        w = np.exp(s - s.max(axis=-1, keepdims=True))
        out[..., i, :, :] = (w / w.sum(axis=-1, keepdims=True)) @ v[..., kv, :, :]
    return out


def test_gqa_another_way_passes():
    assert check_gqa_by_groups(gqa_by_loops)


def test_gqa_by_repeating_is_refused_by_name():
    def by_repeat_kv(q, k, v):
        g = q.shape[-3] // k.shape[-3]
        return an.scaled_dot_product_attention(q, an.repeat_kv(k, g), an.repeat_kv(v, g),
                                               mask=an.causal_mask(q.shape[-2], k.shape[-2]))[0]

    def by_np_repeat(q, k, v):
        g = q.shape[-3] // k.shape[-3]
        return an.scaled_dot_product_attention(q, np.repeat(k, g, axis=-3), np.repeat(v, g, axis=-3),
                                               mask=an.causal_mask(q.shape[-2], k.shape[-2]))[0]

    for answer, named in ((by_repeat_kv, "repeat_kv"), (by_np_repeat, "numpy")):
        verdict = check_gqa_by_groups(answer)
        assert not verdict and named in verdict.message, verdict.message


def test_gqa_grouped_the_wrong_way_is_named():
    def grouped_as_g_by_h_kv(q, k, v):  # q reshaped to (g, h_kv, ...): head i meets key-value head i % h_kv
        h, h_kv = q.shape[-3], k.shape[-3]
        order = np.argsort(np.arange(h) % h_kv, kind="stable")  # heads of key-value head 0 first
        back = np.argsort(order)
        return gqa_by_loops(q[..., order, :, :], k, v)[..., back, :, :]

    verdict = check_gqa_by_groups(grouped_as_g_by_h_kv)
    assert not verdict and "i // g" in verdict.message, verdict.message


# --- the capstone ------------------------------------------------------------------------------------------


def rebase_rotary(x, positions, base, old_base=None):
    # complex form: pair i multiplied by e^{i p (theta_new_i - theta_old_i)}
    d = x.shape[-1]
    theta = base ** (-np.arange(0, d, 2) / d) - (0.0 if old_base is None else old_base ** (-np.arange(0, d, 2) / d))
    z = (x[:, : d // 2] + 1j * x[:, d // 2:]) * np.exp(1j * np.outer(np.asarray(positions, dtype=float), theta))
    return np.concatenate([z.real, z.imag], axis=-1)


def make_step(norm=an.rms_norm, rotate=rebase_rotary, attend=gqa_by_loops, ffn=an.swiglu, residual=True,
              hand_on=None):
    def step(x_t, params, keys, values, trace=None):
        trace = {} if trace is None else trace
        d = x_t.shape[-1]
        h, h_kv, dh, t = params["n_heads"], params["n_kv_heads"], d // params["n_heads"], keys.shape[1]

        def heads(y, n, rot=True):
            y = y.reshape(n, 1, dh)
            return np.stack([rotate(yh, [t], params["rope_base"]) for yh in y]) if rot else y

        trace["norm1"] = a = norm(x_t, params["norm1.gamma"], params["eps"])
        q = heads(a @ params["self_attn.q_proj.W"], h)
        trace["queries"] = q[:, 0]
        k_new = heads(a @ params["self_attn.k_proj.W"], h_kv)
        trace["keys"] = K = np.concatenate([keys, k_new], axis=1)
        trace["values"] = V = np.concatenate([values, heads(a @ params["self_attn.v_proj.W"], h_kv, rot=False)], 1)
        o = attend(q, K, V).reshape(d) @ params["self_attn.out_proj.W"]
        trace["attention"] = s = x_t + o if residual else o
        trace["norm2"] = a = norm(s, params["norm3.gamma"], params["eps"])
        f = ffn(a, params["ff.fc1.W"], params["ff.fc3.W"], params["ff.fc2.W"])
        trace["output"] = s + f if residual else f
        if hand_on is not None:
            trace["keys"] = hand_on(keys, k_new, a)
        return trace["output"]

    return step


def parts(**changed):
    found = {"rebase_rotary": rebase_rotary, "gqa_by_groups": gqa_by_loops}
    found.update(changed)
    return {**found, "llama_block_step": make_step(rotate=found["rebase_rotary"], attend=found["gqa_by_groups"])}


def clockwise(x, positions, base, old_base=None):
    return rebase_rotary(x, -np.asarray(positions), base, old_base)


def without_eps(x, gamma, eps):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True)) * gamma


def gqa_by_modulo(q, k, v):
    h, h_kv = q.shape[-3], k.shape[-3]
    order = np.argsort(np.arange(h) % h_kv, kind="stable")
    return gqa_by_loops(q[..., order, :, :], k, v)[..., np.argsort(order), :, :]


def decode(step, x, params):
    # the tokens fed one by one, each step handing its cache on to the next
    h_kv, dh = params["n_kv_heads"], x.shape[1] // params["n_heads"]
    keys = values = np.zeros((h_kv, 0, dh))
    rows = []
    for x_t in x:
        trace = {}
        rows.append(step(x_t, params, keys, values, trace))
        keys, values = trace["keys"], trace["values"]
    return np.stack(rows), keys


def test_capstone_passes_alone_and_with_its_parts():
    assert check_llama_block_step(make_step())
    assert check_llama_block_step(parts())


def test_steps_fed_one_by_one_equal_the_package_block_on_the_whole_sequence():
    from attnbook.exercises.ch22 import _block_of, _random_block

    params = _random_block(7, 16, 4, 2, 24, 1e-5, 1e4)
    x = np.random.default_rng(7).normal(size=(9, 16))
    rows, keys = decode(make_step(), x, params)
    with torch.no_grad():
        whole = _block_of(params)(torch.as_tensor(x)[None])[0].numpy()
    assert np.allclose(rows, whole, rtol=1e-10, atol=1e-10) and keys.shape == (2, 9, 4)


def test_capstone_names_the_part_that_disagrees():
    for changed, part in ((dict(rebase_rotary=clockwise), "rebase_rotary"),
                          (dict(gqa_by_groups=gqa_by_modulo), "gqa_by_groups")):
        verdict = check_llama_block_step(parts(**changed))
        assert not verdict and f"the part `{part}` disagrees" in verdict.message, verdict.message
    # the whole alone: the mistake's hint and the traced part name it
    for step, words in ((make_step(rotate=clockwise), ("rotary positions", "disagrees is queries")),
                        (make_step(norm=without_eps), ("RMSNorm: eps", "disagrees is norm1")),
                        (make_step(residual=False), ("residual connections", "disagrees is attention"))):
        verdict = check_llama_block_step(step)
        assert not verdict and all(w in verdict.message for w in words), verdict.message


def test_capstone_with_right_parts_put_together_wrongly_says_so():
    wrong = parts()
    right_step = wrong["llama_block_step"]
    wrong["llama_block_step"] = lambda x_t, params, keys, values, trace=None: right_step(
        x_t, {**params, "norm1.gamma": params["norm3.gamma"], "norm3.gamma": params["norm1.gamma"]}, keys, values,
        trace)
    verdict = check_llama_block_step(wrong)
    assert not verdict and "Your parts each agree" in verdict.message and "norm1" in verdict.message, verdict.message


def test_a_wrong_cache_handed_on_is_named():
    # the output is right, but the key handed on to the next step has its dimensions reversed
    def reversed_key(keys, k_new, a):
        return np.concatenate([keys, k_new[..., ::-1]], axis=1)

    verdict = check_llama_block_step(make_step(hand_on=reversed_key))
    assert not verdict and "trace['keys'], the cache handed on" in verdict.message, verdict.message


def test_capstone_delegating_is_refused_by_name():
    from attnbook.exercises.ch22 import _block_of

    def package_step(x_t, params, keys, values, trace=None):
        block, cache = _block_of(params), at.KVCache()
        if keys.shape[1]:
            attn = block.self_attn
            cache.keys[attn], cache.values[attn] = torch.as_tensor(keys)[None], torch.as_tensor(values)[None]
            cache.seen[attn] = keys.shape[1]
        with torch.no_grad():
            return block(torch.as_tensor(x_t).reshape(1, 1, -1), cache=cache)[0, 0].numpy()

    verdict = check_llama_block_step(package_step)
    assert not verdict and "the book's own package" in verdict.message, verdict.message
    torch_norm = make_step(norm=lambda x, g, e: at.rms_norm(torch.as_tensor(x), torch.as_tensor(g), e).numpy())
    verdict = check_llama_block_step(torch_norm)
    assert not verdict and "rms_norm" in verdict.message, verdict.message
    verdict = check_llama_block_step(make_step(rotate=lambda x, p, base, o=None: an.apply_rotary(x, p, base)))
    assert not verdict and "apply_rotary" in verdict.message, verdict.message


def test_capstone_plausible_wrong_answers_fail():
    # positions counted from 1, and a whole-cache rotation at the new position (the cache rotated twice)
    late = make_step(rotate=lambda x, p, base, o=None: rebase_rotary(x, np.asarray(p) + 1, base))
    verdict = check_llama_block_step(late)
    assert not verdict and verdict.attempted

    def rotate_everything(x_t, params, keys, values, trace=None):
        again = np.stack([rebase_rotary(kh, np.full(keys.shape[1], keys.shape[1]), params["rope_base"])
                          for kh in keys])
        return make_step()(x_t, params, again, values, trace)

    verdict = check_llama_block_step(rotate_everything)
    assert not verdict and "not at 0" in verdict.message, verdict.message


def test_capstone_takes_the_package_numpy_norm_and_network_but_checks_the_learners_parts():
    assert check_llama_block_step(make_step(norm=an.rms_norm, ffn=an.swiglu))
    verdict = check_llama_block_step({"rebase_rotary": rebase_rotary, "gqa_by_groups": gqa_by_modulo,
                                      "llama_block_step": make_step()})
    assert not verdict and "the part `gqa_by_groups` disagrees" in verdict.message, verdict.message


def test_capstone_parts_not_attempted_read_as_not_attempted():
    def todo(*args):
        raise NotImplementedError

    verdict = check_llama_block_step(parts(rebase_rotary=todo))
    assert not verdict and not verdict.attempted and "rebase_rotary" in verdict.message
