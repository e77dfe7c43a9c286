"""The Vision Transformer of chapter 26, against oracles: loops over patches, ``conv2d`` and ``torch.nn.Conv2d``
with copied weights, ``torch.nn.TransformerEncoderLayer`` with copied weights, and loops over queries and keys
for the attention measurements."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnbook.interop import copy_encoder_block_from_torch
from attnbook.torch.convnet import SmallConvNet
from attnbook.torch.inspect import record_attention
from attnbook.torch.patch_attention import (
    attention_distance,
    offset_coverage,
    offset_weights,
    offsets,
    patch_centres,
    strongest_offset,
)
from attnbook.torch.vit import PatchEmbedding, ViT, ViTConfig, patchify, sinusoidal_2d, unpatchify
from attnbook.training.classify import accuracy, train_classifier
from attnbook.training.trainer import TrainConfig


def images(B=2, C=3, H=6, W=4, seed=0):
    return torch.randn(B, C, H, W, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# --- patches -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("C, H, W, p", [(1, 8, 8, 2), (3, 6, 4, 2), (2, 6, 9, 3), (1, 4, 4, 4), (2, 3, 2, 1)])
def test_patchify_equals_a_loop_over_the_patches(C, H, W, p):
    x = images(2, C, H, W)
    got = patchify(x, p)
    n = 0
    for i in range(H // p):
        for j in range(W // p):  # row by row over the grid
            want = x[:, :, i * p:(i + 1) * p, j * p:(j + 1) * p].reshape(2, -1)  # channel, then rows, then columns
            torch.testing.assert_close(got[:, n], want, rtol=0, atol=0)
            n += 1
    assert got.shape == (2, n, C * p * p)


@pytest.mark.parametrize("C, H, W, p", [(1, 8, 8, 2), (3, 6, 4, 2), (2, 6, 9, 3), (2, 3, 2, 1)])
def test_patchify_and_unpatchify_round_trip(C, H, W, p):
    x = images(3, C, H, W, seed=1)
    assert torch.equal(unpatchify(patchify(x, p), p, H, W), x)
    P = torch.randn(3, (H // p) * (W // p), C * p * p, dtype=torch.float64)
    assert torch.equal(patchify(unpatchify(P, p, H, W), p), P)


def test_patch_shape_errors_name_what_was_expected():
    with pytest.raises(ValueError, match=r"images must have shape \(B, C, H, W\); got \(8, 8\)"):
        patchify(torch.zeros(8, 8), 2)
    with pytest.raises(ValueError, match=r"patch size 3 must divide the height and the width.*\(1, 1, 8, 8\)"):
        patchify(torch.zeros(1, 1, 8, 8), 3)
    with pytest.raises(ValueError, match="patch_size must be an integer, at least 1"):
        patchify(torch.zeros(1, 1, 8, 8), 0)
    with pytest.raises(ValueError, match=r"N = 4 x 4 = 16 patches.*got \(1, 15, 4\)"):
        unpatchify(torch.zeros(1, 15, 4), 2, 8, 8)
    with pytest.raises(ValueError, match="images must be a torch.Tensor"):
        patchify(np.zeros((1, 1, 8, 8)), 2)
    with pytest.raises(ValueError, match=r"images must have 1 channel\(s\), shape \(B, 1, H, W\); got \(2, 3, 8, 8\)"):
        PatchEmbedding(2, 1, 16)(torch.zeros(2, 3, 8, 8))


# --- patch embedding: a linear map is a strided convolution -------------------------------------------

@pytest.mark.parametrize("C, H, W, p, d", [(1, 8, 8, 2, 16), (3, 6, 4, 2, 5), (2, 9, 6, 3, 7)])
def test_patch_embedding_equals_conv2d_with_its_weights(C, H, W, p, d):
    torch.manual_seed(0)
    emb = PatchEmbedding(p, C, d).double()
    x = images(2, C, H, W, seed=2)
    conv = F.conv2d(x, emb.conv_weight(), emb.proj.b, stride=p)  # (B, d, H/p, W/p)
    torch.testing.assert_close(emb(x), conv.flatten(2).transpose(1, 2), rtol=1e-12, atol=1e-12)


def test_patch_embedding_takes_the_weights_of_a_torch_conv2d():
    torch.manual_seed(1)
    conv = torch.nn.Conv2d(3, 6, kernel_size=2, stride=2).double()
    emb = PatchEmbedding(2, 3, 6).double()
    with torch.no_grad():
        emb.proj.W.copy_(conv.weight.reshape(6, -1).T)
        emb.proj.b.copy_(conv.bias)
    x = images(2, 3, 6, 4, seed=3)
    torch.testing.assert_close(emb(x), conv(x).flatten(2).transpose(1, 2), rtol=1e-12, atol=1e-12)


# --- the model: chapter 13's block, checked against torch.nn --------------------------------------------

def torch_twin(model: ViT) -> list[torch.nn.TransformerEncoderLayer]:
    """torch.nn encoder layers holding each block's weights (copied from torch's into ours)."""
    c = model.config
    layers = []
    for block in model.blocks:
        layer = torch.nn.TransformerEncoderLayer(c.d_model, c.n_heads, c.d_ff, dropout=0.0, activation="gelu",
                                                 batch_first=True, norm_first=True).double()
        copy_encoder_block_from_torch(block, layer)
        layers.append(layer.eval())
    return layers


@pytest.mark.parametrize("pool", ["mean", "cls"])
def test_vit_equals_its_pieces_with_torch_encoder_layers(pool):
    torch.manual_seed(3)
    model = ViT(ViTConfig(d_model=16, n_heads=4, n_layers=2, d_ff=24, pool=pool)).double().eval()
    layers = torch_twin(model)  # the blocks now hold the torch layers' weights
    x = images(5, 1, 8, 8, seed=4)
    z = patchify(x, 2) @ model.patch.proj.W + model.patch.proj.b  # (B, 16, d)
    if pool == "cls":
        z = torch.cat([model.cls.expand(5, 1, 16), z], dim=1)
    z = z + model.pos.P
    for layer in layers:
        z = layer(z)
    z = F.layer_norm(z, (16,), model.norm.gamma, model.norm.beta)
    pooled = z[:, 0] if pool == "cls" else z.mean(dim=1)
    with torch.no_grad():
        torch.testing.assert_close(model(x), pooled @ model.head.W + model.head.b, rtol=1e-10, atol=1e-10)


def test_vit_shapes_parameters_and_positions():
    mean = ViT(ViTConfig(d_model=32, n_heads=4, n_layers=3, d_ff=64))
    cls = ViT(ViTConfig(d_model=32, n_heads=4, n_layers=3, d_ff=64, pool="cls"))
    x = torch.rand(4, 1, 8, 8)
    assert mean.tokens(x).shape == (4, 16, 32) and cls.tokens(x).shape == (4, 17, 32)
    assert mean(x).shape == cls(x).shape == (4, 10)
    # the class token and its position: d_model numbers each
    assert cls.n_params() - mean.n_params() == 2 * 32
    none = ViT(ViTConfig(d_model=32, n_heads=4, n_layers=3, d_ff=64, positions="none"))
    assert mean.n_params() - none.n_params() == 16 * 32
    with record_attention(mean) as maps:
        mean(x)
    assert list(maps) == [f"blocks.{i}.attn" for i in range(3)]
    assert all(w.shape == (4, 4, 16, 16) for w in maps.values())


def test_vit_without_positions_ignores_the_order_of_the_patches():
    torch.manual_seed(5)
    model = ViT(ViTConfig(d_model=16, n_heads=2, n_layers=2, d_ff=32, positions="none")).double().eval()
    x = images(3, 1, 8, 8, seed=6)
    perm = torch.randperm(16, generator=torch.Generator().manual_seed(7))
    shuffled = unpatchify(patchify(x, 2)[:, perm], 2, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(model(shuffled), model(x), rtol=1e-10, atol=1e-10)
        learned = ViT(ViTConfig(d_model=16, n_heads=2, n_layers=2, d_ff=32)).double().eval()
        learned.pos.P.normal_()
        assert not torch.allclose(learned(shuffled), learned(x), atol=1e-3)


def test_vit_config_errors():
    with pytest.raises(ValueError, match="patch_size 3 must divide image_size 8"):
        ViTConfig(patch_size=3)
    with pytest.raises(ValueError, match="pool must be one of"):
        ViTConfig(pool="max")
    with pytest.raises(ValueError, match="positions must be one of"):
        ViTConfig(positions="rotary")
    with pytest.raises(ValueError, match="divisible by n_heads"):
        ViTConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match=r"images must have shape \(B, 1, 8, 8\); got \(2, 1, 6, 6\)"):
        ViT(ViTConfig())(torch.zeros(2, 1, 6, 6))


def test_sinusoidal_2d_equals_the_formula_by_loops():
    gh, gw, d = 3, 5, 12
    got = sinusoidal_2d(gh, gw, d, dtype=torch.float64)
    half = d // 2
    for i in range(gh):
        for j in range(gw):
            for k in range(half // 2):
                omega = 10000.0 ** (-2 * k / half)
                row = got[i * gw + j]
                assert math.isclose(row[2 * k], math.sin(i * omega), abs_tol=1e-12)
                assert math.isclose(row[2 * k + 1], math.cos(i * omega), abs_tol=1e-12)
                assert math.isclose(row[half + 2 * k], math.sin(j * omega), abs_tol=1e-12)
                assert math.isclose(row[half + 2 * k + 1], math.cos(j * omega), abs_tol=1e-12)
    with pytest.raises(ValueError, match="multiple of 4"):
        sinusoidal_2d(4, 4, 6)


def test_sinusoidal_positions_are_used_by_the_model():
    model = ViT(ViTConfig(d_model=16, n_heads=2, positions="sinusoidal"))
    x = torch.rand(2, 1, 8, 8)
    torch.testing.assert_close(model.tokens(x), model.patch(x) + sinusoidal_2d(4, 4, 16))


# --- where the heads look --------------------------------------------------------------------------------

def random_weights(shape, seed=0):
    return torch.softmax(torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64),
                         dim=-1)


def test_attention_distance_equals_loops_over_queries_and_keys():
    g, p = 3, 2
    w = random_weights((2, 4, 9, 9))
    got = attention_distance(w, g, p)
    want = torch.zeros(2, 4, dtype=torch.float64)
    for q in range(9):
        for k in range(9):
            (qi, qj), (ki, kj) = divmod(q, g), divmod(k, g)
            want += w[..., q, k] * math.hypot((qi - ki) * p, (qj - kj) * p) / 9
    torch.testing.assert_close(got, want)


def test_attention_distance_with_a_class_token_renormalises_the_patches():
    g, p = 2, 4
    w = random_weights((3, 2, 5, 5), seed=1)
    patches = w[..., 1:, 1:] / w[..., 1:, 1:].sum(-1, keepdim=True)
    torch.testing.assert_close(attention_distance(w, g, p, class_token=True), attention_distance(patches, g, p))


def test_patch_centres_are_the_mean_pixel_of_each_patch():
    g, p = 3, 2
    rows, cols = torch.meshgrid(torch.arange(6.0), torch.arange(6.0), indexing="ij")
    img = torch.stack([rows, cols])[None].double()  # (1, 2, 6, 6): each pixel's own coordinates
    torch.testing.assert_close(patch_centres(g, p), patchify(img, p).reshape(1, 9, 2, 4).mean(-1)[0])


def test_offset_weights_equal_loops_and_find_a_convolution_head():
    g = 3
    w = random_weights((2, 9, 9), seed=2)
    got = offset_weights(w, g)  # (2, 5, 5)
    for a in range(-2, 3):
        for b in range(-2, 3):
            picked = [w[:, q, (q // g + a) * g + q % g + b] for q in range(9)
                      if 0 <= q // g + a < g and 0 <= q % g + b < g]
            torch.testing.assert_close(got[:, a + 2, b + 2], torch.stack(picked).sum(0) / 9)
    torch.testing.assert_close(got.sum(dim=(-2, -1)), torch.ones(2, dtype=torch.float64))
    # chapter 10's head for one offset: weight 1 on the key one row up and one column left, where there is one
    conv = torch.zeros(9, 9, dtype=torch.float64)
    for q in range(9):
        i, j = divmod(q, g)
        if i >= 1 and j >= 1:
            conv[q, (i - 1) * g + j - 1] = 1.0
    share, offset = strongest_offset(offset_weights(conv, g))
    assert share.item() == pytest.approx(4 / 9) and offset.tolist() == [-1, -1]
    assert offset_coverage(g)[1, 1].item() == pytest.approx(4 / 9)  # 4 of the 9 queries have that key
    share, offset = strongest_offset(offset_weights(torch.eye(9, dtype=torch.float64), g))
    assert share.item() == 1.0 and offset.tolist() == [0, 0]
    uniform = torch.full((9, 9), 1 / 9, dtype=torch.float64)
    torch.testing.assert_close(offset_weights(uniform, g), offset_coverage(g) / 9)


def test_offsets_and_strongest_offset():
    one_hot = offsets(4)
    assert one_hot.shape == (16, 16, 49) and torch.equal(one_hot.sum(-1), torch.ones(16, 16, dtype=torch.float64))
    m = torch.zeros(2, 7, 7)
    m[0, 1, 5], m[1, 3, 3] = 0.7, 0.4
    share, offset = strongest_offset(m)
    assert share.tolist() == pytest.approx([0.7, 0.4]) and offset.tolist() == [[-2, 2], [0, 0]]


def test_measurement_shape_errors():
    with pytest.raises(ValueError, match=r"\(\.\.\., 16, 16\) for 4 x 4 = 16 patches; got \(2, 17, 17\)"):
        attention_distance(torch.zeros(2, 17, 17), 4, 2)
    with pytest.raises(ValueError, match=r"\(\.\.\., 17, 17\) for 4 x 4 = 16 patches and a class token"):
        offset_weights(torch.zeros(2, 16, 16), 4, class_token=True)
    with pytest.raises(ValueError, match="2g - 1"):
        strongest_offset(torch.zeros(3, 6, 6))


# --- training: the same batches for both models ----------------------------------------------------------

class Recorder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.seen = []

    def forward(self, x):
        self.seen.append(x.clone())
        return self.lin(x.flatten(1))


def test_two_models_trained_with_one_config_see_the_same_batches():
    X = torch.rand(50, 1, 2, 2)
    y = torch.randint(0, 3, (50,), generator=torch.Generator().manual_seed(0))
    config = TrainConfig(steps=5, batch_size=8, lr=1e-2, warmup=1, progress=False, seed=3)
    a, b = Recorder(), Recorder()
    train_classifier(a, X, y, config)
    train_classifier(b, X, y, config)
    assert len(a.seen) == 5 and all(torch.equal(u, v) for u, v in zip(a.seen, b.seen, strict=True))
    g = torch.Generator().manual_seed(3)
    torch.testing.assert_close(a.seen[0], X[torch.randint(50, (8,), generator=g)])


def test_accuracy_counts_the_top_logit():
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 3))
    X = torch.rand(20, 1, 2, 2)
    y = torch.randint(0, 3, (20,), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = sum(int(model(X[i:i + 1]).argmax()) == int(y[i]) for i in range(20)) / 20
    assert accuracy(model, X, y) == pytest.approx(want)


def test_a_small_vit_learns_the_digits_a_little():
    from attnbook.data.digits import load_digits_split  # scikit-learn is pinned in requirements.txt

    data = load_digits_split()
    torch.manual_seed(0)
    model = ViT(ViTConfig(d_model=16, n_heads=2, n_layers=1, d_ff=32))
    train_classifier(model, data.X_train, data.y_train, TrainConfig(steps=150, batch_size=32, lr=3e-3, warmup=10,
                                                                    progress=False))
    assert accuracy(model, data.X_test, data.y_test) > 0.2  # ten classes: chance is about 0.1


def test_small_conv_net_equals_its_functional_form():
    torch.manual_seed(2)
    net = SmallConvNet(widths=(4, 6, 8)).double()
    x = images(3, 1, 8, 8, seed=8)
    c1, c2, c3 = net.features[0], net.features[2], net.features[5]
    h = F.relu(F.conv2d(x, c1.weight, c1.bias, padding=1))
    h = F.max_pool2d(F.relu(F.conv2d(h, c2.weight, c2.bias, padding=1)), 2)
    h = F.relu(F.conv2d(h, c3.weight, c3.bias, padding=1))
    with torch.no_grad():
        torch.testing.assert_close(net(x), h.mean(dim=(2, 3)) @ net.head.W + net.head.b)
    with pytest.raises(ValueError, match=r"images must have shape \(B, 1, H, W\)"):
        net(torch.zeros(2, 3, 8, 8))


# --- the data --------------------------------------------------------------------------------------------

def test_digits_split_is_seeded_disjoint_and_scaled():
    from sklearn.datasets import load_digits

    from attnbook.data.digits import load_digits_split

    a, b = load_digits_split(), load_digits_split()
    assert torch.equal(a.X_test, b.X_test) and torch.equal(a.y_train, b.y_train)
    assert a.X_train.shape == (1437, 1, 8, 8) and a.X_test.shape == (360, 1, 8, 8)
    digits = load_digits()
    both = torch.cat([a.X_train, a.X_test]).reshape(-1, 64).double() * 16
    # every image exactly once: the rows of both, sorted, are the rows of the original, sorted
    original = torch.tensor(digits.data)
    assert torch.equal(torch.unique(both, dim=0, sorted=True), torch.unique(original, dim=0, sorted=True))
    assert len(both) == len(original)
    assert float(a.X_train.min()) == 0.0 and float(a.X_train.max()) == 1.0
    assert not torch.equal(load_digits_split(seed=1).y_test, a.y_test)
    with pytest.raises(ValueError, match="at most 1796"):
        load_digits_split(n_test=1797)


def _bilinear_by_hand(image: np.ndarray, scale: int) -> np.ndarray:
    """Bilinear enlargement written from its definition: new pixel ``u`` reads old position ``(u + 0.5) / scale
    - 0.5``, clamped to the image, and mixes the two old pixels either side by their distances."""
    n = image.shape[0]
    out = np.zeros((n * scale, n * scale))
    for u in range(n * scale):
        for v in range(n * scale):
            value = 0.0
            pu = min(max((u + 0.5) / scale - 0.5, 0.0), n - 1)
            pv = min(max((v + 0.5) / scale - 0.5, 0.0), n - 1)
            i0, j0 = int(np.floor(pu)), int(np.floor(pv))
            for i, wi in ((i0, 1 - (pu - i0)), (min(i0 + 1, n - 1), pu - i0)):
                for j, wj in ((j0, 1 - (pv - j0)), (min(j0 + 1, n - 1), pv - j0)):
                    value += wi * wj * image[i, j]
            out[u, v] = value
    return out


@pytest.mark.parametrize("scale", [2, 4])
def test_enlarged_digits_are_the_bilinear_interpolation_of_the_originals_exactly(scale):
    from attnbook.data.digits import load_digits_split  # scikit-learn holds the digits: pinned, never skipped

    small, big = load_digits_split(), load_digits_split(scale=scale)
    assert big.X_test.shape == (360, 1, 8 * scale, 8 * scale) and torch.equal(big.y_test, small.y_test)
    for k in (0, 7, 359):
        want = _bilinear_by_hand(small.X_test[k, 0].double().numpy(), scale)
        assert np.array_equal(big.X_test[k, 0].double().numpy(), want)  # exact: every weight is a power-of-2 fraction
    with pytest.raises(ValueError, match="scale must be 1, 2 or 4"):
        load_digits_split(scale=3)
