"""The trainer, its schedule and loss, the sequence tasks, and exact-match evaluation."""

import math

import pytest
import torch
import torch.nn.functional as F

import attnbook.torch as at
from attnbook.data.tasks import BOS, EOS, PAD, PLUS, VOCAB_SIZE, decode_tokens, make_task
from attnbook.training import TrainConfig, exact_match, lr_at, sequence_loss, train
from attnbook.training.optimisation import optimizer_step
from attnbook.training.seq2seq import default_model_config, shift_right, train_seq2seq


def test_schedule_warms_up_then_decays():
    lrs = [lr_at(s, 1.0, 10, 110, final=0.1) for s in range(110)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(a <= b for a, b in zip(lrs[:9], lrs[1:10], strict=True))  # rising
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:], strict=False))  # falling
    assert lrs[-1] == pytest.approx(0.1)
    assert lrs[10 + 50] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 50 / 99)))
    assert lr_at(60, 1.0, 10, 110, shape="linear") == pytest.approx(1 - 50 / 99)
    with pytest.raises(ValueError, match="shape must be 'cosine', 'linear' or 'trapezoid'"):
        lr_at(0, 1.0, 1, 10, shape="step")


def test_sequence_loss_masks_padding_and_smooths_labels():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 7)
    targets = torch.tensor([[3, 4, 2, 0], [5, 2, 0, 0]])
    real = targets != 0
    manual = -torch.log_softmax(logits, -1).gather(-1, targets[..., None])[..., 0][real].mean()
    torch.testing.assert_close(sequence_loss(logits, targets, pad_id=0), manual)
    # Changing the logits at padded positions changes nothing.
    changed = logits.clone()
    changed[~real] = 100.0
    torch.testing.assert_close(sequence_loss(changed, targets, pad_id=0), manual)
    eps = 0.1
    logp = torch.log_softmax(logits, -1)[real]
    smooth = (-(1 - eps) * logp.gather(-1, targets[real][:, None])[:, 0] - eps * logp.mean(-1)).mean()
    torch.testing.assert_close(sequence_loss(logits, targets, 0, label_smoothing=eps), smooth)
    with pytest.raises(ValueError, match=r"disagree: got \(2, 4, 7\) and \(2, 3\)"):
        sequence_loss(logits, targets[:, :3])


@pytest.mark.parametrize("task", ["reverse", "sort", "add"])
def test_tasks_are_correct_deterministic_and_held_out(task):
    data = make_task(task, n_train=300, n_test=50, min_len=1, max_len=4, seed=3)
    again = make_task(task, n_train=300, n_test=50, min_len=1, max_len=4, seed=3)
    assert torch.equal(data.train_src, again.train_src) and torch.equal(data.test_tgt, again.test_tgt)
    for src, tgt in zip(data.test_src.tolist(), data.test_tgt.tolist(), strict=True):
        question, answer = decode_tokens(src), decode_tokens(tgt)
        assert EOS in tgt and answer
        if task == "reverse":
            assert answer == question[::-1]
        elif task == "sort":
            assert answer == "".join(sorted(question))
        else:  # numbers are written least significant digit first
            a, b = question.split("+")
            assert int(answer[::-1]) == int(a[::-1]) + int(b[::-1])
            assert PLUS in src
    train_sources = {tuple(r) for r in data.train_src.tolist()}
    held_out = data.val_src.tolist() + data.test_src.tolist()
    assert not any(tuple(r) in train_sources for r in held_out)
    assert len({tuple(r) for r in held_out}) == len(held_out)


def test_shift_right_is_teacher_forcing_input():
    tgt = torch.tensor([[7, 8, 9, EOS], [5, EOS, PAD, PAD]])
    assert shift_right(tgt).tolist() == [[BOS, 7, 8, 9], [BOS, 5, EOS, PAD]]


def tiny_lm_run(seed=0, steps=30):
    torch.manual_seed(seed)
    model = at.GPT(at.GPTConfig(vocab_size=11, block_size=8, n_layers=1, n_heads=2, d_model=16))
    data = torch.randint(0, 11, (200, 9), generator=torch.Generator().manual_seed(0))

    def get_batch(g):
        rows = data[torch.randint(0, 200, (16,), generator=g)]
        return rows[:, :-1], rows[:, 1:]

    def loss_fn(m, batch):
        x, y = batch
        return F.cross_entropy(m(x).reshape(-1, 11), y.reshape(-1))

    config = TrainConfig(steps=steps, batch_size=16, lr=3e-3, warmup=5, progress=False, seed=seed)
    return model, train(model, get_batch, loss_fn, config)


def test_seed_makes_a_cpu_run_repeat_exactly():
    model_a, run_a = tiny_lm_run()
    model_b, run_b = tiny_lm_run()
    assert run_a.losses == run_b.losses
    for pa, pb in zip(model_a.parameters(), model_b.parameters(), strict=True):
        assert torch.equal(pa, pb)
    _, run_c = tiny_lm_run(seed=1)
    assert run_c.losses != run_a.losses


def test_tiny_model_overfits_one_batch():
    torch.manual_seed(0)
    model = at.EncoderDecoderTransformer(default_model_config(d_model=32))
    data = make_task("reverse", n_train=8, n_test=4, min_len=3, max_len=5, seed=0)
    batch = (data.train_src, shift_right(data.train_tgt), data.train_tgt)

    def loss_fn(m, b):
        return sequence_loss(m(b[0], b[1]), b[2])

    config = TrainConfig(steps=150, batch_size=8, lr=3e-3, warmup=10, weight_decay=0.0, progress=False)
    result = train(model, lambda g: batch, loss_fn, config)
    assert result.losses[-1] < 0.05 < result.losses[0]
    assert exact_match(model, data.train_src, data.train_tgt, BOS, EOS) == 1.0


@pytest.mark.parametrize("clip", [0.0, 0.05, 1e6])
def test_clipping_scales_the_whole_gradient_down_to_grad_clip(clip):
    """optimizer_step with grad_clip: a gradient longer than grad_clip is scaled to length grad_clip (all the
    parameters together, direction kept); a shorter one, or grad_clip 0, is left as it is. Plain SGD with rate 1
    makes the update the gradient itself, which is compared with autograd's unclipped one."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))
    x = torch.randn(16, 4)
    before = [p.detach().clone() for p in model.parameters()]
    loss = 100 * model(x).square().mean()
    grads = torch.autograd.grad(loss, list(model.parameters()), retain_graph=True)
    norm = torch.sqrt(sum(g.square().sum() for g in grads))
    optimizer_step(model, torch.optim.SGD(model.parameters(), lr=1.0), loss, clip)
    updates = [b - p.detach() for b, p in zip(before, model.parameters(), strict=True)]
    scale = min(1.0, clip / float(norm)) if clip else 1.0
    assert float(norm) > 0.05  # the middle case clips
    for update, grad in zip(updates, grads, strict=True):
        torch.testing.assert_close(update, scale * grad, rtol=1e-5, atol=1e-7)


def test_training_reduces_the_loss_and_stops_at_the_target():
    config = TrainConfig(steps=400, batch_size=32, lr=2e-3, warmup=40, eval_every=100, target=0.5, progress=False)
    data = make_task("reverse", n_train=2000, n_test=100, min_len=2, max_len=4, seed=1)
    run = train_seq2seq("reverse", config, default_model_config(d_model=32), data=data, n_val_eval=100)
    first, last = sum(run.result.losses[:20]) / 20, sum(run.result.losses[-20:]) / 20
    assert last < 0.7 * first
    assert run.result.evals[-1][1] >= 0.5 and run.result.seconds_to_target is not None
    assert run.result.steps_done < 400 and run.n_params > 0


class Oracle(torch.nn.Module):
    """A stand-in encoder-decoder whose greedy output is the reversed source, right or off by one."""

    def __init__(self, wrong=False):
        super().__init__()
        self.wrong = wrong

    def encode(self, src):
        return src, src != PAD

    def decode(self, out, memory, mask):
        B, T = out.shape
        answer = [list(reversed([t for t in row if t != PAD])) + [EOS] for row in memory.tolist()]
        logits = torch.zeros(B, T, VOCAB_SIZE)
        for b in range(B):
            token = answer[b][T - 1] if T - 1 < len(answer[b]) else EOS
            if self.wrong and T == 1:
                token = 4 + (token - 4 + 1) % 10 if token >= 4 else token
            logits[b, -1, token] = 1.0
        return logits


def test_exact_match_against_an_oracle():
    data = make_task("reverse", n_train=50, n_test=20, min_len=2, max_len=5, seed=2)
    assert exact_match(Oracle(), data.test_src, data.test_tgt, BOS, EOS) == 1.0
    assert exact_match(Oracle(wrong=True), data.test_src, data.test_tgt, BOS, EOS) == 0.0


def test_config_errors():
    with pytest.raises(ValueError, match=r"warmup must lie in \[0, steps = 10\]; got 20"):
        TrainConfig(steps=10, warmup=20)


def test_seq2seq_training_repeats_exactly_on_cpu():
    data = make_task("reverse", n_train=500, n_test=20, min_len=2, max_len=6, seed=4)
    config = TrainConfig(steps=40, batch_size=64, lr=1e-3, warmup=10, progress=False)
    a = train_seq2seq("reverse", config, default_model_config(d_model=32), data=data, n_val_eval=20)
    b = train_seq2seq("reverse", config, default_model_config(d_model=32), data=data, n_val_eval=20)
    assert a.result.losses == b.result.losses
